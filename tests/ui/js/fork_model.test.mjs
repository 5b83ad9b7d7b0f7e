// Unit tests of fork_model.js with Node's own test runner (node --test): which messages
// offer Fork and Edit and rerun, what an edit sends, how a lineage reads. Run by
// tests/ui/test_ui_units.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

// imported from its text, as timeline_model.test.mjs explains (it imports nothing)
const source = new URL("../../../src/threadloom/server/ui/static/js/fork_model.js", import.meta.url);
const { forkable, editable, editBody, lineage, forkLinks, shortId } = await import(
  `data:text/javascript,${encodeURIComponent(await readFile(source, "utf8"))}`
);

const user = { id: "u1", role: "user", content: "hi", status: "completed", depth: 0 };

test("a stored, finished message can be forked at; a queue entry or a generating one cannot", () => {
  assert.equal(forkable(user), true);
  assert.equal(forkable({ ...user, role: "assistant" }), true);
  assert.equal(forkable({ ...user, role: "tool" }), true);
  assert.equal(forkable({ ...user, status: "pending" }), false);
  assert.equal(forkable({ ...user, metadata: { queued: true, queue_status: "queued" } }), false);
  assert.equal(forkable({ ...user, status: "failed" }), true);
  assert.equal(forkable(null), false);
});

test("Edit and rerun is a person's top-level message only", () => {
  assert.equal(editable(user), true);
  assert.equal(editable({ ...user, role: "assistant" }), false);
  assert.equal(editable({ ...user, role: "system" }), false);
  assert.equal(editable({ ...user, depth: 1 }), false);
  assert.equal(editable({ ...user, status: "pending" }), false);
});

test("an edit sends the message id and the text as typed; a blank text sends nothing", () => {
  assert.deepEqual(editBody(user, "  new text\n"), { message_id: "u1", content: "  new text\n" });
  assert.equal(editBody(user, " \n\t"), null);
  assert.equal(editBody(user, ""), null);
  assert.equal(editBody(user, undefined), null);
});

test("a fork's lineage links the original and the message; a thread that is no fork has none", () => {
  assert.equal(lineage({ id: "t", forked_from_thread_id: null }), null);
  assert.equal(lineage(null), null);
  const from = lineage({
    id: "t2",
    forked_from_thread_id: "0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11",
    forked_from_message_id: "1f0e7c2a-5b3d-4e8f-9a0b-1c2d3e4f5a6b",
  });
  assert.equal(from.threadHref, "/threads/0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11");
  assert.equal(from.threadLabel, "0d6f3a52");
  assert.equal(
    from.messageHref,
    "/threads/0d6f3a52-8f5e-4a57-9a0e-2f1d0c7b9e11#m-1f0e7c2a-5b3d-4e8f-9a0b-1c2d3e4f5a6b",
  );
  assert.equal(from.messageLabel, "1f0e7c2a");
});

test("the forks list keeps the answer's order, each named by its id and titled by its preview", () => {
  const links = forkLinks([
    { id: "aaaaaaaa-1", last_message_preview: "first" },
    { id: "bbbbbbbb-2", last_message_preview: null },
  ]);
  assert.deepEqual(links.map((l) => [l.label, l.title, l.href]), [
    ["aaaaaaaa", "first", "/threads/aaaaaaaa-1"],
    ["bbbbbbbb", "bbbbbbbb-2", "/threads/bbbbbbbb-2"],
  ]);
  assert.deepEqual(forkLinks(undefined), []);
  assert.equal(shortId(undefined), "");
});
