// AG-UI shared state and context with the real client (spec 13 §13.2.9, §13.2.10):
// @ag-ui/client's HttpAgent (its verifier on) against `threadloom serve`.
//
//   node run_agui_state.mjs '{"base": "http://127.0.0.1:8000", "token": "..."}'
//
// Prints one JSON object:
//   first     a `todo` run from a client whose initial state holds one todo, with two
//             context entries: its events, the client's `agent.state` after the run and
//             the state its onStateChanged subscriber saw last;
//   reloaded  a new client (its state `{}`, as after a page reload) on the same thread,
//             with no new message: its events and `agent.state` after the run.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);
const headers = { Authorization: `Bearer ${config.token}` };

function agent(threadId, initialState, initialMessages = []) {
  return new HttpAgent({
    url: `${config.base}/api/agui/todo`,
    headers,
    threadId,
    initialState,
    initialMessages,
  });
}

function summary(event) {
  const out = { type: event.type };
  for (const key of ["snapshot", "delta", "delta", "toolCallName", "content", "code", "message"]) {
    if (event[key] !== undefined) out[key] = event[key];
  }
  return out;
}

async function run(client, parameters) {
  const events = [];
  let changed = null;
  let error = null;
  try {
    await client.runAgent(parameters, {
      onEvent({ event }) {
        events.push(summary(event));
      },
      onStateChanged({ state }) {
        changed = structuredClone(state);
      },
    });
  } catch (exc) {
    error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
  }
  return { events, error, state: client.state, changed };
}

const threadId = randomUUID();
const client = agent(threadId, { todos: [{ text: "eggs", done: true }], filter: "all" });
client.addMessage({ id: randomUUID(), role: "user", content: "Add milk" });
const context = [
  { description: "The user's name", value: "Ada" },
  { description: "Open page", value: "/todos" },
];
const first = await run(client, { runId: randomUUID(), context });
const reloaded = await run(agent(threadId, {}, client.messages), { runId: randomUUID() });
process.stdout.write(JSON.stringify({ threadId, first, reloaded }));
