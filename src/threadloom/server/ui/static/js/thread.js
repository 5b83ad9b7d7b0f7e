// A thread: the conversation read over HTTP (newest page first, older pages on demand),
// kept live by the thread's WebSocket stream (spec 09) from the `seq` of that read, and
// resumed from the last `seq` applied after a dropped connection or a server restart.
// The page preloads that read and every module imported here (pages.py): a first, cold
// visit waits on one round of requests, not on a chain of them. The other tabs' modules
// (panels.js, timeline.js) are imported when one of their tabs is first shown.
import { api, el, clear, statusPill, threadName, toast, fullTime, failureText, orphanBadge, orphanText } from "./api.js";
import { LiveSocket } from "./socket.js";
import { renderMessage, parseCalls, isQueued } from "./messages.js";
import { Markdown } from "./markdown.js";
import { Attachments } from "./attachments.js";
import { Groups } from "./groups.js";
import { Approvals } from "./approvals.js";
import { Forks } from "./fork.js";
import { Compactions } from "./compactions.js";

// at most this many messages are loaded (and in the DOM): paging back past it lets the
// newest go, and "Load newer messages" brings them back, so a long history read from
// end to start costs what a few pages cost
const WINDOW = 500;
const page = document.getElementById("thread-page");
const threadId = page.dataset.threadId;
// messages in a page (the server's: the page preloads the first one, as loadAll asks it)
const PAGE = Number(page.dataset.pageSize);
const who = document.getElementById("who").dataset;
const list = document.getElementById("messages");
const scroller = document.getElementById("conversation");
const olderButton = document.getElementById("load-older");
const newerButton = document.getElementById("load-newer");
const banner = document.getElementById("thread-error");
const composer = document.getElementById("composer");
const textarea = document.getElementById("composer-text");
const sendButton = document.getElementById("composer-send");
const note = document.getElementById("composer-note");
const buttons = {
  stop: document.getElementById("action-stop"),
  continue: document.getElementById("action-continue"),
  terminate: document.getElementById("action-terminate"),
};
const options = {
  silent: document.getElementById("show-silent"),
  subprompts: document.getElementById("show-subprompts"),
  reasoning: document.getElementById("show-reasoning"),
};

const view = {
  threadId,
  labels: { user: "User", assistant: "Assistant" },
  toolResults: new Map(), // tool_call_id -> tool message
  toolLive: new Map(), // tool_call_id -> "running" | "success" | "error" (stream events)
  streaming: new Map(), // message id -> {text, reasoning} while generating
  markdown: new Markdown(), // the assistant's finished texts rendered (markdown.js)
};
const records = new Map();
const callOwner = new Map(); // tool_call_id -> id of the assistant message that made it
let order = []; // message ids in canonical order (spec 08 §8.2.4)
let firstIndex = 0; // position of the oldest loaded message in the ascending order
let lastIndex = null; // position after the newest loaded one; null: the live end is loaded
let seq = null; // the last stream position applied
let socket = null;
let generation = 0;
let status = null;
let terminated = null;
let orphanedAgent = null; // the thread's agent, when the served project lacks it (§8.1.9)
let loaded = false;

// the Logs, Subagents, Files and State tabs (panels.js), once one of them was shown: until
// then what the stream reports of them is not kept (each reads afresh when first shown)
const PANELS = new Set(["logs", "subagents", "files", "state"]);
let panels = null;
let panelsLoaded = null;
function loadPanels() {
  panelsLoaded ||= import("./panels.js").then(
    ({ Panels }) => (panels = new Panels(threadId, who)),
    (err) => { panelsLoaded = null; throw err; }, // tried again when a tab is chosen again
  );
  return panelsLoaded;
}
// pending tool-call approvals (spec 14): cards above the composer, badges on their calls
const approvals = new Approvals({
  threadId,
  box: document.getElementById("approvals"),
  list: document.getElementById("approvals-list"),
  onChange: (callId) => redrawOwner(callId),
});
view.approvals = approvals;
// fork and edit-and-rerun on each message, the lineage in the head (fork.js)
const forks = new Forks({
  threadId,
  origin: document.getElementById("thread-fork-of"),
  forks: document.getElementById("thread-forks"),
});
// the active compaction (spec 23): its summary and an Undo, above the composer
const compactions = new Compactions({
  threadId,
  box: document.getElementById("compactions"),
  list: document.getElementById("compactions-list"),
});
window.threadloom = {
  records,
  get approvals() { return approvals.pending(); },
  get seq() { return seq; },
  get status() { return status; },
  get range() { return { first: firstIndex, last: lastIndex, loaded: records.size }; },
};

// ---- ordering and DOM placement ------------------------------------------------------

// Top-level messages are listed in canonical order (stored messages by created_at, then
// queue entries); sub-prompt messages (depth > 0) are shown in groups under their parent
// (groups.js).
const groups = new Groups({ records, callOwner, list, node: (id) => node(id), order: () => order });

function isNested(m) {
  return m.depth > 0 && Boolean(m.parent_id);
}

function key(m) {
  return [isQueued(m) ? 1 : 0, m.created_at || 0];
}

function before(a, b) {
  const ka = key(a);
  const kb = key(b);
  for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i] < kb[i];
  return false;
}

function place(m) {
  let lo = 0;
  let hi = order.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (before(records.get(order[mid]), m)) lo = mid + 1;
    else hi = mid;
  }
  order.splice(lo, 0, m.id);
  return lo;
}

function node(id) {
  return document.getElementById(`m-${id}`);
}

function hiddenTool(m) {
  return m.role === "tool" && m.tool_call_id && records.has(callOwner.get(m.tool_call_id));
}

function draw(m) {
  const li = renderMessage(m, view);
  forks.decorate(li, m);
  if (hiddenTool(m)) li.hidden = true; // shown inside its call's fold
  const old = node(m.id);
  if (old) {
    // the sub-prompt groups it holds move to the new rendering
    const hosted = groups.detach(m.id);
    // keep the folds a reader opened
    const open = [...old.querySelectorAll("details")].map((d) => d.open);
    li.querySelectorAll("details").forEach((d, i) => { if (open[i]) d.open = true; });
    old.replaceWith(li);
    groups.reattach(hosted);
  }
  return li;
}

function insertNode(li, index) {
  const nextId = order[index + 1];
  const nextNode = nextId ? node(nextId) : null;
  list.insertBefore(li, nextNode);
}

// ---- records ---------------------------------------------------------------------------

function atBottom() {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 120;
}

function toBottom() {
  scroller.scrollTop = scroller.scrollHeight;
}

function redrawOwner(callId) {
  const owner = records.get(callOwner.get(callId));
  if (owner) draw(owner);
}

function upsert(m) {
  const old = records.get(m.id);
  const oldKey = old ? key(old) : null;
  records.set(m.id, m);
  if (m.status !== "pending") view.streaming.delete(m.id);
  for (const call of parseCalls(m)) callOwner.set(call.id, m.id);
  if (isNested(m)) {
    const li = draw(m);
    if (!old) groups.add(m, li);
  } else {
    const newKey = key(m);
    const moved = !oldKey || oldKey.some((v, i) => v !== newKey[i]);
    if (moved) {
      if (old) {
        order.splice(order.indexOf(m.id), 1);
        node(m.id)?.remove();
      }
      const index = place(m);
      insertNode(draw(m), index);
      groups.reattach(groups.hostedBy(m.id));
    } else {
      draw(m);
    }
  }
  if (m.role === "tool" && m.tool_call_id) {
    view.toolResults.set(m.tool_call_id, m);
    redrawOwner(m.tool_call_id);
  }
  for (const call of parseCalls(m)) {
    // results that arrived before their call: fold them (and what they hold) in now
    const result = view.toolResults.get(call.id);
    if (result && node(result.id)) node(result.id).hidden = true;
    if (result) groups.place(result.id);
  }
  // the parent of a running sub-prompt arrived: its group moves under it
  groups.place(m.id);
}

function remove(id) {
  const m = records.get(id);
  if (!m) return;
  const li = node(id);
  const hosted = groups.detach(id);
  records.delete(id);
  view.streaming.delete(id);
  if (isNested(m)) groups.leave(m);
  else order.splice(order.indexOf(id), 1);
  li?.remove();
  if (m.role === "tool" && m.tool_call_id) {
    view.toolResults.delete(m.tool_call_id);
    redrawOwner(m.tool_call_id);
  }
  groups.reattach(hosted);
}

// ---- header, status and composer ----------------------------------------------------

function applyThread(info) {
  const t = info.thread;
  const agent = info.agent;
  const name = threadName(t);
  const title = name || (agent && agent.title) || t.agent_id;
  document.getElementById("thread-title").textContent = title;
  document.title = `${title} · Threadloom`;
  const agentLine = document.getElementById("thread-agent");
  agentLine.textContent = `agent ${(agent && agent.title) || t.agent_id}`;
  orphanedAgent = t.orphaned ? t.agent_id : null;
  if (orphanedAgent) agentLine.append(" ", orphanBadge(orphanedAgent));
  if (agent) {
    view.labels.user = agent.side_b_label || "User";
    view.labels.assistant = agent.side_a_label || agent.title || "Assistant";
  }
  const tags = clear(document.getElementById("thread-tags"));
  for (const tag of t.tags || []) {
    const params = new URLSearchParams({ tag });
    tags.append(el("a", { class: "tag", href: `/?${params}`, title: `Threads tagged ${tag}` }, tag));
  }
  const args = t.arguments || {};
  document.getElementById("thread-arguments").hidden = Object.keys(args).length === 0;
  document.getElementById("thread-arguments-body").textContent = JSON.stringify(args, null, 2);
  if (t.parent) {
    document.getElementById("thread-parent").hidden = false;
    const link = document.getElementById("thread-parent-link");
    link.href = `/threads/${t.parent}`;
    link.textContent = t.parent.slice(0, 8);
  }
  forks.applyThread(t);
  applyStatus(info.status, t.terminated);
}

function applyStatus(next, term) {
  status = next || status;
  terminated = term ?? null;
  const pill = document.getElementById("run-status");
  clear(pill).append(...statusPill(status, terminated).childNodes);
  pill.className = `status status-${status ? status.state : "idle"}`;
  pill.dataset.state = status ? status.state : "idle";
  pill.dataset.reason = (status && status.reason) || "";
  const running = status && status.state === "running";
  const why = failureText(status);
  document.getElementById("run-failure").hidden = !why;
  document.getElementById("run-failure-text").textContent = why || "";
  const logId = status && status.error && status.error.log_id;
  const logButton = document.getElementById("run-failure-log");
  logButton.hidden = !(why && logId && who.logs === "true");
  logButton.dataset.logId = logId || "";
  buttons.stop.disabled = !running;
  buttons.continue.disabled = running || terminated !== null || orphanedAgent !== null;
  buttons.terminate.disabled = terminated !== null;
  document.getElementById("composer-attach").disabled = terminated !== null || orphanedAgent !== null;
  if (terminated !== null) {
    textarea.disabled = true;
    sendButton.disabled = true;
    composer.dataset.disabled = "terminated";
    note.hidden = false;
    note.textContent = `This thread was terminated on ${fullTime(terminated / 1000)}: it accepts no new messages. Reading, logs and files still work.`;
  } else if (orphanedAgent !== null) {
    textarea.disabled = true;
    sendButton.disabled = true;
    composer.dataset.disabled = "orphaned";
    note.hidden = false;
    note.textContent = `${orphanText(orphanedAgent)} It accepts no new messages; reading, logs and files still work. Reassign the thread to another agent, or open it on a server of the project that has "${orphanedAgent}".`;
  } else {
    textarea.disabled = false;
    sendButton.disabled = false;
    delete composer.dataset.disabled;
    if (note.dataset.kind !== "error") note.hidden = true;
  }
  panels?.statusChanged();
  if (timelineShown()) timeline?.changed();
}

function showError(text) {
  banner.textContent = text;
  banner.hidden = false;
}

// ---- reading over HTTP -----------------------------------------------------------------

function filterQuery() {
  return {
    includeSilent: options.silent.checked ? "true" : undefined,
    depth: options.subprompts.checked ? 10 : undefined,
  };
}

function reset() {
  records.clear();
  callOwner.clear();
  view.toolResults.clear();
  view.toolLive.clear();
  view.streaming.clear();
  order = [];
  groups.clear();
  clear(list);
}

async function loadAll() {
  const mine = ++generation;
  if (socket) socket.stop();
  socket = null;
  let info;
  let pageData;
  try {
    [info, pageData] = await Promise.all([
      api(`/api/threads/${threadId}`),
      api(`/api/threads/${threadId}/messages`, { query: { limit: PAGE, order: "desc", ...filterQuery() } }),
    ]);
  } catch (err) {
    if (mine !== generation) return;
    if (err.status === 403 || err.status === 404) {
      showError(err.message);
      page.classList.add("unavailable");
      composer.hidden = true;
      document.querySelector(".tabs").hidden = true;
      for (const b of Object.values(buttons)) b.disabled = true;
      document.getElementById("run-status").textContent = "unavailable";
      return;
    }
    showError(`Could not load the thread: ${err.message}. Retrying…`);
    setTimeout(() => { if (mine === generation) loadAll(); }, 2000);
    return;
  }
  if (mine !== generation) return;
  banner.hidden = true;
  seq = pageData.seq;
  // the socket's handshake goes on while the page is drawn: its frames are applied after
  // this function has run to its end, so from the read's seq as before
  openStream();
  reset();
  approvals.reset(info.approvals);
  applyThread(info);
  for (const m of pageData.messages) upsert(m);
  firstIndex = pageData.total - pageData.messages.length;
  lastIndex = null;
  olderButton.hidden = firstIndex <= 0;
  newerButton.hidden = true;
  newerButton.textContent = "Load newer messages";
  loaded = true;
  toBottom();
  forks.reveal();
  compactions.load();
  revealLinked(mine);
}

// a link to one message (`#m-<id>`: a hit of the threads page's search): older pages are
// read until it is there, then it is scrolled into view and flashed
async function revealLinked(mine) {
  if (!location.hash.startsWith("#m-")) return;
  const id = decodeURIComponent(location.hash.slice(3));
  for (let n = 0; !node(id) && firstIndex > 0 && n < 20 && mine === generation; n++) await loadOlder();
  const li = node(id);
  if (!li || mine !== generation) return;
  li.hidden = false;
  li.scrollIntoView({ block: "center" });
  li.classList.add("flash");
  setTimeout(() => li.classList.remove("flash"), 1600);
}

async function loadOlder() {
  if (firstIndex <= 0) return;
  const start = Math.max(0, firstIndex - PAGE);
  const mine = generation;
  olderButton.disabled = true;
  try {
    const older = await api(`/api/threads/${threadId}/messages`, {
      query: { order: "asc", offset: start, limit: firstIndex - start, ...filterQuery() },
    });
    if (mine !== generation) return;
    const height = scroller.scrollHeight;
    const top = scroller.scrollTop;
    for (const m of older.messages) if (!records.has(m.id)) upsert(m);
    // tool results whose call just arrived fold into it, with their sub-prompt groups
    for (const m of records.values()) if (hiddenTool(m) && node(m.id)) node(m.id).hidden = true;
    groups.placeAll();
    firstIndex = start;
    // what was put above, measured before the trim below: the view stays on the message
    // being read (with the trim's height in it, reading far back left the view at the top)
    const added = scroller.scrollHeight - height;
    // past the window, the newest go (they are below, out of sight)
    if (trim(true)) lastIndex = firstIndex + records.size;
    olderButton.hidden = firstIndex <= 0;
    newerButton.hidden = lastIndex === null;
    scroller.scrollTop = top + added;
  } catch (err) {
    toast(err.message, "error");
  } finally {
    olderButton.disabled = false;
  }
}

async function loadNewer() {
  if (lastIndex === null) return;
  const mine = generation;
  newerButton.disabled = true;
  try {
    const newer = await api(`/api/threads/${threadId}/messages`, {
      query: { order: "asc", offset: lastIndex, limit: PAGE, ...filterQuery() },
    });
    if (mine !== generation) return;
    if (lastIndex + newer.messages.length >= newer.total) {
      // back at the live end: read it as on opening (the stream resumes from its seq)
      await loadAll();
      return;
    }
    for (const m of newer.messages) if (!records.has(m.id)) upsert(m);
    lastIndex += newer.messages.length;
    const height = scroller.scrollHeight;
    const top = scroller.scrollTop;
    firstIndex += trim(false); // the oldest go, above: keep what is on screen in place
    scroller.scrollTop = top - (height - scroller.scrollHeight);
    olderButton.hidden = firstIndex <= 0;
  } catch (err) {
    toast(err.message, "error");
  } finally {
    newerButton.disabled = false;
  }
}

// the loaded messages in the API's order (its pages count them so)
function loadedInOrder() {
  return [...records.values()].sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0));
}

// a message leaves the loaded window (not a deletion: a call keeps its known result)
function forget(m) {
  const hosted = groups.detach(m.id);
  records.delete(m.id);
  view.streaming.delete(m.id);
  if (isNested(m)) groups.leave(m);
  else order.splice(order.indexOf(m.id), 1);
  node(m.id)?.remove();
  groups.reattach(hosted);
}

// keep at most WINDOW messages loaded, letting the newest (fromEnd) or the oldest go;
// how many went
function trim(fromEnd) {
  const loaded = loadedInOrder();
  const extra = loaded.length - WINDOW;
  if (extra <= 0) return 0;
  const gone = fromEnd ? loaded.slice(loaded.length - extra).reverse() : loaded.slice(0, extra);
  for (const m of gone) forget(m);
  // a tool result whose call left is shown on its own
  for (const m of records.values()) {
    const li = m.role === "tool" ? node(m.id) : null;
    if (li && li.hidden && !hiddenTool(m)) li.hidden = false;
  }
  groups.placeAll();
  return extra;
}

// ---- the stream ------------------------------------------------------------------------

function streamUrl() {
  const q = new URLSearchParams();
  if (seq !== null) q.set("since", String(seq));
  if (options.silent.checked) q.set("includeSilent", "true");
  if (options.subprompts.checked) q.set("depth", "10");
  if (options.reasoning.checked) q.set("reasoning", "true");
  if (who.logs === "true") q.set("logs", "true"); // log_data frames keep the Logs tab live
  return `/api/threads/${threadId}/stream?${q}`;
}

function applyChunk(frame, field) {
  const m = records.get(frame.message_id);
  if (m && m.status !== "pending") return; // late chunk of a finished message
  const live = view.streaming.get(frame.message_id) || { text: "", reasoning: "" };
  const chars = Array.from(live[field] || "");
  if (frame.offset <= chars.length) {
    live[field] = chars.slice(0, frame.offset).join("") + frame.chunk;
  }
  view.streaming.set(frame.message_id, live);
  if (m) draw(m);
}

function onFrame(frame) {
  if (typeof frame.seq === "number" && (seq === null || frame.seq > seq)) seq = frame.seq;
  const bottom = atBottom();
  switch (frame.type) {
    case "thread_status":
      applyStatus(frame.status, frame.terminated);
      break;
    case "message_data":
      // beyond the loaded window (the newest were let go): "Load newer messages" has it
      if (lastIndex !== null && !records.has(frame.data.id)) {
        newerButton.textContent = "Load newer messages (new ones arrived)";
        break;
      }
      upsert(frame.data);
      break;
    case "message_chunk":
      applyChunk(frame, "text");
      break;
    case "reasoning_chunk":
      applyChunk(frame, "reasoning");
      break;
    case "message_deleted":
      remove(frame.message_id);
      break;
    case "resync":
      loadAll();
      return;
    case "log_data":
      panels?.logChanged(frame.data);
      break;
    case "subagent_updated":
      panels?.subagentUpdated(frame.data);
      break;
    case "approval_requested":
    case "approval_decided":
      approvals.apply(frame.data);
      break;
    case "state_updated":
      panels?.stateUpdated(frame);
      break;
    case "event":
      if (frame.eventType === "tool_call_started" || frame.eventType === "tool_call_done") {
        const d = frame.data || {};
        view.toolLive.set(d.id, frame.eventType === "tool_call_started" ? "running" : d.status || "success");
        redrawOwner(d.id);
      } else if ((frame.eventType || "").startsWith("file_")) {
        panels?.filesChanged();
      } else if (frame.eventType === "compaction_created" || frame.eventType === "compaction_undone") {
        compactions.show(frame.data);
      }
      break;
    case "error":
      toast(frame.error || "Stream error", "error");
      break;
    default:
      break;
  }
  if (bottom) toBottom();
}

function openStream() {
  const liveText = document.getElementById("stream-live-text");
  const live = document.getElementById("stream-live");
  socket = new LiveSocket({
    url: streamUrl,
    onFrame,
    onState: (state) => {
      liveText.textContent = state;
      live.dataset.state = state;
      if (state === "closed") showError("This thread was deleted.");
      if (state === "revoked") showError("Your access to this thread was revoked.");
    },
    onRefused: async () => {
      // 401 sends the page to the login (api.js); 403 and 404 end the stream
      try {
        await api(`/api/threads/${threadId}`);
      } catch (err) {
        if (err.status === 403 || err.status === 404) {
          if (socket) socket.stop();
          showError(err.message);
        }
      }
    },
  }).start();
}

// ---- acting on the thread ------------------------------------------------------------

function composerNote(text, kind) {
  note.textContent = text;
  note.dataset.kind = kind || "";
  note.hidden = !text;
}

const files = new Attachments({
  form: composer,
  textarea,
  button: document.getElementById("composer-attach"),
  input: document.getElementById("composer-file-input"),
  list: document.getElementById("composer-files"),
  note: composerNote,
  enabled: () => !textarea.disabled,
});

composer.addEventListener("submit", async (event) => {
  event.preventDefault();
  const content = textarea.value;
  if ((!content.trim() && !files.count) || textarea.disabled) return;
  sendButton.disabled = true;
  try {
    const attachments = await files.payload();
    await api(`/api/threads/${threadId}/messages`, {
      method: "POST",
      body: {
        content,
        role: document.getElementById("composer-role").value,
        ...(attachments.length ? { attachments } : {}),
        metadata: { client_message_id: crypto.randomUUID() },
      },
    });
    textarea.value = "";
    files.sent(attachments.length);
    composerNote("");
    textarea.focus();
    if (lastIndex !== null) loadAll(); // reading far back: go to the end, where it is
  } catch (err) {
    if (err.status === 423) applyStatus(status, err.body.terminated);
    else if (orphanRefusal(err)) applyStatus(status, terminated);
    else composerNote(`Not sent: ${err.message}`, "error");
  } finally {
    sendButton.disabled = terminated !== null || orphanedAgent !== null;
  }
});

textarea.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

// a send or continue refused because the served project lacks the thread's agent (the
// agent went away after the page loaded): the page shows the thread as orphaned
function orphanRefusal(err) {
  if (err.status !== 409 || !err.body || err.body.code !== "agent_not_found") return false;
  orphanedAgent = err.body.agent_id;
  return true;
}

async function act(name, body) {
  buttons[name].disabled = true;
  try {
    const path = name === "continue" ? "continue" : name;
    const result = await api(`/api/threads/${threadId}/${path}`, { method: "POST", body: body || {} });
    if (name === "terminate") applyStatus(status, result.terminated);
  } catch (err) {
    orphanRefusal(err);
    toast(err.message, "error");
    applyStatus(status, terminated);
  }
}

document.getElementById("run-failure-log").addEventListener("click", async (event) => {
  const id = event.currentTarget.dataset.logId;
  if (await select(document.getElementById("tab-logs"))) panels.openLog(id);
});
buttons.stop.addEventListener("click", () => act("stop"));
// Continue after the agent's own reply runs the model again on the same history: a second
// answer (and any subagent it starts, again). Said before it happens (docs/ui.md).
function answeredLast() {
  if (lastIndex !== null || !order.length) return false;
  const last = records.get(order[order.length - 1]);
  return Boolean(last && last.role === "assistant");
}
buttons.continue.addEventListener("click", () => {
  const again = "The agent answered last. Continue runs it again on this thread as it is, without a new message: its model answers once more, which may repeat the reply (and start its subagents again). Continue?";
  if (!answeredLast() || confirm(again)) act("continue");
});
document.getElementById("action-delete").addEventListener("click", async (event) => {
  const what = "Delete this thread with its messages, logs, files and child threads? This cannot be undone.";
  if (!confirm(what)) return;
  event.currentTarget.disabled = true;
  try {
    await api(`/api/threads/${threadId}`, { method: "DELETE" });
    location.assign("/");
  } catch (err) {
    toast(err.message, "error");
    event.currentTarget.disabled = false;
  }
});
buttons.terminate.addEventListener("click", () => {
  if (confirm("Terminate this thread? It will accept no new messages.")) act("terminate");
});
olderButton.addEventListener("click", loadOlder);
newerButton.addEventListener("click", loadNewer);
scroller.addEventListener("scroll", () => {
  if (scroller.scrollTop < 40 && loaded && firstIndex > 0 && !olderButton.disabled) loadOlder();
  const nearEnd = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
  if (nearEnd && loaded && lastIndex !== null && !newerButton.disabled) loadNewer();
});
for (const box of Object.values(options)) box.addEventListener("change", () => { seq = null; loadAll(); });

// ---- tabs ------------------------------------------------------------------------------

const tabs = [...document.querySelectorAll("[role=tab]")];
// the Timeline tab (timeline.js), once it was shown
let timeline = null;
let timelineLoaded = null;
const timelineLinks = {
  // a call's message: in the conversation, when it is on the pages read
  showMessage(id) {
    select(document.getElementById("tab-conversation"));
    const li = node(id);
    if (!li) { toast("That message is not on the pages read; scroll back to it.", "info"); return; }
    li.hidden = false;
    li.scrollIntoView({ block: "center" });
    li.classList.add("flash");
    setTimeout(() => li.classList.remove("flash"), 1600);
  },
  async showLog(id) {
    if (await select(document.getElementById("tab-logs"))) panels.openLog(id);
  },
};
function loadTimeline() {
  // its own import asked for at once too: one round of requests, not two in a row
  timelineLoaded ||= Promise.all([import("./timeline.js"), import("./timeline_model.js")]).then(
    ([{ Timeline }]) => (timeline = new Timeline(threadId, who.logs === "true", timelineLinks)),
    (err) => { timelineLoaded = null; throw err; },
  );
  return timelineLoaded;
}
function timelineShown() {
  return selected(document.getElementById("tab-timeline"));
}
function selected(tab) {
  return tab.getAttribute("aria-selected") === "true";
}
// show a tab, its module imported first when it has one not yet loaded; whether the tab is
// still the one shown once that is done (another may have been chosen meanwhile)
async function select(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", on ? "true" : "false");
    t.tabIndex = on ? 0 : -1;
    document.getElementById(t.getAttribute("aria-controls")).hidden = !on;
  }
  const name = tab.id.replace("tab-", "");
  try {
    if (PANELS.has(name)) await loadPanels();
    if (name === "timeline") await loadTimeline();
  } catch (err) {
    toast(`Could not load this tab: ${err.message}`, "error");
    return false;
  }
  if (!selected(tab)) return false;
  panels?.show(name);
  if (name === "timeline") timeline.load();
  return true;
}
for (const tab of tabs) {
  tab.addEventListener("click", () => select(tab));
  tab.addEventListener("keydown", (event) => {
    const i = tabs.indexOf(tab);
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      const next = tabs[(i + (event.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
      next.focus();
      select(next);
    }
  });
}
const wanted = tabs.find((t) => `#${t.id.replace("tab-", "")}` === location.hash);
if (wanted) select(wanted);

loadAll();
