// AG-UI responses of `threadloom serve`, judged by the TypeScript protocol packages of the
// folder it runs in: each event with @ag-ui/core's own `EventSchemas`, each response's
// sequence with @ag-ui/client's `verifyEvents`. Runs in agui_node/ (1.0.0) and in
// copilotkit_node/ (the 0.0.x CopilotKit's runtime bundles).
//
//   node verify_sse.mjs responses.json
//
// responses.json: [{"name": "...", "events": [<event>, ...]}, ...]. Prints one JSON object:
// {"version": <@ag-ui/core's version>, "problems": {"<name>": ["..."], ...}} (an empty list
// for a response both accept).
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { verifyEvents } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";

let schemas;
try {
  schemas = await import("@ag-ui/core/schemas"); // 1.0: the schemas have an entry of their own
} catch {
  schemas = await import("@ag-ui/core"); // 0.0.x
}
const EventSchemas = schemas.EventSchemas ?? schemas.EventSchema;
const require = createRequire(import.meta.url);
const version = require("@ag-ui/core/package.json").version;

const responses = JSON.parse(readFileSync(process.argv[2], "utf8"));
const problems = {};
for (const { name, events } of responses) {
  const found = [];
  events.forEach((event, index) => {
    const parsed = EventSchemas.safeParse(event);
    if (!parsed.success) found.push(`event ${index} ${event.type}: ${parsed.error.message}`);
  });
  try {
    await lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
  } catch (exc) {
    found.push(`verifyEvents: ${exc?.message ?? exc}`);
  }
  problems[name] = found;
}
process.stdout.write(JSON.stringify({ version, problems }));
