// One message of the conversation as a person reads it (spec 08 §8.2.3): its role, text,
// folded reasoning, each tool call folded together with its result and status, its
// attachments, and badges for pending, queued, failed and silent messages (thread.js groups
// sub-prompt messages under their parent).
import { el, shortTime, fullTime, pretty, bytes } from "./api.js";

export function parseCalls(m) {
  if (!m.tool_calls) return [];
  try {
    const calls = typeof m.tool_calls === "string" ? JSON.parse(m.tool_calls) : m.tool_calls;
    return Array.isArray(calls) ? calls : [];
  } catch {
    return [];
  }
}

export function isQueued(m) {
  return Boolean(m.metadata && m.metadata.queued);
}

function roleLabel(m, view) {
  if (m.role === "user") return view.labels.user;
  if (m.role === "assistant") return view.labels.assistant;
  if (m.role === "system") return "System";
  return `Tool${m.name ? ` · ${m.name}` : ""}`;
}

function badges(m) {
  const out = [];
  if (isQueued(m)) {
    const cancelled = m.metadata.queue_status === "cancelled";
    out.push(el("span", { class: `badge ${cancelled ? "badge-failed" : "badge-pending"}` }, cancelled ? "cancelled" : "queued"));
  } else if (m.status === "pending") {
    out.push(el("span", { class: "badge badge-pending" }, "generating"));
  } else if (m.status === "failed") {
    out.push(el("span", { class: "badge badge-failed" }, "failed"));
  }
  if (m.silent) out.push(el("span", { class: "badge" }, "silent"));
  if (m.prompt) out.push(el("span", { class: "muted small" }, m.prompt));
  return out;
}

function reasoning(m, view) {
  const live = view.streaming.get(m.id);
  const text = (live && live.reasoning) || m.reasoning_content;
  if (!text) return null;
  const ms = m.metadata && m.metadata.reasoning_duration_ms;
  const title = ms !== undefined && ms !== null ? `Reasoning (${(ms / 1000).toFixed(1)} s)` : "Reasoning";
  return el("details", { class: "reasoning" }, el("summary", {}, title), el("pre", { class: "wrap" }, text));
}

function attachment(a, view) {
  const href = `/api/threads/${view.threadId}/fs${a.path.split("/").map(encodeURIComponent).join("/")}`;
  if ((a.mimeType || "").startsWith("image/") && a.mimeType !== "image/svg+xml") {
    // the stored thumbnail when there is one (spec 07), else the image itself
    const img = el("img", { src: `${href}?thumbnail`, alt: a.name, loading: "lazy", class: "thumb" });
    img.addEventListener("error", () => { if (img.src.endsWith("?thumbnail")) img.src = href; }, { once: true });
    return el("a", { href, class: "attachment image", target: "_blank", rel: "noopener", title: a.name }, img);
  }
  return el("a", { href, class: "attachment file", download: a.name }, a.name, el("span", { class: "muted" }, ` ${bytes(a.size)}`));
}

// how a decided approval reads on its call: "approved by …", "rejected: <reason>"
function decisionText(a) {
  const by = a.decided_by ? ` by ${a.decided_by}` : "";
  const why = a.reason ? `: ${a.reason}` : "";
  return `${a.state}${by}${why}`;
}

function toolCall(call, view) {
  const result = view.toolResults.get(call.id);
  const live = view.toolLive.get(call.id);
  const approval = view.approvals ? view.approvals.get(call.id) : null;
  let status = "waiting";
  if (result) status = result.tool_status || "success";
  else if (approval && approval.state === "pending") status = "approval";
  else if (approval && approval.state === "rejected") status = "rejected";
  else if (live) status = live;
  const name = (call.function && call.function.name) || call.name || "tool";
  const args = call.function ? call.function.arguments : call.arguments;
  const fold = el("details", { class: `tool tool-${status}`, dataset: { callId: call.id, status } },
    el("summary", {},
      el("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
      el("span", { class: "tool-name" }, name),
      el("span", { class: `badge badge-tool-${status}` }, status === "approval" ? "awaiting approval" : status),
      approval && approval.state !== "pending" ? el("span", { class: "muted small approval-note" }, decisionText(approval)) : null),
    el("div", { class: "tool-body" },
      el("div", { class: "label" }, "Arguments"),
      el("pre", { class: "json" }, pretty(args)),
      el("div", { class: "label" }, "Result"),
      result ? el("pre", { class: "wrap" }, result.content ?? "") : el("p", { class: "muted" }, live === "running" ? "Running…" : "No result yet."),
      // the files the tool returned (spec 04 §4.5.4), as a message's attachments are shown
      result && result.attachments && result.attachments.length
        ? el("div", { class: "attachments" }, result.attachments.map((a) => attachment(a, view)))
        : null));
  return fold;
}

export function renderMessage(m, view) {
  const live = view.streaming.get(m.id);
  const classes = ["msg", `msg-${m.role}`];
  if (m.status === "failed") classes.push("msg-failed");
  if (m.status === "pending" || isQueued(m)) classes.push("msg-pending");
  if (m.silent) classes.push("msg-silent");
  if (m.depth > 0) classes.push(`msg-depth msg-depth-${Math.min(m.depth, 4)}`);
  const kind = m.metadata && m.metadata.status_kind;
  if (kind) classes.push(`msg-note msg-${kind}`);
  const li = el("li", { id: `m-${m.id}`, class: classes.join(" "), dataset: { id: m.id, role: m.role, status: m.status } });
  const ms = m.created_at ? m.created_at / 1000 : 0;
  li.append(el("div", { class: "msg-head" },
    el("span", { class: "msg-role" }, roleLabel(m, view)),
    ms ? el("time", { datetime: new Date(ms).toISOString(), title: fullTime(ms) }, shortTime(ms)) : null,
    ...badges(m)));
  const why = reasoning(m, view);
  if (why) li.append(why);
  const text = live && live.text !== undefined && m.status === "pending" ? live.text : m.content;
  if (text) {
    const box = el("div", { class: "msg-text" }, text);
    // a model's finished text is Markdown (markdown.js); a streaming one stays plain
    if (m.role === "assistant" && m.status !== "pending" && view.markdown) view.markdown.fill(box, text);
    li.append(box);
  }
  if (m.role === "tool") {
    li.append(el("span", { class: `badge badge-tool-${m.tool_status || "success"}` }, m.tool_status || "success"));
  }
  const calls = parseCalls(m);
  if (calls.length) li.append(el("div", { class: "tools" }, calls.map((c) => toolCall(c, view))));
  if (m.attachments && m.attachments.length) {
    li.append(el("div", { class: "attachments" }, m.attachments.map((a) => attachment(a, view))));
  }
  if (m.subagent_id) {
    li.append(el("p", { class: "small" }, "Subagent ",
      el("a", { href: `/threads/${m.subagent_id}` }, m.subagent_title || m.subagent_name || m.subagent_id.slice(0, 8)),
      m.subagent_status ? ` · ${m.subagent_status}` : ""));
  }
  if (!text && !calls.length && !why && m.status === "pending" && !isQueued(m)) {
    li.append(el("div", { class: "msg-text muted typing" }, "…"));
  }
  return li;
}
