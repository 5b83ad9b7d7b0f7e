// Tool calls waiting for a person's decision (spec 14): each pending approval of the thread
// with its tool, the arguments shown as formatted JSON, an optional reason and Approve /
// Reject. Approving names the hash of the arguments shown (`arguments_hash`), so what is
// approved is what was on the screen. Read with the thread (GET /api/threads/{id}
// `approvals`) and kept live by the stream's approval_requested / approval_decided frames.
import { api, el, pretty, toast } from "./api.js";

export class Approvals {
  constructor({ threadId, box, list, onChange }) {
    this.threadId = threadId;
    this.box = box;
    this.list = list;
    this.onChange = onChange || (() => {});
    this.known = new Map(); // tool_call_id -> approval, as last seen
  }

  get(callId) {
    return this.known.get(callId);
  }

  // the thread was read anew: its pending approvals
  reset(approvals) {
    this.known.clear();
    for (const a of approvals || []) this.known.set(a.tool_call_id, a);
    this.render();
  }

  // an approval as a frame or a decision's answer shows it now
  apply(approval) {
    if (!approval || !approval.tool_call_id) return;
    const old = this.known.get(approval.tool_call_id);
    // a late frame never takes a decided approval back to pending
    if (old && old.state !== "pending" && approval.state === "pending") return;
    this.known.set(approval.tool_call_id, approval);
    this.render();
    this.onChange(approval.tool_call_id);
  }

  pending() {
    return [...this.known.values()]
      .filter((a) => a.state === "pending")
      .sort((a, b) => a.requested_at - b.requested_at);
  }

  // cards are kept while pending (a reason being typed survives other frames)
  render() {
    const waiting = this.pending();
    const ids = new Set(waiting.map((a) => a.tool_call_id));
    for (const card of [...this.list.children]) {
      if (!ids.has(card.dataset.callId)) card.remove();
    }
    for (const a of waiting) {
      const shown = this.list.querySelector(`li[data-call-id="${CSS.escape(a.tool_call_id)}"]`);
      if (!shown) this.list.append(this.card(a));
      else if (shown.dataset.hash !== a.arguments_hash) shown.replaceWith(this.card(a));
    }
    this.box.hidden = waiting.length === 0;
  }

  card(a) {
    const reasonId = `approval-reason-${a.tool_call_id}`;
    const reason = el("input", { id: reasonId, class: "approval-reason", type: "text", maxlength: 10000, placeholder: "Optional" });
    const approve = el("button", { type: "button", class: "primary" }, "Approve");
    const reject = el("button", { type: "button", class: "danger" }, "Reject");
    const card = el("li", { class: "approval", dataset: { callId: a.tool_call_id, tool: a.tool, hash: a.arguments_hash }, "aria-label": `Approval of ${a.tool}` },
      el("div", { class: "approval-head" },
        el("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
        el("span", { class: "tool-name" }, a.tool),
        el("span", { class: "badge badge-tool-approval" }, "awaiting approval")),
      el("div", { class: "label" }, "Arguments"),
      el("pre", { class: "json approval-arguments" }, pretty(a.arguments)),
      el("div", { class: "approval-hash muted small mono", title: a.arguments_hash }, a.arguments_hash),
      el("div", { class: "approval-actions" },
        el("label", { for: reasonId }, "Reason"),
        reason,
        approve,
        reject));
    const decide = async (yes) => {
      approve.disabled = true;
      reject.disabled = true;
      const body = yes ? { approve: true, arguments_hash: a.arguments_hash } : { approve: false };
      if (reason.value.trim()) body.reason = reason.value.trim();
      try {
        const answer = await api(
          `/api/threads/${this.threadId}/approvals/${encodeURIComponent(a.tool_call_id)}`,
          { method: "POST", body },
        );
        this.apply(answer.approval);
      } catch (err) {
        toast(`Not decided: ${err.message}`, "error");
        approve.disabled = false;
        reject.disabled = false;
        if (err.status === 404 || err.status === 409) this.refresh();
      }
    };
    approve.addEventListener("click", () => decide(true));
    reject.addEventListener("click", () => decide(false));
    return card;
  }

  // decided elsewhere, cancelled, or the arguments changed: read the approvals anew
  async refresh() {
    try {
      const listed = await api(`/api/threads/${this.threadId}/approvals`);
      for (const a of listed.approvals) this.apply(a);
    } catch (err) {
      toast(err.message, "error");
    }
  }
}
