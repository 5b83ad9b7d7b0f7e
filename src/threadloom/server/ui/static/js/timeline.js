// The thread's run timeline: each run as a waterfall — its model calls (a sub-prompt's
// marked), application rows, and under each call the tool calls it made and the child
// thread a subagent call started — with durations, tokens and cost, read from the log rows
// (GET …/logs?timing=true) and the messages (which name the row that produced them). Each
// call links to the message it produced and to its log row's details. The layout is
// timeline_model.js's; this module only draws it.
import { api, el, clear, money } from "./api.js";
import { buildRuns, place, ms } from "./timeline_model.js";

const PAGE = 1000; // the routes' largest page
const MOST = 5000; // rows and messages read at most: the newest runs of a very long thread

async function readAll(path, key, query) {
  const out = [];
  for (let offset = 0; offset < MOST; offset += PAGE) {
    const page = await api(path, { query: { ...query, limit: PAGE, offset } });
    out.push(...page[key]);
    if (!page.hasMore || page[key].length < PAGE) break;
  }
  return out;
}

async function readMessages(threadId) {
  // the newest first, a page at a time; each page is chronological
  const pages = [];
  for (let offset = 0; offset < MOST; offset += PAGE) {
    const query = { limit: PAGE, offset, depth: 16, includeSilent: "true", order: "desc" };
    const page = await api(`/api/threads/${threadId}/messages`, { query });
    pages.unshift(page.messages);
    if (!page.hasMore || page.messages.length < PAGE) break;
  }
  return pages.flat();
}

export class Timeline {
  constructor(threadId, canLogs, { showMessage, showLog }) {
    this.threadId = threadId;
    this.canLogs = canLogs;
    this.showMessage = showMessage;
    this.showLog = showLog;
    this.box = document.getElementById("timeline");
    this.timer = null;
    document.getElementById("timeline-refresh").addEventListener("click", () => this.load());
  }

  // a run started or settled while the tab is shown: read again, at most every 0.5 s
  changed() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 500);
  }

  async load() {
    if (!this.canLogs) {
      clear(this.box).append(el("p", { class: "muted" }, "The timeline is read from the log rows: it needs the logs permission."));
      return;
    }
    this.box.setAttribute("aria-busy", "true");
    let runs;
    try {
      const [logs, messages] = await Promise.all([
        readAll(`/api/threads/${this.threadId}/logs`, "logs", { timing: "true", order: "desc" }),
        readMessages(this.threadId),
      ]);
      runs = buildRuns(logs, messages);
    } catch (err) {
      clear(this.box).append(el("p", { class: "error-text" }, err.message));
      this.box.removeAttribute("aria-busy");
      return;
    }
    clear(this.box);
    if (!runs.length) this.box.append(el("p", { class: "muted" }, "No run yet."));
    runs.forEach((run, i) => this.box.append(this.drawRun(run, i + 1)));
    this.box.removeAttribute("aria-busy");
    this.box.dataset.runs = String(runs.length);
  }

  drawRun(run, n) {
    const source = run.source;
    const what = source ? `${source.role}: ${(source.content || "").slice(0, 80)}` : "";
    const cost = run.unpriced ? (run.unpriced === run.steps.length ? "price unknown" : `${money(run.cost)} + price unknown`) : money(run.cost);
    const head = el("div", { class: "run-head" },
      el("h3", { id: `run-${n}` }, `Run ${n}`),
      el("span", { class: "muted" }, what),
      el("span", { class: "run-facts" },
        `${ms(run.end - run.start)} · ${run.calls} model call${run.calls === 1 ? "" : "s"} · `,
        `${run.tokens.input.toLocaleString()} → ${run.tokens.output.toLocaleString()} tokens · ${cost}`));
    const rows = el("ol", { class: "waterfall", "aria-labelledby": `run-${n}` });
    for (const step of run.steps) {
      rows.append(this.stepRow(step, run));
      for (const tool of step.tools) rows.append(this.toolRow(tool, run));
    }
    return el("section", { class: "run", dataset: { run: run.id } }, head, rows);
  }

  stepRow(step, run) {
    const kind = step.kind === "llm" ? (step.subprompt ? "sub-prompt" : "model") : step.kind;
    const facts = step.kind === "llm"
      ? `${step.tokens.input} → ${step.tokens.output} tok · ${step.priced ? money(step.cost) : "price unknown"}`
      : step.row.app_message || "";
    const actions = el("span", { class: "step-actions" },
      step.message ? el("button", { type: "button", class: "ghost small", "aria-label": `Show the message of ${step.label}`, onclick: () => this.showMessage(step.message) }, "Message") : null,
      el("button", { type: "button", class: "ghost small", "aria-label": `Log row of ${step.label}`, onclick: () => this.showLog(step.row.id) }, "Log"));
    return this.row({
      cls: `step step-${step.kind === "llm" ? (step.subprompt ? "subprompt" : "llm") : "app"}${step.error ? " step-error" : ""}${step.running ? " step-running" : ""}`,
      kind,
      label: step.label,
      facts,
      duration: step.running ? "running" : ms(step.end - step.start),
      span: place(step.start, step.end, run),
      data: { logId: step.row.id, messageId: step.message || "" },
      actions,
    });
  }

  toolRow(tool, run) {
    const child = tool.child
      ? el("a", { href: `/threads/${tool.child}`, class: "small" }, "child thread")
      : null;
    return this.row({
      cls: `step step-tool tool-${tool.status}`,
      kind: "tool",
      label: tool.name,
      facts: tool.status,
      duration: tool.end === null ? "running" : ms(tool.end - tool.start),
      span: place(tool.start, tool.end, run),
      data: { callId: tool.id },
      actions: el("span", { class: "step-actions" }, child),
    });
  }

  row({ cls, kind, label, facts, duration, span, data, actions }) {
    const bar = el("span", { class: "bar", title: `${label}: ${duration}` });
    bar.style.marginLeft = `${span.left}%`;
    bar.style.width = `${span.width}%`;
    return el("li", { class: cls, dataset: data },
      el("span", { class: "step-label" },
        el("span", { class: "badge step-kind" }, kind), " ",
        el("span", { class: "step-name" }, label),
        el("span", { class: "muted small step-facts" }, ` ${facts}`)),
      el("span", { class: "track", "aria-hidden": "true" }, bar),
      el("span", { class: "step-duration" }, duration),
      actions);
  }
}
