// The threads page's message search (spec 08 §8.14, docs/ui.md): GET /api/search with the
// text of the search box and the list's filters, its hits in place of the thread list —
// each the thread, a snippet of its best message (the matched words marked, the text only
// ever text) and a link to that message — paged with "More results". The URL keeps the
// text (`?q=`), so a reload or a shared link shows the same hits. "/" focuses the box,
// Escape in it clears the search. The page logic is in search_view.js.
import { api, el, clear, timeEl, statusPill, threadName } from "./api.js";
import { SEARCH_FILTERS, countText, hitHref, matchesText, searchQuery, searchText, snippetSegments } from "./search_view.js";

const form = document.getElementById("message-search");
const box = document.getElementById("search-q");
const clearButton = document.getElementById("search-clear");
const results = document.getElementById("search-results");
const list = document.getElementById("search-hits");
const count = document.getElementById("search-count");
const more = document.getElementById("search-more");
const filters = document.getElementById("filters");
const listParts = [document.querySelector(".table-wrap"), document.querySelector("nav.pager")];
let text = "";
let shown = 0;
let current = null;

function filterValues() {
  return Object.fromEntries(SEARCH_FILTERS.map((name) => [name, filters.elements[name]?.value || ""]));
}

// the URL keeps the search's text beside the list's own parameters
function keepText() {
  const params = new URLSearchParams(location.search);
  if (text) params.set("q", text);
  else params.delete("q");
  const query = params.toString();
  history.replaceState(null, "", query ? `/?${query}` : "/");
}

function snippet(hit) {
  return el("p", { class: "snippet" }, snippetSegments(hit.snippet).map((s) => (s.mark ? el("mark", {}, s.text) : s.text)));
}

function hitItem(hit) {
  const t = hit.thread;
  const link = el("a", { href: hitHref(hit), class: "hit-link" }, threadName(t) || t.id.slice(0, 8));
  const agent = (t.agent && t.agent.title) || t.agent_id;
  return el(
    "li",
    { class: "search-hit", dataset: { threadId: t.id, messageId: hit.message_id } },
    el("div", { class: "hit-head" }, link, " ", el("span", { class: "muted small" }, agent), " ",
      statusPill(t.status, t.terminated), " ", el("span", { class: "muted small" }, timeEl(t.last_activity_at, "s", true))),
    snippet(hit),
    matchesText(hit.matches) ? el("span", { class: "muted small" }, matchesText(hit.matches)) : null,
  );
}

function showList(on) {
  for (const part of listParts) if (part) part.hidden = !on;
  results.hidden = on;
  clearButton.hidden = on;
}

async function run(append = false) {
  const offset = append ? shown : 0;
  const mine = (current = api("/api/search", { query: searchQuery(text, filterValues(), offset) }));
  let page;
  try {
    page = await mine;
  } catch (err) {
    if (mine !== current) return;
    count.textContent = err.message;
    count.classList.add("error-text");
    return;
  }
  if (mine !== current) return; // a newer search was started meanwhile
  count.classList.remove("error-text");
  if (!append) {
    clear(list);
    shown = 0;
  }
  for (const hit of page.hits) list.append(hitItem(hit));
  shown += page.hits.length;
  count.textContent = countText(page.total, shown);
  more.hidden = !page.hasMore;
  results.dataset.state = "done";
}

function start() {
  text = box.value.trim();
  keepText();
  if (!text) {
    stop();
    return;
  }
  showList(false);
  results.dataset.state = "loading";
  run();
}

function stop() {
  text = "";
  box.value = "";
  current = null;
  clear(list);
  keepText();
  showList(true);
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  start();
});
box.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && (text || box.value)) {
    event.preventDefault();
    stop();
  }
});
box.addEventListener("search", () => { if (!box.value) stop(); }); // the box's own clear (×)
clearButton.addEventListener("click", () => {
  stop();
  box.focus();
});
more.addEventListener("click", () => run(true));
// the list's filters narrow the search too (the thread list keeps reading them as well)
filters.addEventListener("change", () => { if (text) run(); });
filters.addEventListener("input", (event) => {
  if (text && event.target.name === "tag") {
    clearTimeout(filters.searchTyping);
    filters.searchTyping = setTimeout(() => run(), 300);
  }
});
// "/" anywhere but in a field focuses the search box
document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target.closest?.("input, textarea, select, [contenteditable]")) return;
  event.preventDefault();
  box.focus();
  box.select();
});

box.value = searchText(new URLSearchParams(location.search));
if (box.value) start();
