// The thread's active compaction (spec 23): the model reads a summary in place of the older
// messages, which stay in the thread and on this page. A marker above the composer says how
// many messages the summary stands for, shows the summary, and offers Undo (DELETE
// /api/threads/{id}/compactions/{cid}), after which the next request carries the originals.
// Read with the thread (GET /api/threads/{id}/compactions), and kept current by the stream's
// compaction_created / compaction_undone events (spec 09 §9.9.4).
import { api, el, toast } from "./api.js";

export class Compactions {
  constructor({ threadId, box, list }) {
    this.threadId = threadId;
    this.box = box;
    this.list = list;
  }

  async load() {
    try {
      const listed = await api(`/api/threads/${this.threadId}/compactions`);
      const active = listed.compactions.find((c) => c.id === listed.active) || null;
      this.render(active);
    } catch (err) {
      toast(`Could not read the compactions: ${err.message}`, "error");
    }
  }

  // A stream event: the record it names, if it is the active one; else read the list (the
  // compaction active after an undo may be an older one).
  show(data) {
    const record = data && data.compaction;
    if (record && data.active === record.id) this.render(record);
    else if (data && data.active === null) this.render(null);
    else this.load();
  }

  render(active) {
    this.list.replaceChildren();
    this.box.hidden = active === null;
    if (active !== null) this.list.append(this.card(active));
  }

  card(c) {
    const undo = el("button", { type: "button" }, "Undo");
    const card = el("li", { class: "approval compaction", dataset: { compactionId: c.id }, "aria-label": "Compaction" },
      el("div", { class: "approval-head" },
        el("span", { class: "badge" }, c.trigger),
        el("span", { class: "compaction-range" },
          `${c.message_count} messages summarised for the model; the originals are kept`)),
      el("div", { class: "label" }, "Summary"),
      el("pre", { class: "json compaction-summary" }, c.summary),
      el("div", { class: "approval-actions" }, undo));
    undo.addEventListener("click", async () => {
      undo.disabled = true;
      try {
        await api(`/api/threads/${this.threadId}/compactions/${encodeURIComponent(c.id)}`,
          { method: "DELETE" });
        toast("Compaction undone: the next request carries the original messages");
      } catch (err) {
        toast(`Not undone: ${err.message}`, "error");
      }
      await this.load();
    });
    return card;
  }
}
