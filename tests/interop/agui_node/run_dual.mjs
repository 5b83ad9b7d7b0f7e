// @ag-ui/client 1.0 (HttpAgent, its verifier on) runs a dual_ai agent of `threadloom serve`
// (spec 13 §13.2.10, C13-058); every event is also checked with @ag-ui/core 1.0's own
// `EventSchemas`.
//
//   node run_dual.mjs '{"base": "http://127.0.0.1:8000", "token": "...", "agent": "writer_critic",
//                       "text": "Write about threads."}'
//
// Prints one JSON object: the events (summaries), the schema problems, the client's error
// (null when it accepted the run) and the messages it holds afterwards.
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";

const config = JSON.parse(process.argv[2]);
const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
const client = new HttpAgent({
  url: `${config.base}/api/agui/${config.agent ?? "writer_critic"}`,
  headers,
  threadId: randomUUID(),
});
client.addMessage({ id: randomUUID(), role: "user", content: config.text ?? "Write." });

const events = [];
const problems = [];
let error = null;
try {
  await client.runAgent(
    { runId: randomUUID() },
    {
      onEvent({ event }) {
        const parsed = EventSchemas.safeParse(event);
        if (!parsed.success) problems.push(`${event.type}: ${parsed.error.message}`);
        events.push({
          type: event.type,
          messageId: event.messageId,
          role: event.role,
          name: event.name,
          toolCallId: event.toolCallId,
          toolCallName: event.toolCallName,
          parentMessageId: event.parentMessageId,
        });
      },
    },
  );
} catch (exc) {
  error = `${exc?.name ?? "Error"}: ${exc?.message ?? exc}`;
}
process.stdout.write(
  JSON.stringify({
    events,
    problems,
    error,
    messages: client.messages.map((m) => ({
      id: m.id,
      role: m.role,
      name: m.name ?? null,
      content: m.content ?? null,
      toolCalls: (m.toolCalls ?? []).map((c) => c.function.name),
      toolCallId: m.toolCallId ?? null,
    })),
  }),
);
