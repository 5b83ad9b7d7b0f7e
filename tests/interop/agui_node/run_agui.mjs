// The real AG-UI client against `threadloom serve`: @ag-ui/client's HttpAgent, which checks
// every event it receives against the protocol (its verifier) before applying it.
//
//   node run_agui.mjs '{"base": "http://127.0.0.1:8000", "token": "...", "scenario": "turns"}'
//
// Prints one JSON object: what the client saw (events, messages) or the error it raised.
// Scenarios:
//   turns      two turns with the `calc` agent (a tool call each), the second sending the
//              messages the client holds after the first (the server must store only the
//              new one);
//   abort      a run of the `story` agent aborted by the client in the middle of the text,
//              then resumed with the same runId and the cursor of the last event it saw;
//   anonymous  a run without credentials (the client's error);
//   approval   a `payer` run that ends with the interrupt outcome (two tool calls waiting for
//              approval), then a run whose `resume` approves the call paying bo (naming the
//              argumentsHash the interrupt shows) and cancels the other.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);
const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};

function agent(name, threadId, initialMessages = []) {
  return new HttpAgent({
    url: `${config.base}/api/agui/${name}`,
    headers,
    threadId,
    initialMessages,
  });
}

function summary(event) {
  const out = { type: event.type };
  for (const key of ["messageId", "toolCallId", "toolCallName", "parentMessageId", "delta",
    "content", "role", "name", "code", "message", "runId", "threadId", "outcome"]) {
    if (event[key] !== undefined) out[key] = event[key];
  }
  if (event.type === "CUSTOM") out.value = event.value;
  if (event.type === "MESSAGES_SNAPSHOT") out.count = event.messages.length;
  out.cursor = event.metadata?.threadloomCursor ?? null;
  return out;
}

async function run(client, parameters, onEvent = () => {}) {
  const events = [];
  let error = null;
  let result = null;
  try {
    result = await client.runAgent(parameters, {
      onEvent({ event }) {
        events.push(summary(event));
        onEvent(event, events);
      },
    });
  } catch (exc) {
    error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
  }
  return {
    events,
    error,
    newMessages: result ? result.newMessages.length : null,
    messages: client.messages.map((m) => ({
      id: m.id,
      role: m.role,
      content: m.content ?? null,
      toolCalls: m.toolCalls ?? null,
      toolCallId: m.toolCallId ?? null,
    })),
  };
}

async function turns() {
  const threadId = randomUUID();
  const client = agent("calc", threadId);
  client.addMessage({ id: randomUUID(), role: "user", content: "What is 2 + 3?" });
  const first = await run(client, { runId: randomUUID() });
  client.addMessage({ id: randomUUID(), role: "user", content: "And again?" });
  const second = await run(client, { runId: randomUUID() });
  return { threadId, first, second };
}

async function abort() {
  const threadId = randomUUID();
  const runId = randomUUID();
  const client = agent("story", threadId);
  client.addMessage({ id: randomUUID(), role: "user", content: "Tell me a story" });
  let cursor = null;
  let texts = 0;
  const first = await run(client, { runId }, (event) => {
    cursor = event.metadata?.threadloomCursor ?? cursor;
    if (event.type === "TEXT_MESSAGE_CONTENT" && ++texts === 3) client.abortRun();
  });
  const again = agent("story", threadId, client.messages);
  const resumed = await run(again, { runId, forwardedProps: { threadloom: { lastEventId: cursor } } });
  return { threadId, runId, cursor, first, resumed };
}

async function anonymous() {
  delete headers.Authorization;
  const client = agent("calc", randomUUID());
  client.addMessage({ id: randomUUID(), role: "user", content: "hi" });
  return run(client, { runId: randomUUID() });
}

async function approval() {
  const threadId = randomUUID();
  const client = agent("payer", threadId);
  client.addMessage({ id: randomUUID(), role: "user", content: "pay two" });
  const first = await run(client, { runId: randomUUID() });
  const pending = client.pendingInterrupts.map((i) => i.id);
  const interrupts = first.events.at(-1)?.outcome?.interrupts ?? [];
  const resume = interrupts.map((i) =>
    i.metadata.arguments.to === "bo"
      ? { interruptId: i.id, status: "resolved", payload: { approved: true, argumentsHash: i.metadata.argumentsHash } }
      : { interruptId: i.id, status: "cancelled" },
  );
  const second = await run(client, { runId: randomUUID(), resume });
  return { threadId, first, pending, interrupts, second, left: client.pendingInterrupts.length };
}

const scenarios = { turns, abort, anonymous, approval };
const output = await scenarios[config.scenario]();
process.stdout.write(JSON.stringify(output));
