// client.mjs: a client of "mandate mcp serve" written with the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk, pinned in package-lock.json),
// driven by internal/cli/mcp_ts_test.go against the policy of mcpPolicy
// (tools echo, my_benefits, web_search, all testdata/guests/mcp-tool).
//
//	node client.mjs --stdio -- MANDATE ARGS...   starts the server itself
//	node client.mjs --http URL                   connects to a running one
//	                                             (bearer token: $MCP_TOKEN)
//
// It prints one JSON object on stdout: what each step saw. It judges
// nothing; the Go test does. Steps:
//
//	list       tools/list
//	echo       a call that works
//	refused    a call the kernel refuses (a path outside web_search's cap)
//	cancel     a call that never ends (op "spin"), aborted after CANCEL_MS:
//	           the SDK sends notifications/cancelled
//	progress   the same with a progress token, aborted once PROGRESS_WANT
//	           progress notifications arrived (or after PROGRESS_MAX_MS)
//	read       my_benefits (labelled pii:alice): the session's label rises,
//	           and the server says the tool list changed
//	flow       web_search again: refused (EFLOW), and listed unavailable
//	after      a last call, SETTLE_MS after the last abort, so a task the
//	           cancel did not kill would still be running then
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const CANCEL_MS = 500;
const PROGRESS_WANT = 2;
const PROGRESS_MAX_MS = 10000;
const SETTLE_MS = 1500;

const argv = process.argv.slice(2);
let transport;
let mode;
if (argv[0] === "--stdio" && argv[1] === "--" && argv.length > 2) {
  mode = "stdio";
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (typeof v === "string") env[k] = v;
  }
  // The server's stderr is ours: the Go test reads its log there.
  transport = new StdioClientTransport({ command: argv[2], args: argv.slice(3), env, stderr: "inherit" });
} else if (argv[0] === "--http" && argv.length === 2) {
  mode = "http";
  const headers = {};
  if (process.env.MCP_TOKEN) headers.Authorization = "Bearer " + process.env.MCP_TOKEN;
  transport = new StreamableHTTPClientTransport(new URL(argv[1]), { requestInit: { headers } });
} else {
  console.error("usage: node client.mjs --stdio -- COMMAND ARGS... | --http URL");
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (r) => (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
const out = { mode, steps: {} };

const client = new Client({ name: "mandate-ts-test", version: "1.0.0" });
let listChanged = 0;
let onListChanged = () => {};
client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
  listChanged++;
  onListChanged();
});
// waitListChanged waits (at most ms) for notifications/tools/list_changed:
// the server's SDK sends it 10 ms after the change.
const waitListChanged = (ms) =>
  listChanged > 0
    ? Promise.resolve()
    : new Promise((resolve) => {
        const timer = setTimeout(resolve, ms);
        onListChanged = () => {
          clearTimeout(timer);
          resolve();
        };
      });

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  return { isError: r.isError === true, text: text(r), structured: r.structuredContent ?? null };
}

// spin calls the never-ending op and aborts it: after ms, or (onprogress)
// once want progress notifications came.
async function spin({ ms, want }) {
  const ac = new AbortController();
  const progress = [];
  const started = Date.now();
  const opts = { signal: ac.signal, timeout: 60000 };
  let timer;
  if (want) {
    opts.onprogress = (p) => {
      progress.push(p);
      if (progress.length >= want) ac.abort("enough progress");
    };
    timer = setTimeout(() => ac.abort("no progress"), PROGRESS_MAX_MS);
  } else {
    timer = setTimeout(() => ac.abort("canceled by the test"), ms);
  }
  const res = { progress };
  try {
    const r = await client.callTool({ name: "echo", arguments: { op: "spin" } }, undefined, opts);
    res.returned = { isError: r.isError === true, text: text(r) };
  } catch (e) {
    res.error = String(e?.message ?? e);
    res.aborted = ac.signal.aborted;
    res.reason = String(ac.signal.reason ?? "");
  }
  clearTimeout(timer);
  res.abortedAfterMs = Date.now() - started;
  return res;
}

try {
  const t0 = Date.now();
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  const tools = async () => (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
  out.steps.list = await tools();
  out.steps.echo = await call("echo", { op: "echo", text: "hello from TypeScript" });
  out.steps.echoJSON = await call("echo", { op: "echo", text: "structured", json: true });
  out.steps.refused = await call("web_search", { op: "fetch", path: "/admin" });
  out.steps.invalid = await call("echo", { text: "no op" });
  out.steps.cancel = await spin({ ms: CANCEL_MS });
  out.steps.progress = await spin({ want: PROGRESS_WANT });
  await sleep(SETTLE_MS);
  out.steps.read = await call("my_benefits", { op: "read", owner: "alice" });
  await waitListChanged(5000);
  out.steps.flow = await call("web_search", { op: "fetch", path: "/search?q=Gold+PPO" });
  out.steps.listAfter = await tools();
  out.steps.after = await call("echo", { op: "echo", text: "still here" });
  out.listChanged = listChanged;
  if (mode === "http") {
    out.sessionId = transport.sessionId ?? null;
    await transport.terminateSession(); // DELETE: the server ends the session now
  }
  out.ms = Date.now() - t0;
} catch (e) {
  out.fatal = String(e?.stack ?? e);
}
try {
  await client.close();
} catch (e) {
  out.closeError = String(e);
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(out.fatal ? 1 : 0);
