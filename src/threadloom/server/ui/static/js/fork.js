// Fork and edit-and-rerun on a thread page (spec 08 §8.3.8, docs/ui.md): a "Fork" button on
// each finished message (a new thread holding the history up to it), "Edit and rerun" on a
// person's messages (the fork's copy has the new text, then the agent answers it there), and
// the lineage in the thread's head: "forked from <thread> at <message>" on a fork, its forks
// on an original. The decisions are fork_model.js's; this module only draws and calls.
import { api, el, clear, toast } from "./api.js";
import { forkable, editable, editBody, lineage, forkLinks } from "./fork_model.js";

export class Forks {
  constructor({ threadId, origin, forks }) {
    this.threadId = threadId;
    this.origin = origin; // <span> of "forked from … at …"
    this.forks = forks; // <span> listing this thread's forks
    this.busy = false;
  }

  // the message's actions, added to its rendering (thread.js draws every message here)
  decorate(li, m) {
    if (!forkable(m)) return;
    const bar = el("div", { class: "msg-actions", role: "group", "aria-label": "Message actions" });
    bar.append(el("button", {
      type: "button", class: "ghost small fork-button",
      title: "Start a new thread with the history up to this message; this thread is not changed",
      "aria-label": "Fork from this message",
      onclick: () => this.fork(m),
    }, "Fork"));
    if (editable(m)) {
      bar.append(el("button", {
        type: "button", class: "ghost small edit-rerun-button",
        title: "Fork at this message with new text, and let the agent answer it in the new thread",
        "aria-label": "Edit and rerun",
        onclick: () => this.edit(li, m),
      }, "Edit and rerun"));
    }
    li.append(bar);
  }

  async fork(m, body = { message_id: m.id }, rerun = false) {
    if (this.busy) return;
    this.busy = true;
    try {
      const made = await api(`/api/threads/${this.threadId}/fork`, { method: "POST", body });
      if (rerun) {
        await api(`/api/threads/${made.threadId}/continue`, { method: "POST", body: {} });
      }
      location.assign(`/threads/${made.threadId}`);
    } catch (err) {
      toast(`Could not fork: ${err.message}`, "error");
    } finally {
      this.busy = false;
    }
  }

  // the inline editor of a person's message: its text in a box, Rerun or Cancel (Escape)
  edit(li, m) {
    if (li.querySelector("form.edit-rerun")) return;
    const box = el("textarea", { class: "edit-rerun-text", rows: "3", "aria-label": "New text of the message" });
    box.value = m.content || "";
    const cancel = () => { form.remove(); bar.hidden = false; bar.querySelector(".edit-rerun-button").focus(); };
    const form = el("form", { class: "edit-rerun", "aria-label": "Edit and rerun" },
      box,
      el("div", { class: "edit-rerun-side" },
        el("button", { type: "submit", class: "primary small" }, "Rerun in a new thread"),
        el("button", { type: "button", class: "ghost small", onclick: cancel }, "Cancel")),
      el("p", { class: "muted small" }, "A new thread gets the history up to here with this text; this thread stays as it is."));
    const bar = li.querySelector(".msg-actions");
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = editBody(m, box.value);
      if (!body) { toast("The new text is empty", "error"); box.focus(); return; }
      this.fork(m, body, true);
    });
    box.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { event.preventDefault(); cancel(); }
      else if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });
    if (bar) bar.hidden = true;
    li.append(form);
    box.focus();
  }

  // the head's lineage: this thread's origin (a fork), and its own forks (read once)
  async applyThread(thread) {
    const from = lineage(thread);
    this.origin.hidden = !from;
    if (from) {
      clear(this.origin).append("forked from ",
        el("a", { href: from.threadHref, title: from.thread }, from.threadLabel),
        " at ",
        el("a", { href: from.messageHref, title: `message ${from.message}` }, `message ${from.messageLabel}`));
    }
    let found = [];
    try {
      found = (await api(`/api/threads/${this.threadId}/forks`)).forks;
    } catch {
      found = [];
    }
    const links = forkLinks(found);
    this.forks.hidden = links.length === 0;
    clear(this.forks);
    if (links.length) {
      this.forks.append(`${links.length === 1 ? "fork" : "forks"}: `);
      links.forEach((f, i) => {
        if (i) this.forks.append(", ");
        this.forks.append(el("a", { href: f.href, title: f.title, class: "mono" }, f.label));
      });
    }
  }

  // a link to a message of this thread (#m-<id>, as "forked from … at message" gives):
  // shown and marked once it is loaded
  reveal() {
    const id = decodeURIComponent(location.hash.replace(/^#m-/, ""));
    if (!location.hash.startsWith("#m-") || !id) return;
    const target = document.getElementById(`m-${id}`);
    if (!target) return;
    target.classList.add("msg-target");
    target.scrollIntoView({ block: "center" });
  }
}
