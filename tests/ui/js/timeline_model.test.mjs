// Unit tests of timeline_model.js with Node's own test runner (node --test): the run
// timeline's logic without a browser. Run by tests/ui/test_ui_units.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";

// The page's module as the browser loads it: an ES module in a .js file outside any
// package.json, which Node would read as CommonJS; imported from its text instead (it
// imports nothing), so any Node with the test runner (18+) reads it as the browser does.
const source = new URL("../../../src/threadloom/server/ui/static/js/timeline_model.js", import.meta.url);
const { buildRuns, place, ms } = await import(
  `data:text/javascript,${encodeURIComponent(await readFile(source, "utf8"))}`
);

const S = 1_000_000; // a second in µs
const llm = (id, source, at, latency, extra = {}) => ({
  id, kind: null, message_id: source, created_at: at, latency_ms: latency, prompt_name: "p",
  model: "m", input_tokens: 10, output_tokens: 2, cost_total: 0.5, is_complete: true, ...extra,
});
const call = (id, name) => ({ id, type: "function", function: { name, arguments: "{}" } });

test("a run groups the calls of one source message, with its tool calls between them", () => {
  const messages = [
    { id: "u1", role: "user", content: "order 1", created_at: 0 },
    { id: "a1", role: "assistant", log_id: "L1", created_at: 1, tool_calls: JSON.stringify([call("c1", "lookup")]) },
    { id: "t1", role: "tool", tool_call_id: "c1", tool_status: "success", created_at: 2 * S },
    { id: "a2", role: "assistant", log_id: "L2", content: "done", created_at: 2 * S },
  ];
  const logs = [
    llm("L2", "u1", 2 * S, 500),
    llm("L1", "u1", S / 10, 400),
    { id: "A1", kind: "app", message_id: "a1", created_at: S, model: "orders.lookup", app_duration_ms: 20, app_cost: 0.25 },
  ];
  const [run, ...rest] = buildRuns(logs, messages);
  assert.equal(rest.length, 0);
  assert.equal(run.source.id, "u1");
  assert.deepEqual(run.steps.map((s) => s.kind), ["llm", "app", "llm"]);
  assert.equal(run.calls, 2);
  assert.deepEqual(run.tokens, { input: 20, output: 4 });
  assert.equal(run.cost, 1.25);
  assert.equal(run.start, 0); // the source message's time
  assert.equal(run.end, 2.5 * S);
  const [tool] = run.steps[0].tools;
  assert.equal(tool.name, "lookup");
  assert.equal(tool.start, S / 10 + 400_000); // from the call's end
  assert.equal(tool.end, 2 * S); // to the result
  assert.equal(tool.status, "success");
  assert.equal(run.steps[0].message, "a1");
  assert.equal(run.steps[2].message, "a2");
});

test("runs are ordered by time; a sub-prompt's call is marked; a running tool has no end", () => {
  const messages = [
    { id: "u1", role: "user", created_at: 0 },
    { id: "u2", role: "user", created_at: 10 * S },
    { id: "a3", role: "assistant", log_id: "L3", created_at: 10 * S, tool_calls: [call("c3", "notes")] },
  ];
  const logs = [
    llm("L3", "u2", 10 * S, 100),
    llm("L4", "u2", 11 * S, 100, { prompt_name: "notes_prompt" }),
    llm("L1", "u1", S, 100, { cost_total: null }),
  ];
  const runs = buildRuns(logs, messages);
  assert.deepEqual(runs.map((r) => r.id), ["u1", "u2"]);
  assert.equal(runs[0].unpriced, 1);
  assert.equal(runs[0].steps[0].priced, false);
  assert.deepEqual(runs[1].steps.map((s) => s.subprompt), [false, true]);
  const [tool] = runs[1].steps[0].tools;
  assert.equal(tool.end, null);
  assert.equal(tool.status, "running");
});

test("a subagent call names its child thread", () => {
  const messages = [
    { id: "u1", role: "user", created_at: 0 },
    { id: "a1", role: "assistant", log_id: "L1", created_at: 0, tool_calls: [call("c1", "subagent_create")] },
    { id: "t1", role: "tool", tool_call_id: "c1", created_at: S, metadata: { subagent_id: "child-1" } },
  ];
  const [run] = buildRuns([llm("L1", "u1", 0, 10)], messages);
  assert.equal(run.steps[0].tools[0].child, "child-1");
});

test("place puts a span on the run's axis, at least a sliver wide", () => {
  const run = { start: 0, end: 1000 };
  assert.deepEqual(place(0, 1000, run), { left: 0, width: 100 });
  assert.deepEqual(place(500, 750, run), { left: 50, width: 25 });
  assert.equal(place(200, 200, run).width, 0.4);
  assert.equal(place(0, null, run).width, 100); // running: to the run's end
  assert.equal(ms(2500), "3 ms");
  assert.equal(ms(1_500_000), "1.50 s");
  assert.equal(ms(12_000_000), "12.0 s");
});
