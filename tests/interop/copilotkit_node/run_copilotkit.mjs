// CopilotKit's runtime (@copilotkit/runtime, v2 API) with `threadloom serve` as its AG-UI
// agents (@ag-ui/client's HttpAgent, the version CopilotKit bundles), headless: the
// runtime's own fetch handler (createCopilotRuntimeHandler) is called in-process with the
// requests CopilotKit's front end sends, no browser and no port of its own.
//
//   node run_copilotkit.mjs '{"base": "http://127.0.0.1:8000", "token": "...",
//                             "scenario": "tool", "agents": ["calc"]}'
//
// Prints one JSON object. Every run's answer is what the front end reads: the SSE body the
// runtime answers `POST <basePath>/agent/<id>/run` with. Each of its events is checked with
// the bundled protocol's own schemas (`EventSchemas` of @ag-ui/core) and the sequence with
// the bundled client's `verifyEvents`; `problems` lists what they refused (none expected),
// and what the runtime's own HttpAgent refused of Threadloom's stream (it ends the run with
// RUN_ERROR `INCOMPLETE_STREAM` then: an invalid event, or a sequence its verifier rejects).
//
// Scenarios (add yours to SCENARIOS; each gets `config` and returns a JSON-able object):
//   tool  one turn of `calc` (a tool call, its result, the answer);
//   dual  one turn of a dual_ai agent (`config.agent`, default `writer_critic`);
//   stop  a run of `config.agent` (default `slow`) stopped the way CopilotKit's Stop
//         button does it (`POST <basePath>/agent/<id>/stop/<threadId>`) once its first
//         text arrived;
//   server_stop  a run of `config.agent` (default `slow`) stopped with Threadloom's own
//         `POST /api/threads/{id}/stop` once its first text arrived;
//   state shared state and readable context (what `useCoAgent` and `useCopilotReadable`
//         send): a run of `config.agent` (default `todo`) with `config.state` and
//         `config.context`, then a second run on the same thread with the state the front
//         end holds after the first (its STATE_SNAPSHOT and STATE_DELTAs applied) with
//         `config.edit` merged in (a user's edit in the page), and no context;
//   frontend  a frontend tool round trip with `config.agent` (default `desk`): run 1 ends
//         with the call left to the front end, run 2 carries its result.
import { randomUUID } from "node:crypto";
import { CopilotRuntime, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { HttpAgent, verifyEvents } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core";
import { from, lastValueFrom, toArray } from "rxjs";

process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";
const config = JSON.parse(process.argv[2]);
const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
const BASE_PATH = "/api/copilotkit";
const ORIGIN = "http://copilotkit.local";

const agents = {};
for (const name of config.agents ?? ["calc"]) {
  agents[name] = new HttpAgent({ url: `${config.base}/api/agui/${name}`, headers });
}
const runtime = new CopilotRuntime({ agents });
const handler = createCopilotRuntimeHandler({ runtime, basePath: BASE_PATH });

function post(path, body) {
  return handler(
    new Request(`${ORIGIN}${BASE_PATH}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
      body: JSON.stringify(body),
    }),
  );
}

function runInput(threadId, text, messages = []) {
  return {
    threadId,
    runId: randomUUID(),
    state: {},
    tools: [],
    context: [],
    forwardedProps: {},
    messages: [...messages, { id: randomUUID(), role: "user", content: text }],
  };
}

function summary(event) {
  const out = { type: event.type };
  for (const key of ["messageId", "toolCallId", "toolCallName", "parentMessageId", "delta",
    "content", "role", "name", "code", "message", "runId", "threadId", "outcome", "result",
    "snapshot"]) {
    if (event[key] !== undefined) out[key] = event[key];
  }
  if (event.type === "CUSTOM") out.value = event.value;
  if (event.type === "MESSAGES_SNAPSHOT") {
    out.messages = event.messages.map((m) => ({
      id: m.id,
      role: m.role,
      name: m.name ?? null,
      content: m.content ?? null,
      toolCalls: (m.toolCalls ?? []).map((c) => c.function.name),
      toolCallId: m.toolCallId ?? null,
    }));
  }
  return out;
}

// The SSE body of a run, read as it comes: its events (each checked with the bundled
// schemas), `onEvent(event)` called for each as it arrives.
async function readRun(response, onEvent = async () => {}) {
  const events = [];
  const problems = [];
  if (!response.ok) {
    return { status: response.status, body: await response.text(), events, problems };
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const blocks = buffer.split(/\r?\n\r?\n/);
    buffer = blocks.pop() ?? "";
    for (const block of blocks) {
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (!data) continue;
      const raw = JSON.parse(data);
      const parsed = EventSchemas.safeParse(raw);
      if (!parsed.success) problems.push(`${raw.type}: ${parsed.error.message}`);
      // the runtime's client refused what Threadloom sent (its verifier or its schemas):
      // the runtime ends the run with RUN_ERROR INCOMPLETE_STREAM and the refusal
      if (raw.type === "RUN_ERROR" && raw.code === "INCOMPLETE_STREAM") {
        problems.push(`the runtime's client refused the stream: ${raw.message}`);
      }
      events.push(raw);
      await onEvent(raw);
    }
  }
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  } catch (exc) {
    problems.push(`verifyEvents: ${exc?.message ?? exc}`);
  }
  return { status: response.status, events: events.map(summary), problems };
}

async function tool() {
  const threadId = randomUUID();
  const run = await readRun(await post("/agent/calc/run", runInput(threadId, "What is 2 + 3?")));
  return { threadId, run };
}

async function dual() {
  const threadId = randomUUID();
  const name = config.agent ?? "writer_critic";
  const text = config.text ?? "Write about durable threads.";
  const run = await readRun(await post(`/agent/${name}/run`, runInput(threadId, text)));
  return { threadId, run };
}

async function stop() {
  const threadId = randomUUID();
  const name = config.agent ?? "slow";
  let answer = null;
  const running = post(`/agent/${name}/run`, runInput(threadId, config.text ?? "Go on."));
  const run = await readRun(await running, async (event) => {
    if (answer === null && event.type === "TEXT_MESSAGE_CONTENT") {
      answer = "pending";
      // what CopilotKit's Stop button sends (its runtime then aborts the agent's run)
      const stopped = await post(`/agent/${name}/stop/${threadId}`, {});
      answer = { status: stopped.status, body: await stopped.json() };
    }
  });
  return { threadId, stop: answer, run };
}

// A run stopped on the server (`POST /api/threads/{id}/stop`, the REST API) while
// CopilotKit's runtime relays it: the terminal event must pass the bundled client.
async function serverStop() {
  const threadId = randomUUID();
  const name = config.agent ?? "slow";
  let answer = null;
  const running = post(`/agent/${name}/run`, runInput(threadId, config.text ?? "Go on."));
  const run = await readRun(await running, async (event) => {
    if (answer === null && event.type === "TEXT_MESSAGE_CONTENT") {
      answer = "pending";
      const stopped = await fetch(`${config.base}/api/threads/${threadId}/stop`, {
        method: "POST",
        headers: { ...headers, "Content-Type": "application/json" },
        body: "{}",
      });
      answer = { status: stopped.status, body: await stopped.json() };
    }
  });
  return { threadId, stop: answer, run };
}

// The state a front end holds after a run: the snapshot, then each delta applied (the
// bundled client's own JSON Patch: `applyPatch` of fast-json-patch, which it depends on).
async function heldState(events, start) {
  const patch = await import("fast-json-patch");
  const applyPatch = patch.applyPatch ?? patch.default.applyPatch;
  let held = start;
  for (const event of events) {
    if (event.type === "STATE_SNAPSHOT") held = event.snapshot;
    if (event.type === "STATE_DELTA") held = applyPatch(structuredClone(held), event.delta).newDocument;
  }
  return held;
}

async function state() {
  const threadId = randomUUID();
  const name = config.agent ?? "todo";
  const first = runInput(threadId, config.text ?? "Add milk.");
  first.state = config.state ?? {};
  first.context = config.context ?? [];
  const run = await readRun(await post(`/agent/${name}/run`, first));
  const held = await heldState(run.events, first.state);
  const second = runInput(threadId, "Thanks.", first.messages);
  second.state = { ...held, ...(config.edit ?? {}) };
  const again = await readRun(await post(`/agent/${name}/run`, second));
  return { threadId, run, held, again, heldAgain: await heldState(again.events, second.state) };
}

// A frontend tool (CopilotKit's useFrontendTool): the front end offers it with each run;
// run 1 ends with the model's call of it left to the front end, which runs it (here a
// function of this script, as useFrontendTool's handler) and sends run 2 with the history
// it holds — the user message, the assistant message carrying the call (no text) and the
// tool message with the result — and the same tools.
const CARD = {
  name: "show_card",
  description: "Show a card to the user in the page.",
  parameters: {
    type: "object",
    properties: { title: { type: "string" } },
    required: ["title"],
  },
};
const FRONTEND = { show_card: ({ title }) => `card shown: ${title}` };

async function frontend() {
  const threadId = randomUUID();
  const name = config.agent ?? "desk";
  const ask = { id: randomUUID(), role: "user", content: config.text ?? "Show me a card" };
  const input = { threadId, state: {}, tools: [CARD], context: [], forwardedProps: {} };
  const first = await readRun(
    await post(`/agent/${name}/run`, { ...input, runId: randomUUID(), messages: [ask] }),
  );
  // the front end's view of run 1: the assistant message with its calls, the results
  const assistant = { role: "assistant", toolCalls: [] };
  const args = {};
  const results = new Map();
  let pending = [];
  for (const event of first.events) {
    if (event.type === "TOOL_CALL_START") {
      assistant.id = event.parentMessageId;
      assistant.toolCalls.push({
        id: event.toolCallId,
        type: "function",
        function: { name: event.toolCallName, arguments: "" },
      });
    }
    if (event.type === "TOOL_CALL_ARGS") args[event.toolCallId] = (args[event.toolCallId] ?? "") + event.delta;
    if (event.type === "TOOL_CALL_RESULT") results.set(event.toolCallId, event);
  }
  // left to the front end: the calls announced without a result (as @ag-ui/client 1.0
  // derives its pendingToolCallIds)
  pending = assistant.toolCalls.map((c) => c.id).filter((id) => !results.has(id));
  const history = [ask, assistant];
  for (const call of assistant.toolCalls) {
    call.function.arguments = args[call.id] ?? "";
    const result = results.get(call.id);
    if (result) {
      history.push({ id: result.messageId, role: "tool", toolCallId: call.id, content: result.content });
    }
  }
  const answered = [];
  for (const call of assistant.toolCalls) {
    const handler = FRONTEND[call.function.name];
    if (!handler || results.has(call.id)) continue;
    const content = handler(JSON.parse(call.function.arguments));
    const message = { id: randomUUID(), role: "tool", toolCallId: call.id, content };
    history.push(message);
    answered.push(message);
  }
  const second = await readRun(
    await post(`/agent/${name}/run`, { ...input, runId: randomUUID(), messages: history }),
  );
  return { threadId, first, pending, answered, second };
}

const SCENARIOS = { tool, dual, stop, server_stop: serverStop, state, frontend };

const scenario = SCENARIOS[config.scenario];
if (!scenario) throw new Error(`unknown scenario ${config.scenario}`);
const result = await scenario();
process.stdout.write(JSON.stringify(result));
process.exit(0);
