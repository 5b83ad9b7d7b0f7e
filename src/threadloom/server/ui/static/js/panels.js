// The thread page's other tabs: logs and cost (spec 08 §8.6, §8.7), the child registry
// (§8.9) and the thread's files (§8.8). Each loads when first shown and refreshes while
// it is shown as the stream reports changes; log rows come in the stream itself
// (`log_data`, spec 09 §9.9.2) and are applied in place.
import { api, el, clear, timeEl, pretty, bytes, money, toast } from "./api.js";

const LOG_PAGE = 50;

function fsUrl(threadId, path) {
  return `/api/threads/${threadId}/fs${path.split("/").map(encodeURIComponent).join("/")}`;
}

function latency(row) {
  if (row.latency_ms !== null && row.latency_ms !== undefined) return `${row.latency_ms} ms`;
  if (row.app_duration_ms !== null && row.app_duration_ms !== undefined) return `${row.app_duration_ms} ms`;
  return "";
}

export class Panels {
  constructor(threadId, who) {
    this.threadId = threadId;
    this.canLogs = who.logs === "true";
    this.current = "conversation";
    this.loaded = new Set();
    this.logOffset = 0;
    this.refreshTimer = null;
    this.logRows = new Map(); // log id -> the row as last shown (with its timing)
    this.logTotal = 0;
    this.subagents = new Map();
    this.stateVersion = 0;
    this.expanded = new Set(); // directories open in the file tree
    document.getElementById("logs-refresh").addEventListener("click", () => this.loadLogs());
    document.getElementById("logs-kind").addEventListener("change", () => { this.logOffset = 0; this.loadLogs(); });
    document.getElementById("logs-errors").addEventListener("change", () => { this.logOffset = 0; this.loadLogs(); });
    document.getElementById("logs-prev").addEventListener("click", () => { this.logOffset = Math.max(0, this.logOffset - LOG_PAGE); this.loadLogs(); });
    document.getElementById("logs-next").addEventListener("click", () => { this.logOffset += LOG_PAGE; this.loadLogs(); });
    document.getElementById("upload-form").addEventListener("submit", (e) => { e.preventDefault(); this.upload(); });
  }

  show(name) {
    this.current = name;
    if (name === "logs") { this.loadLogs(); this.loadCost(); }
    if (name === "subagents") this.loadSubagents();
    if (name === "files") this.loadFiles();
    if (name === "state") this.loadState();
  }

  // a run started or settled: logs and cost changed
  statusChanged() {
    if (this.current !== "logs") return;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => { this.loadLogs(); this.loadCost(); }, 300);
  }

  // ---- logs and cost -------------------------------------------------------------------

  async loadCost() {
    const box = document.getElementById("cost");
    let cost;
    try {
      cost = await api(`/api/threads/${this.threadId}/cost`);
    } catch (err) {
      clear(box).append(el("p", { class: "error-text" }, err.message));
      return;
    }
    const card = (label, value) => el("div", { class: "card" }, el("div", { class: "card-label" }, label), el("div", { class: "card-value" }, value));
    // A call of a model without a price costs an unknown amount, never a silent $0.
    const priced = (amount, unpriced, calls) => {
      if (!unpriced) return money(amount);
      if (unpriced === calls) return "price unknown";
      return `${money(amount)} + price unknown`;
    };
    const llm = priced(cost.llmCost, cost.unpricedRequestCount, cost.requestCount);
    clear(box).append(el("div", { class: "cards" },
      card("Total cost", cost.unpricedRequestCount ? `${money(cost.totalCost)} + price unknown` : money(cost.totalCost)),
      card("LLM", llm),
      card("Application", money(cost.appCost)),
      card("This thread", money(cost.ownCost)),
      card("LLM calls", String(cost.requestCount))));
    if (cost.unpricedRequestCount) {
      const n = cost.unpricedRequestCount;
      box.append(el("p", { class: "muted", id: "cost-unpriced" },
        `${n} LLM call${n === 1 ? "" : "s"} of a model without a price: not in the totals (give the model a price to count them).`));
    }
    if (cost.modelBreakdown.length) {
      box.append(el("table", { class: "compact", "aria-label": "Cost per model" },
        el("thead", {}, el("tr", {}, ["Model", "Calls", "Input", "Cached", "Output", "Total"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, cost.modelBreakdown.map((m) => {
          const part = (n) => (m.unpricedRequestCount === m.requestCount ? "—" : money(n));
          return el("tr", {},
            el("td", {}, m.modelName), el("td", {}, String(m.requestCount)), el("td", {}, part(m.inputCost)),
            el("td", {}, part(m.cachedCost)), el("td", {}, part(m.outputCost)),
            el("td", {}, priced(m.totalCost, m.unpricedRequestCount, m.requestCount)));
        }))));
    }
    if (cost.threads.length > 1) {
      box.append(el("table", { class: "compact", "aria-label": "Cost per thread" },
        el("thead", {}, el("tr", {}, ["Thread", "Agent", "LLM", "Application", "Total"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, cost.threads.map((t) => el("tr", {},
          el("td", {}, t.isRoot ? "this thread" : el("a", { href: `/threads/${t.threadId}` }, t.threadName || t.threadId.slice(0, 8))),
          el("td", {}, t.agentName || ""), el("td", {}, money(t.llmCost)), el("td", {}, money(t.appCost)), el("td", {}, money(t.totalCost)))))));
    }
    if (cost.truncated) box.append(el("p", { class: "muted" }, "Only the first 200 descendants are counted."));
  }

  async loadLogs() {
    const body = document.getElementById("logs-body");
    if (!this.canLogs) {
      clear(body).append(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "Your account has no access to logs ('logs' permission).")));
      return;
    }
    const kind = document.getElementById("logs-kind").value;
    const errors = document.getElementById("logs-errors").checked;
    let page;
    try {
      page = await api(`/api/threads/${this.threadId}/logs`, {
        query: { limit: LOG_PAGE, offset: this.logOffset, order: "desc", timing: "true", kind: kind || undefined, error: errors ? "true" : undefined },
      });
    } catch (err) {
      clear(body).append(el("tr", {}, el("td", { colspan: 8, class: "error-text" }, err.message)));
      return;
    }
    const open = new Set([...body.querySelectorAll("tr.log-detail")].map((tr) => tr.dataset.logId));
    clear(body);
    this.logRows.clear();
    if (!page.logs.length) body.append(el("tr", { class: "log-empty" }, el("td", { colspan: 8, class: "muted" }, "No log rows.")));
    for (const row of page.logs) {
      this.logRows.set(row.id, row);
      body.append(this.logRow(row));
      if (open.has(row.id)) this.toggleDetail(row, body.lastChild);
    }
    this.logTotal = page.total;
    this.countLogs();
    document.getElementById("logs-prev").disabled = this.logOffset === 0;
    document.getElementById("logs-next").disabled = !page.hasMore;
  }

  countLogs() {
    const shown = this.logRows.size;
    document.getElementById("logs-count").textContent = this.logTotal ? `${this.logOffset + 1}–${this.logOffset + shown} of ${this.logTotal}` : "";
  }

  // a log row from the stream (an upsert keyed by its id): changed in place, or — on the
  // first page, when the filters take it — added on top; the timing columns, which the
  // frame does not carry, are read again once a call completes
  logChanged(row) {
    if (!row || !row.id) return;
    if (this.current !== "logs" || !this.canLogs) return; // read afresh when shown
    const body = document.getElementById("logs-body");
    const known = this.logRows.get(row.id);
    const kindFilter = document.getElementById("logs-kind").value;
    const kind = row.kind === null ? "llm" : row.kind;
    const failed = Boolean(row.error || row.app_status === "error");
    const errorsOnly = document.getElementById("logs-errors").checked;
    const timing = known ? { latency_ms: known.latency_ms, time_to_first_token_ms: known.time_to_first_token_ms, finish_reason: known.finish_reason } : {};
    const merged = { ...timing, ...row };
    if (known) {
      const tr = body.querySelector(`tr.log-row[data-log-id="${CSS.escape(row.id)}"]`);
      this.logRows.set(row.id, merged);
      if (tr) tr.replaceWith(this.logRow(merged));
    } else if (this.logOffset === 0 && (!kindFilter || kindFilter === kind) && (!errorsOnly || failed)) {
      body.querySelector("tr.log-empty")?.remove();
      this.logRows.set(row.id, merged);
      body.prepend(this.logRow(merged));
      this.logTotal += 1;
      this.countLogs();
    } else {
      return;
    }
    if (row.is_complete && kind === "llm" && merged.latency_ms == null) this.refreshLogsSoon();
    if (row.is_complete) this.refreshCostSoon();
  }

  refreshLogsSoon() {
    clearTimeout(this.logsTimer);
    this.logsTimer = setTimeout(() => this.loadLogs(), 500);
  }

  refreshCostSoon() {
    clearTimeout(this.costTimer);
    this.costTimer = setTimeout(() => this.loadCost(), 500);
  }

  logRow(row) {
    const failed = row.error || row.app_status === "error";
    const kind = row.kind === null ? "llm" : row.kind;
    const name = kind === "llm" ? row.model_name || row.model : row.model;
    let state = "ok";
    if (failed) state = row.error || row.app_error || "error";
    else if (!row.is_complete) state = "running";
    else if (row.app_status) state = row.app_status;
    const tokens = row.input_tokens !== null || row.output_tokens !== null ? `${row.input_tokens ?? 0} / ${row.output_tokens ?? 0}` : "";
    const cost = row.cost_total ?? row.app_cost;
    const button = el("button", { type: "button", class: "ghost small", "aria-expanded": "false", "aria-label": `Details of log ${row.id}` }, "Details");
    const tr = el("tr", { class: failed ? "log-row failed" : "log-row", dataset: { logId: row.id, kind } },
      el("td", {}, timeEl(row.created_at, "us")),
      el("td", {}, el("span", { class: `badge badge-kind-${kind}` }, kind)),
      el("td", {}, name || "", row.app_message ? el("div", { class: "muted small" }, row.app_message) : null),
      el("td", {}, tokens),
      el("td", {}, latency(row)),
      el("td", {}, cost === null || cost === undefined ? "" : money(cost)),
      el("td", { class: failed ? "error-text" : "" }, state),
      el("td", {}, button));
    button.addEventListener("click", () => this.toggleDetail(row, tr));
    return tr;
  }

  async toggleDetail(row, tr) {
    const button = tr.querySelector("button");
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("log-detail")) {
      next.remove();
      button.setAttribute("aria-expanded", "false");
      return;
    }
    button.setAttribute("aria-expanded", "true");
    const cell = el("td", { colspan: 8 }, el("p", { class: "muted" }, "Loading…"));
    tr.after(el("tr", { class: "log-detail", dataset: { logId: row.id } }, cell));
    let d;
    try {
      d = await api(`/api/threads/${this.threadId}/logs/${row.id}`);
    } catch (err) {
      clear(cell).append(el("p", { class: "error-text" }, err.message));
      return;
    }
    const facts = [
      ["Provider", d.provider], ["Model", d.model_name || d.model], ["Prompt", d.prompt_name],
      ["Latency", d.latency_ms !== null && d.latency_ms !== undefined ? `${d.latency_ms} ms` : null],
      ["First token", d.time_to_first_token_ms !== null && d.time_to_first_token_ms !== undefined ? `${d.time_to_first_token_ms} ms` : null],
      ["Finish", d.finish_reason], ["Status code", d.status_code],
      ["Tokens", d.total_tokens !== null ? `${d.input_tokens ?? 0} in (${d.cached_tokens ?? 0} cached) · ${d.output_tokens ?? 0} out${d.reasoning_tokens ? ` · ${d.reasoning_tokens} reasoning` : ""}` : null],
      ["Cost", d.cost_total !== null ? `${money(d.cost_total)} (input ${money(d.cost_input)}, cached ${money(d.cost_cached)}, output ${money(d.cost_output)})` : null],
      ["Tools called", d.tools_called], ["Error", d.error ? `${d.error} (${d.error_type || "error"}, ${d.error_origin || "?"})` : null],
      ["Message", d.app_message], ["Level", d.app_level], ["Duration", d.app_duration_ms !== null && d.app_duration_ms !== undefined ? `${d.app_duration_ms} ms` : null],
      ["App error", d.app_error],
    ].filter(([, v]) => v !== null && v !== undefined && v !== "");
    const blocks = [
      ["Request body", d.request_body], ["Response body", d.response_body], ["System prompt", d.system_prompt],
      ["Tool results", d.tool_results], ["Request", d.app_request], ["Response", d.app_response],
      ["Trigger", d.app_trigger], ["Data", d.app_data],
    ].filter(([, v]) => v !== null && v !== undefined && v !== "");
    clear(cell).append(
      el("dl", { class: "facts" }, facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])),
      ...blocks.map(([k, v]) => el("details", { class: "body-fold", open: k === "Request body" || k === "Response body" },
        el("summary", {}, k), el("pre", { class: "json wrap", "data-field": k }, pretty(v)))));
  }

  // open one log row's details (the row that says why a run failed)
  async openLog(logId) {
    if (!logId) return;
    this.logOffset = 0;
    document.getElementById("logs-kind").value = "";
    document.getElementById("logs-errors").checked = false;
    await this.loadLogs();
    const tr = document.querySelector(`#logs-body tr.log-row[data-log-id="${CSS.escape(logId)}"]`);
    if (tr) {
      if (!tr.nextElementSibling || !tr.nextElementSibling.classList.contains("log-detail")) {
        await this.toggleDetail({ id: logId }, tr);
      }
      tr.scrollIntoView({ block: "center" });
    }
  }

  // ---- shared state (spec 02 §2.20) --------------------------------------------------------

  async loadState() {
    try {
      this.drawState(await api(`/api/threads/${this.threadId}/state`));
      this.loaded.add("state");
    } catch (err) {
      toast(err.message, "error");
    }
  }

  // a state_updated frame (spec 09 §9.9.8): the whole state, kept when newer
  stateUpdated(frame) {
    if (!this.loaded.has("state") || frame.version < this.stateVersion) return;
    this.drawState(frame);
  }

  drawState(state) {
    this.stateVersion = state.version;
    document.getElementById("shared-state").textContent = pretty(state.state);
    document.getElementById("state-version").textContent = state.version
      ? `version ${state.version}` : "never written";
  }

  // ---- subagents -----------------------------------------------------------------------

  async loadSubagents() {
    try {
      const data = await api(`/api/threads/${this.threadId}/subagents`);
      this.subagents = new Map(data.subagents.map((s) => [s.id, s]));
      this.drawSubagents();
      this.loaded.add("subagents");
    } catch (err) {
      toast(err.message, "error");
    }
  }

  subagentUpdated(entry) {
    if (!this.loaded.has("subagents")) return;
    this.subagents.set(entry.id, entry);
    this.drawSubagents();
  }

  drawSubagents() {
    const body = clear(document.getElementById("subagents-body"));
    if (!this.subagents.size) body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" }, "No subagents.")));
    for (const s of this.subagents.values()) {
      const failed = s.status === "failed";
      body.append(el("tr", { class: failed ? "failed" : "" },
        el("td", {}, el("a", { href: `/threads/${s.id}` }, s.threadName || s.title || s.id.slice(0, 8))),
        el("td", {}, s.relationship || ""),
        el("td", {}, s.agent_name || ""),
        el("td", {}, el("span", { class: `status status-${["running", "idle", "failed"].includes(s.status) ? s.status : "other"}` }, s.status)),
        el("td", {}, s.blocking ? "yes" : "no"),
        el("td", {}, timeEl(s.createdAt, "us"))));
    }
  }

  // ---- files ---------------------------------------------------------------------------

  filesChanged() {
    if (this.current !== "files") return;
    clearTimeout(this.filesTimer);
    this.filesTimer = setTimeout(() => this.loadFiles(), 300);
  }

  async loadFiles() {
    const tree = document.getElementById("file-tree");
    try {
      const [root, stats] = await Promise.all([
        api(`/api/threads/${this.threadId}/fs`),
        api(`/api/threads/${this.threadId}/fs`, { query: { stats: "true" } }),
      ]);
      document.getElementById("files-stats").textContent = `${stats.fileCount} files, ${bytes(stats.totalSize)}`;
      clear(tree);
      if (!root.files.length) tree.append(el("li", { class: "muted" }, "No files."));
      for (const f of root.files) tree.append(this.fileItem(f));
    } catch (err) {
      clear(tree).append(el("li", { class: "error-text" }, err.message));
    }
  }

  fileItem(f) {
    const li = el("li", { role: "treeitem", dataset: { path: f.path } });
    if (f.isDirectory) {
      const toggle = el("button", { type: "button", class: "ghost tree-dir", "aria-expanded": "false" }, `${f.name}/`);
      const children = el("ul", { role: "group", hidden: true });
      const open = async () => {
        toggle.setAttribute("aria-expanded", "true");
        children.hidden = false;
        this.expanded.add(f.path);
        const data = await api(fsUrl(this.threadId, f.path));
        clear(children);
        for (const c of data.files) children.append(this.fileItem(c));
        if (!data.files.length) children.append(el("li", { class: "muted" }, "empty"));
      };
      toggle.addEventListener("click", () => {
        if (toggle.getAttribute("aria-expanded") === "true") {
          toggle.setAttribute("aria-expanded", "false");
          children.hidden = true;
          this.expanded.delete(f.path);
        } else {
          open();
        }
      });
      li.append(toggle, children);
      if (this.expanded.has(f.path)) open(); // kept open across refreshes
    } else {
      const button = el("button", { type: "button", class: "ghost tree-file" }, f.name, el("span", { class: "muted small" }, ` ${bytes(f.size)}`));
      button.addEventListener("click", () => this.preview(f));
      li.append(button);
    }
    return li;
  }

  async preview(f) {
    const box = clear(document.getElementById("file-preview"));
    const url = fsUrl(this.threadId, f.path);
    box.append(el("div", { class: "preview-head" },
      el("strong", {}, f.path), el("span", { class: "muted" }, ` ${f.mimeType} · ${bytes(f.size)}`),
      f.storage === "url" ? null : el("a", { href: url, download: f.name, class: "button" }, "Download")));
    const type = f.mimeType || "";
    if (f.storage === "url") {
      box.append(el("p", {}, "External link: ", el("span", { class: "mono" }, f.location || "")));
    } else if (type.startsWith("image/") && type !== "image/svg+xml") {
      box.append(el("img", { src: url, alt: f.name, class: "preview-image" }));
    } else if (/^text\/|json|xml|yaml|javascript|csv/.test(type) || f.size === 0) {
      if (f.size > 1024 * 1024) {
        box.append(el("p", { class: "muted" }, "Too large to preview; download it."));
        return;
      }
      const response = await fetch(url, { credentials: "same-origin" });
      const text = await response.text();
      box.append(el("pre", { class: "wrap file-text" }, type.includes("json") ? pretty(text) : text));
    } else {
      box.append(el("p", { class: "muted" }, "No preview for this type; download it."));
    }
  }

  async upload() {
    const input = document.getElementById("upload-input");
    let dir = document.getElementById("upload-dir").value.trim() || "/";
    if (!dir.startsWith("/")) dir = `/${dir}`;
    if (!dir.endsWith("/")) dir += "/";
    for (const file of input.files) {
      try {
        await api(fsUrl(this.threadId, `${dir}${file.name}`), {
          method: "POST",
          raw: true,
          body: file,
          headers: { "Content-Type": file.type || "application/octet-stream" },
        });
        toast(`Uploaded ${file.name}`);
      } catch (err) {
        toast(`${file.name}: ${err.message}`, "error");
      }
    }
    input.value = "";
    this.loadFiles();
  }
}
