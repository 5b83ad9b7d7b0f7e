// What the fork actions of a thread page decide, without the DOM (spec 08 §8.3.8): which
// messages offer "Fork" and "Edit and rerun", what an edit sends, and how a thread's
// lineage reads. Imports nothing, so Node's test runner checks it as the browser runs it.

function queued(m) {
  return Boolean(m && m.metadata && m.metadata.queued);
}

// a stored, finished message can be forked at: not a queue entry (not history yet), not
// one still being generated (the server would answer 409 fork_point_unfinished)
export function forkable(m) {
  return Boolean(m && m.id && !queued(m) && m.status !== "pending");
}

// "Edit and rerun" is offered on a person's top-level message: fork there with new text,
// then let the agent answer it in the fork
export function editable(m) {
  return forkable(m) && m.role === "user" && !(m.depth > 0);
}

// the body of an edit: null when the text is blank (nothing to send) — the server refuses
// a blank edit too; the text itself is sent as typed
export function editBody(m, text) {
  if (typeof text !== "string" || !text.trim()) return null;
  return { message_id: m.id, content: text };
}

export function shortId(id) {
  return typeof id === "string" ? id.slice(0, 8) : "";
}

// a fork's lineage as the page shows it: the original's link and the message's anchor;
// null for a thread that is no fork
export function lineage(thread) {
  if (!thread || !thread.forked_from_thread_id) return null;
  const from = thread.forked_from_thread_id;
  const at = thread.forked_from_message_id || "";
  return {
    thread: from,
    threadHref: `/threads/${encodeURIComponent(from)}`,
    threadLabel: shortId(from),
    message: at,
    messageHref: `/threads/${encodeURIComponent(from)}#m-${encodeURIComponent(at)}`,
    messageLabel: shortId(at),
  };
}

// the forks of a thread as links, oldest first, each named by its preview or its id
export function forkLinks(forks) {
  return (forks || []).map((t) => ({
    id: t.id,
    href: `/threads/${encodeURIComponent(t.id)}`,
    label: shortId(t.id),
    title: t.last_message_preview || t.id,
  }));
}
