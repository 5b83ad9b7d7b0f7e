// The page logic of the threads page's message search (spec 08 §8.14, docs/ui.md), apart
// from the DOM so Node's test runner checks it (tests/ui/js/search_view.test.mjs): the
// request of a search, what the URL keeps of it, a hit's snippet as text and marks, and
// the link to a hit's message. Imports nothing.

export const SEARCH_PAGE = 20;
// the thread list's filters a search combines with its text (GET /api/search takes them)
export const SEARCH_FILTERS = ["agent_id", "status", "tag", "user_id", "parent"];

// the query of GET /api/search: the text, the set filters, the page
export function searchQuery(text, filters, offset = 0, limit = SEARCH_PAGE) {
  const q = { q: text.trim(), limit, offset };
  for (const name of SEARCH_FILTERS) {
    const value = filters[name];
    if (value) q[name] = value;
  }
  return q;
}

// the search text a URL's query carries ("" when none)
export function searchText(params) {
  return (params.get("q") || "").trim();
}

// a snippet's parts as segments to draw: [{text, mark}], empty texts left out; a part is
// only ever text (a message's markup stays text), marked when the search matched it
export function snippetSegments(parts) {
  const out = [];
  for (const part of parts || []) {
    if (typeof part?.text !== "string" || part.text === "") continue;
    out.push({ text: part.text, mark: part.match === true });
  }
  return out;
}

// the thread page at the hit's message (the page's message elements are `m-<id>`)
export function hitHref(hit) {
  return `/threads/${encodeURIComponent(hit.thread.id)}#m-${encodeURIComponent(hit.message_id)}`;
}

// "3 threads found" / "1 thread found" / "No thread's messages match"
export function countText(total, shown) {
  if (!total) return "No thread's messages match.";
  const noun = total === 1 ? "thread" : "threads";
  return shown < total ? `${shown} of ${total} ${noun} found` : `${total} ${noun} found`;
}

// "2 matching messages" beside a hit whose thread has more than one
export function matchesText(matches) {
  return matches > 1 ? `${matches} matching messages` : "";
}
