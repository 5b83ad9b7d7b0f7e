// A frontend tool round trip driven by CopilotKit's own front end logic (@copilotkit/core's
// CopilotKitCore, what useFrontendTool registers into) through CopilotKit's runtime
// (@copilotkit/runtime, served here on a loopback port by node:http around its fetch
// handler) to `threadloom serve` (the runtime's AG-UI HttpAgent), headless.
//
//   node frontend_core.mjs '{"base": "http://127.0.0.1:8000", "token": "...", "agent": "desk"}'
//
// The front end registers `show_card` (a zod schema, a handler, followUp) and runs the agent
// once: CopilotKitCore sends the tool with the run, runs the handler when the model calls
// it, and sends the follow-up run with the result itself. Prints one JSON object: every
// event the front end's agent received (each parsed with @ag-ui/core's EventSchemas),
// the handler's calls, the tool executions the core reported, the agent's messages.
import http from "node:http";
import { randomUUID } from "node:crypto";
import { CopilotKitCore } from "@copilotkit/core";
import { CopilotRuntime, createCopilotRuntimeHandler } from "@copilotkit/runtime/v2";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core";
import { z } from "zod";

process.env.COPILOTKIT_TELEMETRY_DISABLED = "true";
// CopilotKitCore connects to its runtime only in a browser (it checks for `window`): this
// headless front end is a window without a location, DOM or listeners
globalThis.window ??= globalThis;
const config = JSON.parse(process.argv[2]);
const name = config.agent ?? "desk";
const BASE_PATH = "/api/copilotkit";

const runtime = new CopilotRuntime({
  agents: {
    [name]: new HttpAgent({
      url: `${config.base}/api/agui/${name}`,
      headers: { Authorization: `Bearer ${config.token}` },
    }),
  },
});
const handler = createCopilotRuntimeHandler({ runtime, basePath: BASE_PATH });

// the runtime on a port of its own: the front end talks HTTP to it, as in a browser
const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const headers = new Headers();
  for (const [key, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(key, value);
  }
  config.trace && console.error(`[frontend_core] ${req.method} ${req.url}`);
  const response = await handler(
    new Request(`http://${req.headers.host}${req.url}`, {
      method: req.method,
      headers,
      body: hasBody ? Buffer.concat(chunks) : undefined,
    }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    for await (const chunk of response.body) res.write(chunk);
  }
  res.end();
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const url = `http://127.0.0.1:${server.address().port}${BASE_PATH}`;
const trace = (what) => config.trace && console.error(`[frontend_core] ${what}`);
trace(`runtime at ${url}`);

const core = new CopilotKitCore({ runtimeUrl: url, runtimeTransport: "rest" });
const executions = [];
const errors = [];
const ready = new Promise((resolve) => {
  core.subscribe({
    onAgentsChanged({ agents }) {
      if (agents[name]) resolve();
    },
    onToolExecutionStart({ toolName, toolCallId }) {
      executions.push({ phase: "start", toolName, toolCallId });
    },
    onToolExecutionEnd({ toolName, toolCallId, result, error }) {
      executions.push({ phase: "end", toolName, toolCallId, result, error: error ?? null });
    },
    onError({ error, code }) {
      errors.push(`${code}: ${error?.message ?? error}`);
    },
  });
});
core.connect(); // (a host's mount effect does this; a no-op once connecting)
if (core.getAgent(name) === undefined) await ready;
trace(`agents: ${Object.keys(core.agents)}`);

// what useFrontendTool registers
const handled = [];
core.addTool({
  name: "show_card",
  description: "Show a card to the user in the page.",
  parameters: z.object({ title: z.string() }),
  handler: async ({ title }) => {
    handled.push(title);
    return `card shown: ${title}`;
  },
  followUp: true,
});

const agent = core.getAgent(name);
agent.threadId = randomUUID();
const events = [];
const problems = [];
agent.subscribe({
  onEvent({ event }) {
    const parsed = EventSchemas.safeParse(event);
    if (!parsed.success) problems.push(`${event.type}: ${parsed.error.message}`);
    const out = { type: event.type };
    for (const key of ["toolCallId", "toolCallName", "delta", "content", "outcome", "code", "message"]) {
      if (event[key] !== undefined) out[key] = event[key];
    }
    events.push(out);
  },
});
agent.addMessage({ id: randomUUID(), role: "user", content: "Show me a card" });
let error = null;
try {
  await core.runAgent({ agent });
} catch (exc) {
  error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
}
server.close();
const messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  content: m.content ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => c.function.name),
  toolCallId: m.toolCallId ?? null,
}));
process.stdout.write(
  JSON.stringify({ threadId: agent.threadId, error, errors, problems, handled, executions, events, messages }),
);
process.exit(0);
