// Sub-prompt messages, nested under their parent. A message written inside a sub-prompt
// (depth > 0) names in `parent_id` the tool-result message of the call that ran the
// sub-prompt (spec 01 §1.4.7, spec 04 §4.17). The messages sharing a `parent_id` form one
// group: a fold of its own ("Sub-prompt <name> · n messages"), shown inside the fold of that
// call, where its tool result is shown — or under the parent itself when the parent is shown
// on its own. While the sub-prompt runs its parent is not stored yet (its id is reserved), so
// the group stands in the list after the message before it, and moves under its parent when
// that arrives. A group inside a group is the same rule one level down.
import { el } from "./api.js";
import { isQueued } from "./messages.js";

export class Groups {
  // the conversation's state, shared: records (id -> message), callOwner (tool call id ->
  // id of the message that made it), the list element, node(id) and the top-level order
  constructor({ records, callOwner, list, node, order }) {
    this.records = records;
    this.callOwner = callOwner;
    this.list = list;
    this.node = node;
    this.order = order;
    this.groups = new Map(); // parent_id -> {parentId, el, list, ids, slot, hostId, call}
  }

  clear() {
    this.groups.clear();
  }

  // a new sub-prompt message `m`, rendered as `li`: into its group, by created_at
  add(m, li) {
    const g = this.groupOf(m.parent_id);
    let i = g.ids.length;
    while (i > 0 && (this.records.get(g.ids[i - 1]).created_at || 0) > (m.created_at || 0)) i--;
    const next = i < g.ids.length ? g.list.querySelector(`:scope > [data-id="${CSS.escape(g.ids[i])}"]`) : null;
    g.ids.splice(i, 0, m.id);
    g.list.insertBefore(li, next);
    this.placeGroup(g);
  }

  // `m` is gone (deleted, or out of the loaded window): an empty group goes too
  leave(m) {
    const g = this.groups.get(m.parent_id);
    if (!g) return;
    const at = g.ids.indexOf(m.id);
    if (at >= 0) g.ids.splice(at, 1);
    if (g.ids.length) {
      this.label(g);
      return;
    }
    g.el.remove();
    if (g.slot) g.slot.remove();
    this.groups.delete(g.parentId);
  }

  hostedBy(id) {
    return [...this.groups.values()].filter((g) => g.hostId === id);
  }

  // take out the groups shown inside message `id` (before it is drawn again or removed)
  detach(id) {
    const hosted = this.hostedBy(id);
    for (const g of hosted) g.el.remove();
    return hosted;
  }

  reattach(hosted) {
    for (const g of hosted) if (this.groups.get(g.parentId) === g) this.placeGroup(g);
  }

  // the group whose parent is `parentId`, if any, to its place
  place(parentId) {
    const g = this.groups.get(parentId);
    if (g) this.placeGroup(g);
  }

  placeAll() {
    for (const g of this.groups.values()) this.placeGroup(g);
  }

  groupOf(parentId) {
    let g = this.groups.get(parentId);
    if (!g) {
      const nested = el("ol", { class: "messages nested" });
      const fold = el("details", { class: "subprompt", open: true, dataset: { parentId } },
        el("summary", {},
          el("span", { class: "subprompt-title" }, "Sub-prompt"),
          el("span", { class: "subprompt-count muted small" })),
        nested);
      g = { parentId, el: fold, list: nested, ids: [], slot: null, hostId: null, call: null };
      this.groups.set(parentId, g);
    }
    return g;
  }

  label(g) {
    const first = this.records.get(g.ids[0]);
    const n = g.ids.length;
    const name = first && first.prompt ? `Sub-prompt ${first.prompt}` : "Sub-prompt";
    g.el.querySelector(".subprompt-title").textContent = name;
    g.el.querySelector(".subprompt-count").textContent = ` · ${n} message${n === 1 ? "" : "s"} · depth ${first ? first.depth : ""}`;
    const badge = g.call && g.call.querySelector(":scope > summary .badge-subprompt");
    if (badge) badge.textContent = `sub-prompt · ${n}`;
  }

  // where a group is shown: the fold of the call its parent (a tool result) answers, or the
  // parent itself when that is shown on its own; null while the parent is unknown
  hostOf(parentId) {
    const parent = this.records.get(parentId);
    if (!parent) return null;
    const ownerId = parent.tool_call_id && this.callOwner.get(parent.tool_call_id);
    if (parent.role === "tool" && ownerId && this.records.has(ownerId)) {
      const owner = this.node(ownerId);
      const call = owner && owner.querySelector(`details.tool[data-call-id="${CSS.escape(parent.tool_call_id)}"]`);
      if (call) return { el: call.querySelector(":scope > .tool-body"), id: ownerId, call };
    }
    const li = this.node(parentId);
    return li && !li.hidden ? { el: li, id: parentId, call: null } : null;
  }

  placeGroup(g) {
    const host = this.hostOf(g.parentId);
    if (host) {
      if (g.slot) g.slot.remove();
      g.slot = null;
      g.hostId = host.id;
      g.call = host.call;
      if (g.el.parentNode !== host.el) host.el.append(g.el);
      if (host.call) {
        const summary = host.call.querySelector(":scope > summary");
        if (!summary.querySelector(".badge-subprompt")) summary.append(el("span", { class: "badge badge-subprompt" }));
      }
      this.label(g);
      return;
    }
    // not under its parent yet: in the list, after the newest message not newer than it
    g.hostId = null;
    g.call = null;
    if (!g.slot) g.slot = el("li", { class: "subprompt-slot" });
    if (g.el.parentNode !== g.slot) g.slot.append(g.el);
    const at = (this.records.get(g.ids[0]) || {}).created_at || 0;
    const order = this.order();
    let after = null;
    for (let i = order.length - 1; i >= 0; i--) {
      const r = this.records.get(order[i]);
      if (!isQueued(r) && (r.created_at || 0) <= at) {
        after = this.node(order[i]);
        break;
      }
    }
    if (after) {
      if (after.nextElementSibling !== g.slot) after.after(g.slot);
    } else if (this.list.firstElementChild !== g.slot) {
      this.list.prepend(g.slot);
    }
    this.label(g);
  }
}
