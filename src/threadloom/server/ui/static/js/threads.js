// The threads list: GET /api/threads a page at a time with the filters of the form (kept
// in the URL), live from the /api/events socket (spec 09 §9.14), and "new thread".
import { api, el, clear, timeEl, statusPill, threadName, toast, failureText, orphanBadge } from "./api.js";
import { LiveSocket } from "./socket.js";

const PAGE = 50;
// the form's filters, as GET /api/threads names them (`tag`: an exact tag, done by the store)
const FILTERS = ["agent_id", "status", "tag", "search", "user_id", "parent"];
const who = document.getElementById("who").dataset;
const isAdmin = who.admin === "true";
const body = document.getElementById("threads-body");
const filters = document.getElementById("filters");
const count = document.getElementById("threads-count");
const prev = document.getElementById("page-prev");
const next = document.getElementById("page-next");
const agentTitles = new Map();
const owners = new Map();
let offset = 0;
let total = 0;
let loading = null;
let reloadTimer = null;

function readUrl() {
  const params = new URLSearchParams(location.search);
  for (const name of FILTERS) {
    const field = filters.elements[name];
    if (field) field.value = params.get(name) || "";
  }
  offset = Math.max(0, parseInt(params.get("offset") || "0", 10) || 0);
}

function query() {
  const q = { limit: PAGE, offset, sort: "activity" };
  for (const name of FILTERS) {
    const value = filters.elements[name]?.value;
    if (value) q[name] = value;
  }
  return q;
}

function writeUrl() {
  const q = query();
  delete q.limit;
  delete q.sort;
  if (!q.offset) delete q.offset;
  const searched = new URLSearchParams(location.search).get("q"); // the message search's (search.js)
  if (searched) q.q = searched;
  const text = new URLSearchParams(q).toString();
  history.replaceState(null, "", text ? `/?${text}` : "/");
}

function userCell(userId) {
  if (userId === null || userId === undefined) return el("span", { class: "muted" }, "—");
  if (userId === who.userId) return el("span", {}, "you");
  const owner = owners.get(userId);
  return el("span", { title: userId }, owner ? owner.display_name || owner.username || userId : userId.slice(0, 8));
}

function failureLine(status) {
  const why = failureText(status);
  return why ? el("div", { class: "failure-line small" }, why) : null;
}

// the tags seen so far, offered by the tag filter (a datalist: typing still works)
const knownTags = new Set();
function suggestTags(threads) {
  const list = document.getElementById("known-tags");
  for (const t of threads) {
    for (const tag of t.tags || []) {
      if (knownTags.has(tag) || knownTags.size >= 500) continue;
      knownTags.add(tag);
      list.append(el("option", { value: tag }));
    }
  }
}

// a tag filters the list by itself (exactly) when followed
function tagLink(tag) {
  const params = new URLSearchParams({ tag });
  return el("a", { class: "tag", href: `/?${params}`, title: `Only threads tagged ${tag}`, dataset: { tag } }, tag);
}

function row(t) {
  const name = threadName(t);
  const agentName = t.agent_id || t.agent_name;
  const title = (t.agent && t.agent.title) || agentTitles.get(agentName) || agentName;
  const failed = t.status && t.status.state === "failed";
  const classes = [failed ? "failed" : "", t.orphaned ? "orphaned" : ""].filter(Boolean).join(" ");
  const tr = el("tr", { id: `t-${t.id}`, class: classes, dataset: { threadId: t.id } });
  const link = el("a", { href: `/threads/${t.id}`, class: "thread-link" }, name || t.id.slice(0, 8));
  const first = el("td", {}, link);
  if (t.parent) first.append(el("span", { class: "badge", title: `child of ${t.parent}` }, "child"));
  const agentCell = el("td", {}, title);
  if (t.orphaned) agentCell.append(" ", orphanBadge(agentName));
  tr.append(
    first,
    agentCell,
    el("td", { class: "status-cell" }, statusPill(t.status, t.terminated), failureLine(t.status)),
    el("td", { class: "preview" }, t.last_message_preview || el("span", { class: "muted" }, "no message yet")),
    el("td", {}, userCell(t.user_id)),
    el("td", {}, (t.tags || []).map(tagLink)),
    el("td", {}, timeEl(t.created_at, "s")),
    el("td", { class: "activity" }, timeEl(t.last_activity_at, "s", true)),
  );
  return tr;
}

async function load() {
  writeUrl();
  const mine = (loading = api("/api/threads", { query: query() }));
  let page;
  try {
    page = await mine;
  } catch (err) {
    if (mine !== loading) return;
    clear(body).append(el("tr", {}, el("td", { colspan: 8, class: "error-text" }, err.message)));
    return;
  }
  if (mine !== loading) return; // a newer load was started meanwhile
  total = page.total;
  clear(body);
  if (!page.threads.length) {
    body.append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No threads match.")));
  }
  for (const t of page.threads) body.append(row(t));
  suggestTags(page.threads);
  const last = offset + page.threads.length;
  count.textContent = total ? `${offset + 1}–${last} of ${total}` : "0 threads";
  prev.disabled = offset === 0;
  next.disabled = !page.hasMore;
}

function reloadSoon() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(load, 250);
}

function activity(frame) {
  const tr = document.getElementById(`t-${frame.threadId}`);
  if (!tr) {
    if (offset === 0) reloadSoon();
    return;
  }
  if (frame.status) {
    const cell = tr.querySelector(".status-cell");
    const terminated = cell.querySelector(".badge-terminated") !== null;
    clear(cell).append(statusPill(frame.status, terminated));
    const why = failureLine(frame.status);
    if (why) cell.append(why);
    tr.classList.toggle("failed", frame.status.state === "failed");
  }
  if (frame.last_activity_at) {
    clear(tr.querySelector(".activity")).append(timeEl(frame.last_activity_at, "s", true));
  }
  if ("last_message_preview" in frame && frame.last_message_preview) {
    tr.querySelector(".preview").textContent = frame.last_message_preview;
  }
  // the order (by activity) or a status filter may have changed
  if (offset === 0 || filters.elements.status.value) reloadSoon();
}

function onFrame(frame) {
  if (frame.type === "thread_activity") activity(frame);
  else if (["thread_created", "thread_updated", "thread_deleted"].includes(frame.type)) reloadSoon();
}

async function setup() {
  readUrl();
  const agents = await api("/api/agents").catch(() => ({ agents: [] }));
  const newAgent = document.getElementById("new-agent");
  const filterAgent = filters.elements.agent_id;
  const selected = filterAgent.value;
  for (const a of agents.agents) {
    agentTitles.set(a.id, a.title);
    filterAgent.append(el("option", { value: a.id }, a.title));
  }
  // New thread offers the agents a user starts first, and starts with the first of them:
  // a subagent-only agent (started by its parent's tool call) comes last, marked.
  const startable = [...agents.agents].sort((a, b) => Number(b.primary) - Number(a.primary));
  for (const a of startable) {
    const label = a.primary ? a.title : `${a.title} (subagent)`;
    newAgent.append(el("option", { value: a.id }, label));
  }
  if (startable.length) newAgent.value = startable[0].id;
  for (const a of agents.agents) agentVariables.set(a.id, a.variables || []);
  newAgent.addEventListener("change", drawArguments);
  drawArguments();
  filterAgent.value = selected;
  if (!agents.agents.length) {
    newAgent.append(el("option", { value: "" }, "no agents"));
    document.getElementById("new-thread-button").disabled = true;
  }
  if (isAdmin) {
    const facet = await api("/api/threads/owners").catch(() => ({ owners: [] }));
    const select = filters.elements.user_id;
    const chosen = new URLSearchParams(location.search).get("user_id") || "";
    for (const o of facet.owners) {
      if (o.user_id === null) continue;
      owners.set(o.user_id, o);
      select.append(el("option", { value: o.user_id }, `${o.display_name || o.username || o.user_id} (${o.thread_count})`));
    }
    select.value = chosen;
    document.getElementById("filter-user-field").hidden = owners.size === 0;
  }
  await load();
  const liveText = document.getElementById("list-live-text");
  const live = document.getElementById("list-live");
  new LiveSocket({
    url: () => `/api/events?scope=${isAdmin ? "all" : "user"}`,
    onFrame,
    onState: (state) => {
      liveText.textContent = state;
      live.dataset.state = state;
    },
    onOpen: () => reloadSoon(), // no resume on this socket: list again (spec 09 §9.14)
  }).start();
}

filters.addEventListener("change", () => {
  offset = 0;
  load();
});
filters.addEventListener("submit", (event) => {
  event.preventDefault();
  offset = 0;
  load();
});
let typing = null;
for (const name of ["search", "tag"]) {
  filters.elements[name].addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => {
      offset = 0;
      load();
    }, 300);
  });
}
body.addEventListener("click", (event) => {
  // following a tag filters in place (the URL keeps it, as for the form)
  const link = event.target.closest("a.tag");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  filters.elements.tag.value = link.dataset.tag;
  offset = 0;
  load();
});
// paging reads the filters as typed: a reload still waiting for the typing to pause
// would take the list back to its first page
prev.addEventListener("click", () => {
  clearTimeout(typing);
  offset = Math.max(0, offset - PAGE);
  load();
});
next.addEventListener("click", () => {
  clearTimeout(typing);
  offset += PAGE;
  load();
});

// the variables the chosen agent's prompts declare (GET /api/agents `variables`): each one
// a required field of the form, sent as the thread's `arguments`
const agentVariables = new Map();
function drawArguments() {
  const box = clear(document.getElementById("new-arguments"));
  for (const v of agentVariables.get(document.getElementById("new-agent").value) || []) {
    const id = `new-argument-${v.name}`;
    box.append(el("label", { for: id }, v.name),
      el("input", { id, name: v.name, required: true, placeholder: v.description, title: v.description, dataset: { argument: v.name } }));
  }
}

document.getElementById("new-thread").addEventListener("submit", async (event) => {
  event.preventDefault();
  const agent = document.getElementById("new-agent").value;
  if (!agent) return;
  const body = { agent_id: agent };
  const fields = [...document.querySelectorAll("#new-arguments input")];
  if (fields.length) body.arguments = Object.fromEntries(fields.map((f) => [f.dataset.argument, f.value]));
  try {
    const created = await api("/api/threads", { method: "POST", body });
    location.assign(`/threads/${created.threadId}`);
  } catch (err) {
    toast(err.message, "error");
  }
});

setup();
