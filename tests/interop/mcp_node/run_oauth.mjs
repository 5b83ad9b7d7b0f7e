// The TypeScript MCP SDK's client with its OAuth client provider against a Threadloom
// server (tests/interop/test_c13_mcp_oauth.py). Usage: node run_oauth.mjs <server>/mcp <tool> <message>
//
// The provider keeps everything in memory. Its redirectToAuthorization prints
// {"authorize": url} on stdout and waits for the test, which performs the signed-in user's
// consent over HTTP, to write {"code": ...} on stdin. Every HTTP request the SDK makes is
// printed as {"http": "METHOD path status"}, and the outcome as {"result": ...}.
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [serverUrl, tool, message] = process.argv.slice(2);
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");

const lines = createInterface({ input: process.stdin });
const waiting = [];
lines.on("line", (line) => waiting.shift()?.(JSON.parse(line)));
const nextLine = () => new Promise((resolve) => waiting.push(resolve));

const loggingFetch = async (url, init) => {
  const response = await fetch(url, init);
  const where = new URL(typeof url === "string" ? url : url.href ?? url.url);
  say({ http: `${init?.method ?? "GET"} ${where.pathname} ${response.status}` });
  return response;
};

let codePromise = null;
const store = {};
const provider = {
  get redirectUrl() {
    return "http://localhost:33418/callback";
  },
  get clientMetadata() {
    return {
      client_name: "Threadloom interop test (TypeScript SDK)",
      redirect_uris: ["http://localhost:33418/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => store.client,
  saveClientInformation: (info) => {
    store.client = info;
  },
  tokens: () => store.tokens,
  saveTokens: (tokens) => {
    store.tokens = tokens;
  },
  saveCodeVerifier: (verifier) => {
    store.verifier = verifier;
  },
  codeVerifier: () => store.verifier,
  redirectToAuthorization: async (url) => {
    say({ authorize: url.href });
    codePromise = nextLine().then((answer) => answer.code);
  },
};

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), {
    authProvider: provider,
    fetch: loggingFetch,
  });
  const client = new Client({ name: "threadloom-oauth-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

try {
  let connected;
  try {
    connected = await connect();
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || codePromise === null) throw error;
    const transport = new StreamableHTTPClientTransport(new URL(serverUrl), {
      authProvider: provider,
      fetch: loggingFetch,
    });
    await transport.finishAuth(await codePromise);
    connected = await connect();
  }
  const { client } = connected;
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const called = await client.callTool({ name: tool, arguments: { message } });
  say({
    result: {
      tools,
      isError: called.isError ?? false,
      text: called.content.map((c) => c.text).join(""),
      structured: called.structuredContent ?? null,
      thread: called._meta?.threadloom ?? null,
      tokenType: store.tokens?.token_type,
      accessPrefix: store.tokens?.access_token?.slice(0, 4),
      hasRefresh: Boolean(store.tokens?.refresh_token),
      clientId: store.client?.client_id,
    },
  });
  await client.close();
  process.exit(0);
} catch (error) {
  say({ error: String(error?.stack ?? error) });
  process.exit(1);
}
