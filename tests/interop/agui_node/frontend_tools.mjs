// A frontend-tool round trip of the real AG-UI client against `threadloom serve` (spec 13
// §13.7): @ag-ui/client's HttpAgent (its verifier on) offers a tool the application runs
// itself; every event is also parsed with @ag-ui/core's own EventSchema.
//
//   node frontend_tools.mjs '{"base": "http://127.0.0.1:8000", "token": "..."}'
//
// Run 1 asks the `desk` agent for a card: the model calls the server's `add` and the
// frontend tool `show_card`; the run finishes with the card's call pending. The application
// then runs `show_card` (here: a function of this script), adds its `tool` message and
// starts run 2, which carries the result to the model. Prints one JSON object: both runs'
// events and the messages the client holds after each.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { EventSchema } from "@ag-ui/core/schemas";

const config = JSON.parse(process.argv[2]);
const headers = { Authorization: `Bearer ${config.token}` };

const CARD = {
  name: "show_card",
  description: "Show a card to the user in the page.",
  parameters: {
    type: "object",
    properties: { title: { type: "string" } },
    required: ["title"],
  },
};

// the application's implementation of the frontend tool
const frontend = { show_card: ({ title }) => `card shown: ${title}` };

function summary(event) {
  const out = { type: event.type };
  for (const key of ["messageId", "toolCallId", "toolCallName", "parentMessageId", "delta",
    "content", "role", "code", "message", "runId", "threadId", "outcome"]) {
    if (event[key] !== undefined) out[key] = event[key];
  }
  if (event.type === "CUSTOM") out.name = event.name;
  if (event.type === "MESSAGES_SNAPSHOT") {
    out.messages = event.messages.map((m) => ({ id: m.id, role: m.role, toolCallId: m.toolCallId ?? null }));
  }
  return out;
}

function held(client) {
  return client.messages.map((m) => ({
    id: m.id,
    role: m.role,
    content: m.content ?? null,
    toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
    toolCallId: m.toolCallId ?? null,
  }));
}

async function run(client, parameters) {
  const events = [];
  const invalid = [];
  let pending = null;
  let error = null;
  try {
    await client.runAgent(parameters, {
      onEvent({ event }) {
        const parsed = EventSchema.safeParse(event);
        if (!parsed.success) invalid.push({ type: event.type, issues: parsed.error.issues });
        events.push(summary(event));
      },
      onRunFinishedEvent(params) {
        pending = params.pendingToolCallIds ?? null;
      },
    });
  } catch (exc) {
    error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
  }
  return { events, invalid, error, pending, messages: held(client) };
}

const threadId = randomUUID();
const client = new HttpAgent({ url: `${config.base}/api/agui/desk`, headers, threadId });
client.addMessage({ id: randomUUID(), role: "user", content: "Show me a card" });
const first = await run(client, { runId: randomUUID(), tools: [CARD] });

// the application answers each pending call of a frontend tool
const answered = [];
for (const message of client.messages) {
  for (const call of message.toolCalls ?? []) {
    if (!(first.pending ?? []).includes(call.id)) continue;
    const content = frontend[call.function.name](JSON.parse(call.function.arguments));
    const id = randomUUID();
    client.addMessage({ id, role: "tool", toolCallId: call.id, content });
    answered.push({ id, toolCallId: call.id, content });
  }
}
const second = await run(client, { runId: randomUUID(), tools: [CARD] });
process.stdout.write(JSON.stringify({ threadId, first, answered, second }));
