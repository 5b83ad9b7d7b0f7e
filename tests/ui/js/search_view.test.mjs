// Unit tests of search_view.js with Node's own test runner (node --test): the message
// search's page logic without a browser (C08-223). Run by tests/ui/test_ui_units.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

const source = new URL("../../../src/threadloom/server/ui/static/js/search_view.js", import.meta.url);
const { searchQuery, searchText, snippetSegments, hitHref, countText, matchesText, SEARCH_PAGE } = await import(
  `data:text/javascript,${encodeURIComponent(await readFile(source, "utf8"))}`
);

test("c08_223 a search's request carries the text, the set filters and the page", () => {
  const q = searchQuery("  kettle  ", { agent_id: "support", status: "", tag: "billing", search: "x", user_id: "" }, 40);
  assert.deepEqual(q, { q: "kettle", limit: SEARCH_PAGE, offset: 40, agent_id: "support", tag: "billing" });
  assert.equal(searchQuery("a", {}).offset, 0);
});

test("c08_223 the URL's search text", () => {
  assert.equal(searchText(new URLSearchParams("q=%20red%20fox&tag=a")), "red fox");
  assert.equal(searchText(new URLSearchParams("tag=a")), "");
});

test("c08_223 a snippet is text with marks, markup staying text", () => {
  const parts = [
    { text: "<b>blue</b> ", match: false },
    { text: "teapot", match: true },
    { text: "", match: false },
    { text: 3, match: true },
    { text: " & more", match: "yes" },
  ];
  assert.deepEqual(snippetSegments(parts), [
    { text: "<b>blue</b> ", mark: false },
    { text: "teapot", mark: true },
    { text: " & more", mark: false },
  ]);
  assert.deepEqual(snippetSegments(undefined), []);
});

test("c08_223 a hit links to its thread at its message", () => {
  const href = hitHref({ thread: { id: "t 1/x" }, message_id: "m#2" });
  assert.equal(href, "/threads/t%201%2Fx#m-m%232");
  assert.equal(hitHref({ thread: { id: "abc" }, message_id: "def" }), "/threads/abc#m-def");
});

test("c08_223 the count and the matches say how many", () => {
  assert.equal(countText(0, 0), "No thread's messages match.");
  assert.equal(countText(1, 1), "1 thread found");
  assert.equal(countText(45, 20), "20 of 45 threads found");
  assert.equal(matchesText(1), "");
  assert.equal(matchesText(3), "3 matching messages");
});
