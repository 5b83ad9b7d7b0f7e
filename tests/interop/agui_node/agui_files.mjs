// The real AG-UI client sending pictures to `threadloom serve`: @ag-ui/client's HttpAgent,
// which checks every event it receives against the protocol (its verifier) before applying
// it, and its outgoing input against the protocol's schema.
//
//   node agui_files.mjs '{"base": "...", "token": "...", "scenario": "image", "png": "<base64>"}'
//
// Prints one JSON object: what the client saw (events, messages) or the error it raised.
// Scenarios:
//   image   a user message of a text part and an AG-UI 1.0 image part (a data source),
//           then a second turn of text: the client sends back the messages it holds,
//           the image message among them, as the snapshot gave them;
//   binary  a user message with a legacy (pre-1.0) `binary` part, which the client's
//           compatibility boundary upgrades (or not) before it sends.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);
const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};

function agent(threadId) {
  return new HttpAgent({ url: `${config.base}/api/agui/looker`, headers, threadId });
}

async function run(client) {
  const events = [];
  let error = null;
  try {
    await client.runAgent({ runId: randomUUID() }, {
      onEvent({ event }) {
        const out = { type: event.type };
        if (event.type === "MESSAGES_SNAPSHOT") out.messages = event.messages;
        if (event.type === "TEXT_MESSAGE_CONTENT") out.delta = event.delta;
        if (event.type === "RUN_ERROR") out.message = event.message;
        if (event.type === "CUSTOM") out.name = event.name;
        events.push(out);
      },
    });
  } catch (exc) {
    error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
  }
  return { events, error, messages: structuredClone(client.messages) };
}

async function image() {
  const threadId = randomUUID();
  const client = agent(threadId);
  client.addMessage({
    id: randomUUID(),
    role: "user",
    content: [
      { type: "text", text: "What is this?" },
      { type: "image", source: { type: "data", value: config.png, mimeType: "image/png" } },
    ],
  });
  const first = await run(client);
  client.addMessage({ id: randomUUID(), role: "user", content: "And now?" });
  const second = await run(client);
  return { threadId, first, second };
}

async function binary() {
  const threadId = randomUUID();
  const client = agent(threadId);
  client.addMessage({
    id: randomUUID(),
    role: "user",
    content: [
      { type: "text", text: "Old style" },
      { type: "binary", mimeType: "image/png", data: config.png, filename: "old.png" },
    ],
  });
  return { threadId, first: await run(client) };
}

const scenarios = { image, binary };
console.log(JSON.stringify(await scenarios[config.scenario]()));
