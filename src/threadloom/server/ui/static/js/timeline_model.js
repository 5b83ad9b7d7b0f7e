// The run timeline's model, without the DOM: log rows and messages in, runs out. A run is
// the model calls made for one source message (a log row's `message_id`: the message that
// started the run, or a Continue's last message); its steps are those calls in order (a
// call of another prompt than the run's first is a sub-prompt's), application rows, and
// under each call the tool calls its message made — from the call's end to the tool
// result's creation, with the result's status and, for a subagent, the child thread.
// Times are microseconds since the epoch, as the API gives them.

function num(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

export function parseToolCalls(m) {
  if (!m || !m.tool_calls) return [];
  try {
    const calls = typeof m.tool_calls === "string" ? JSON.parse(m.tool_calls) : m.tool_calls;
    return Array.isArray(calls) ? calls : [];
  } catch {
    return [];
  }
}

// how long a row took (ms): an LLM call's latency, an application row's duration
export function rowMs(row) {
  return num(row.latency_ms) ?? num(row.app_duration_ms) ?? 0;
}

export function rowCost(row) {
  return num(row.cost_total) ?? num(row.app_cost) ?? 0;
}

export function buildRuns(logs, messages) {
  const produced = new Map(); // log id -> the message it produced
  const results = new Map(); // tool_call_id -> tool message
  for (const m of messages) {
    if (m.log_id) produced.set(m.log_id, m);
    if (m.role === "tool" && m.tool_call_id) results.set(m.tool_call_id, m);
  }
  const byId = new Map(messages.map((m) => [m.id, m]));
  const rows = [...logs].sort((a, b) => a.created_at - b.created_at);
  const runs = new Map();
  const runOfLog = new Map(); // log id -> its run's key
  const callMaker = new Map(); // tool_call_id -> the message that made the call
  for (const m of messages) for (const c of parseToolCalls(m)) callMaker.set(c.id, m);
  // a row's run: that of the call which produced its message (an application row written
  // during a tool call names the calling message, or the tool's result), else its source
  const keyOf = (row) => {
    let m = byId.get(row.message_id);
    if (m && m.role === "tool" && m.tool_call_id) m = callMaker.get(m.tool_call_id) || m;
    if (m && m.log_id && runOfLog.has(m.log_id)) return runOfLog.get(m.log_id);
    return row.message_id || `log:${row.id}`;
  };
  for (const row of rows) {
    const key = keyOf(row);
    runOfLog.set(row.id, key);
    if (!runs.has(key)) {
      runs.set(key, { id: key, source: byId.get(row.message_id) || null, steps: [], prompt: null });
    }
    const run = runs.get(key);
    const llm = row.kind === null || row.kind === undefined;
    const start = row.created_at;
    const end = start + rowMs(row) * 1000;
    if (llm && run.prompt === null) run.prompt = row.prompt_name || null;
    const message = llm ? produced.get(row.id) || null : null;
    const tools = [];
    for (const call of parseToolCalls(message)) {
      const result = results.get(call.id) || null;
      const finished = result ? result.created_at : null;
      const name = (call.function && call.function.name) || call.name || "tool";
      const child = result && (result.subagent_id || (result.metadata && result.metadata.subagent_id));
      tools.push({
        id: call.id,
        name,
        start: end,
        end: finished !== null ? Math.max(finished, end) : null,
        status: result ? result.tool_status || "success" : "running",
        result: result ? result.id : null,
        child: child || null,
      });
    }
    run.steps.push({
      kind: llm ? "llm" : row.kind,
      row,
      label: llm ? row.prompt_name || row.model : row.model,
      subprompt: llm && run.prompt !== null && row.prompt_name && row.prompt_name !== run.prompt,
      start,
      end,
      running: row.is_complete === false,
      error: Boolean(row.error) || row.app_status === "error",
      tokens: { input: num(row.input_tokens) ?? 0, output: num(row.output_tokens) ?? 0 },
      cost: rowCost(row),
      priced: !llm || num(row.cost_total) !== null,
      message: message ? message.id : null,
      tools,
    });
  }
  const out = [];
  for (const run of runs.values()) {
    let start = Infinity;
    let end = -Infinity;
    let input = 0;
    let output = 0;
    let cost = 0;
    let unpriced = 0;
    for (const s of run.steps) {
      start = Math.min(start, s.start);
      end = Math.max(end, s.end, ...s.tools.map((t) => t.end ?? s.end));
      input += s.tokens.input;
      output += s.tokens.output;
      cost += s.cost;
      if (!s.priced) unpriced += 1;
    }
    if (run.source && run.source.created_at < start) start = run.source.created_at;
    out.push({ ...run, start, end, tokens: { input, output }, cost, unpriced, calls: run.steps.filter((s) => s.kind === "llm").length });
  }
  return out.sort((a, b) => a.start - b.start);
}

// where a span sits in its run, as percentages of the run's width (at least a sliver)
export function place(start, end, run) {
  const span = Math.max(run.end - run.start, 1);
  const left = ((start - run.start) / span) * 100;
  const width = Math.max((((end ?? run.end) - start) / span) * 100, 0.4);
  return { left: Math.min(Math.max(left, 0), 99.6), width: Math.min(width, 100 - Math.min(Math.max(left, 0), 99.6)) };
}

export function ms(us) {
  const v = us / 1000;
  if (v >= 10000) return `${(v / 1000).toFixed(1)} s`;
  if (v >= 1000) return `${(v / 1000).toFixed(2)} s`;
  return `${Math.round(v)} ms`;
}
