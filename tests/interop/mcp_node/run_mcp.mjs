// The real MCP clients against `threadloom serve`'s /mcp, driven by
// tests/interop/test_c13_mcp_node.py. One scenario per run; the config is the first argument
// (JSON): {base, token, scenario, ...}. Prints one JSON object: what the client saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { createRequire } from "node:module";
import path from "node:path";

const config = JSON.parse(process.argv[2]);
const errors = [];

function http() {
  const transport = new StreamableHTTPClientTransport(new URL(`${config.base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${config.token}` } },
  });
  return transport;
}

async function connect(transport) {
  const client = new Client({ name: "threadloom-interop", version: "0.0.0" });
  client.onerror = (error) => errors.push(String(error));
  await client.connect(transport);
  return client;
}

function seen(result) {
  return {
    content: result.content,
    structuredContent: result.structuredContent ?? null,
    meta: result._meta ?? null,
    isError: result.isError ?? false,
  };
}

function failure(error) {
  return { name: error?.name ?? null, code: error?.code ?? null, message: String(error?.message ?? error) };
}

const scenarios = {
  // list the tools, call one: the answer as text and structured content, the server's version
  async plain() {
    const transport = http();
    const client = await connect(transport);
    const tools = (await client.listTools()).tools;
    const result = await client.callTool({ name: "summarizer", arguments: { message: "a long story" } });
    const out = { server: client.getServerVersion(), tools, result: seen(result), sessionId: transport.sessionId ?? null };
    await client.close();
    return out;
  },

  // a call longer than the request timeout: it succeeds because progress arrives and resets it
  async slow() {
    const client = await connect(http());
    const progress = [];
    const began = Date.now();
    let result = null;
    let error = null;
    try {
      result = seen(
        await client.callTool({ name: "slow", arguments: { message: "take your time" } }, undefined, {
          timeout: config.timeoutMs,
          resetTimeoutOnProgress: true,
          onprogress: (p) => progress.push({ ...p, atMs: Date.now() - began }),
        }),
      );
    } catch (e) {
      error = failure(e);
    }
    await client.close();
    return { result, error, progress, tookMs: Date.now() - began };
  },

  // a call cancelled with an AbortSignal once the agent's tool call is under way
  async cancel() {
    const client = await connect(http());
    const progress = [];
    const abort = new AbortController();
    let error = null;
    let result = null;
    try {
      result = seen(
        await client.callTool({ name: "holder", arguments: { message: "hold on" } }, undefined, {
          signal: abort.signal,
          timeout: 120000,
          onprogress: (p) => {
            progress.push(p);
            if (String(p.message ?? "").startsWith("calling hold")) abort.abort("the user gave up");
          },
        }),
      );
    } catch (e) {
      error = failure(e);
    }
    // the cancellation is a POST of its own; the call's response stream is still open: the
    // thread's status (REST) while it is, before the transport closes
    let status = null;
    for (let i = 0; i < 100; i++) {
      const listed = await fetch(`${config.base}/api/threads?agent_id=holder`, {
        headers: { Authorization: `Bearer ${config.token}` },
      });
      const thread = (await listed.json()).threads[0];
      status = thread?.status?.state ?? null;
      if (status && status !== "running") break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await client.close();
    return { result, error, progress, statusBeforeClose: status };
  },

  // mcp-remote (stdio <-> Streamable HTTP, with an Authorization header) driven over stdio
  async remote() {
    const require = createRequire(import.meta.url);
    const proxy = path.join(path.dirname(require.resolve("mcp-remote/package.json")), "dist", "proxy.js");
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [proxy, `${config.base}/mcp`, "--header", `Authorization: Bearer ${config.token}`],
      env: { ...process.env, MCP_REMOTE_CONFIG_DIR: config.configDir },
      stderr: "pipe",
    });
    const logs = [];
    transport.stderr?.on("data", (chunk) => logs.push(String(chunk)));
    const client = await connect(transport);
    const tools = (await client.listTools()).tools.map((t) => t.name);
    const result = seen(await client.callTool({ name: "summarizer", arguments: { message: "via the proxy" } }));
    const out = { server: client.getServerVersion(), tools, result };
    await client.close();
    out.proxyLog = logs.join("").slice(-4000);
    return out;
  },
};

try {
  const out = await scenarios[config.scenario]();
  process.stdout.write(JSON.stringify({ ...out, errors }));
  process.exit(0);
} catch (e) {
  process.stdout.write(JSON.stringify({ failed: failure(e), stack: String(e?.stack ?? ""), errors }));
  process.exit(1);
}
