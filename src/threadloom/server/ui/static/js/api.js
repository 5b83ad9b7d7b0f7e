// Talking to the public API (/api, same origin): JSON requests with the session cookie,
// errors as ApiError, and small DOM helpers shared by the pages.

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
    this.code = (body && body.code) || null;
    this.body = body || {};
  }
}

export function loginUrl() {
  const here = location.pathname + location.search;
  return `/login?next=${encodeURIComponent(here)}`;
}

// fetch a JSON route; `body` is sent as JSON. A 401 sends the browser to the login page.
export async function api(path, { method = "GET", body, query, raw = false, headers } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
    }
    const text = params.toString();
    if (text) url += (url.includes("?") ? "&" : "?") + text;
  }
  const init = { method, credentials: "same-origin", headers: { ...(headers || {}) } };
  if (body !== undefined) {
    if (raw) {
      init.body = body;
    } else {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
  }
  const response = await fetch(url, init);
  if (response.status === 204) return null;
  let data = null;
  const type = response.headers.get("content-type") || "";
  if (type.includes("json")) data = await response.json();
  if (!response.ok) {
    if (response.status === 401 && !location.pathname.startsWith("/login")) {
      location.assign(loginUrl());
    }
    throw new ApiError(response.status, data);
  }
  return data;
}

// Build an element: el("a", {href: "/", class: "x"}, "text", child…). Text is never parsed
// as HTML, so record contents cannot inject markup.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const TIME = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });

export function fullTime(ms) {
  return ms ? FULL.format(new Date(ms)) : "";
}

export function shortTime(ms) {
  if (!ms) return "";
  const d = new Date(ms);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return TIME.format(d);
  return FULL.format(d);
}

// "3 min ago" for seconds since the epoch
export function ago(seconds) {
  if (!seconds) return "";
  const diff = Date.now() / 1000 - seconds;
  if (diff < 45) return "just now";
  if (diff < 3600) return `${Math.round(diff / 60)} min ago`;
  if (diff < 86400) return `${Math.round(diff / 3600)} h ago`;
  return `${Math.round(diff / 86400)} d ago`;
}

// a <time> element for seconds (s), milliseconds (ms) or microseconds (us)
export function timeEl(value, unit = "s", relative = false) {
  if (value === null || value === undefined) return el("span", { class: "muted" }, "—");
  const ms = unit === "s" ? value * 1000 : unit === "us" ? value / 1000 : value;
  const iso = new Date(ms).toISOString();
  const text = relative && unit === "s" ? ago(value) : shortTime(ms);
  return el("time", { datetime: iso, title: fullTime(ms) }, text);
}

export function toast(text, kind = "info") {
  const box = document.getElementById("toast");
  if (!box) return;
  box.textContent = text;
  box.dataset.kind = kind;
  box.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { box.hidden = true; }, 5000);
}

export function threadName(thread) {
  for (const tag of thread.tags || []) {
    if (tag.startsWith("name:")) return tag.slice(5);
  }
  return null;
}

// words for the reason codes of spec 08 §8.2.1; the raw code is shown alongside
const REASONS = {
  stop_on_response: "replied",
  stop_tool: "stop tool",
  awaiting_human: "awaiting a human",
  awaiting_approval: "awaiting approval",
  awaiting_client_tool: "awaiting the client's tool",
  hook_blocked: "blocked by a hook",
  aborted_by_user: "stopped by user",
  interrupted: "interrupted",
  aborted: "aborted",
  terminated: "terminated",
  session_stop: "session ended",
  session_fail: "session failed",
  state_stop_session: "session stopped",
  max_session_turns: "turn limit",
  max_side_steps: "step limit",
  max_total_steps: "step limit",
  repeated_tool_error: "repeated tool error",
  step_error: "step error",
  execution_lost: "execution lost",
};

// the status pill: state and reason; a failed run stands out
export function statusPill(status, terminated) {
  const state = (status && status.state) || "idle";
  const reason = status && status.reason;
  const pill = el("span", { class: `status status-${state}`, dataset: { state, reason: reason || "" } });
  pill.append(el("span", { class: "status-dot", "aria-hidden": "true" }), state);
  if (reason) {
    pill.append(el("span", { class: "status-reason", title: reason }, ` · ${REASONS[reason] || reason}`));
  }
  if (terminated) pill.append(el("span", { class: "badge badge-terminated" }, "terminated"));
  const why = failureText(status);
  if (why) pill.title = why;
  return pill;
}

// a thread whose agent the served project does not have (spec 08 §8.1.9): it cannot run
// here, and sends to it are refused (409 agent_not_found)
export function orphanText(agent) {
  return `Agent "${agent}" is not in the project this server serves: this thread cannot run here.`;
}

export function orphanBadge(agent) {
  return el("span", { class: "badge badge-orphaned", title: orphanText(agent) }, "orphaned");
}

// why a run failed, in a sentence: the status's `error` (a Threadloom addition) when the
// server gives one, else the reason code
export function failureText(status) {
  if (!status || status.state !== "failed") return null;
  const error = status.error;
  if (error && error.message) return error.message;
  return `The run failed (${REASONS[status.reason] || status.reason || "no reason given"}).`;
}

export function pretty(text) {
  if (text === null || text === undefined) return "";
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

export function bytes(n) {
  if (n === null || n === undefined) return "";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function money(n) {
  if (n === null || n === undefined) return "—";
  if (n === 0) return "$0";
  if (n < 0.01) return `$${n.toFixed(6)}`;
  return `$${n.toFixed(4)}`;
}
