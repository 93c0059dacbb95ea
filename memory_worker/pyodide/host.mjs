// Serves the memory Worker (memory_worker/src/entry.py) from real Pyodide under Node 22:
// what workerd would give it, for one Worker with one Durable Object class.
//
//   node host.mjs --src memory_worker/src --sdk SITE_PACKAGES --data DIR [--host H] [--port P] [--control]
//                 [--wrangler memory_worker/wrangler.toml]
//
// - The Worker's own files (`entry.py`, `memory_engine/`) and the real `workers` SDK
//   (workers-runtime-sdk, from SITE_PACKAGES/workers) are copied unchanged into
//   Pyodide's file system; `entry` is imported as workerd imports the main module.
// - Each HTTP request builds a fresh `Default` entrypoint (`ctx`, `env`) and calls its
//   `fetch` with the JS Request; a Python object with `js_object` (the SDK Response) is
//   unwrapped, as workerd does (`res?.js_object ?? res`). A stub's RPC method call reaches
//   the object's Python method with its arguments through the SDK's `python_from_rpc`
//   and its result through `python_to_rpc`, as workerd calls one.
// - `env`: the `CHAT_MEMORY` namespace, the `[vars]` of wrangler.toml (beside `--src`
//   unless `--wrangler` names one), and the vars/secrets of the process environment
//   (MEMORY_API_TOKEN, SUMMARY_*, RETENTION_MESSAGES), which win as secrets and
//   `.dev.vars` do over `[vars]`.
// - Idle objects are evicted as workerd does (objects.mjs IDLE_EVICT_MS; the host's
//   PYODIDE_IDLE_EVICT_MS shortens it): their state stays in their files.
// - A rejected promise or an exception nobody handles is logged as an error (the test
//   suite sees it) and the host keeps serving, as workerd does; Node's default would
//   end the process and drop every connection.
// - The global `fetch` is Node's, so the summarizer is reached through the runtime.
// - `--control`: reads commands from stdin (`reset`, `evict`, `errors`, `stats`), answering one
//   JSON line each on stdout, for the test suite (one host per test session) and the
//   benchmarks (`stats` counts the alarms run and the CPU ms spent while they ran). Each
//   answer holds the errors logged since the last `errors`, `reset` or `evict`, which take
//   them; `stats` leaves them for the suite's own check.
// On start it prints one JSON line on stdout: {"ready": URL, "cold_start_s", "pyodide_s"}.

import { createServer } from "node:http";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { loadPyodide } from "pyodide";
import { IDLE_EVICT_MS, ObjectHost } from "./objects.mjs";
import { sqlClock } from "./storage.mjs";
import { wranglerVars } from "./wrangler.mjs";

const MAX_BODY_BYTES = 100 * 1024 * 1024; // workerd's default request body limit
const ENV_NAMES = /^(MEMORY_API_TOKEN|RETENTION_MESSAGES|SUMMARY_[A-Z0-9_]+)$/;

const { values: args } = parseArgs({
  options: {
    src: { type: "string" },
    sdk: { type: "string" },
    data: { type: "string" },
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "8787" },
    control: { type: "boolean", default: false },
    wrangler: { type: "string" },
  },
});
for (const name of ["src", "sdk", "data"]) {
  if (!args[name]) {
    console.error(`host.mjs: --${name} is required`);
    process.exit(2);
  }
}
const dataDir = resolve(args.data);
mkdirSync(dataDir, { recursive: true });

const errors = [];
function reportError(text) {
  errors.push(text);
  if (errors.length > 1000) errors.splice(0, errors.length - 1000); // bounded in a long run
  console.error(text);
}
process.on("unhandledRejection", (reason) => reportError(`unhandled rejection: ${reason?.stack ?? reason}`));
process.on("uncaughtException", (err) => reportError(`uncaught exception: ${err?.stack ?? err}`));

// Outbound fetch goes through the objects' gates (an object awaiting it lets others in).
let objects = null;
const nodeFetch = globalThis.fetch.bind(globalThis);
globalThis.fetch = (input, init) => (objects ? objects.outbound(nodeFetch, input, init) : nodeFetch(input, init));

const started = performance.now();
const pyodide = await loadPyodide({
  stdout: (line) => console.error(line),
  stderr: (line) => console.error(line),
});
const pyodideSeconds = (performance.now() - started) / 1000;

function copyTree(from, to) {
  pyodide.FS.mkdirTree(to);
  for (const name of readdirSync(from)) {
    if (name === "__pycache__") continue;
    const path = join(from, name);
    if (statSync(path).isDirectory()) copyTree(path, `${to}/${name}`);
    else pyodide.FS.writeFile(`${to}/${name}`, readFileSync(path));
  }
}
copyTree(resolve(args.src), "/worker");
copyTree(join(resolve(args.sdk), "workers"), "/sdk/workers");

class ExecutionContext {
  waitUntil(promise) {}
  passThroughOnException() {}
}

const wranglerPath = args.wrangler ? resolve(args.wrangler) : join(dirname(resolve(args.src)), "wrangler.toml");
const vars = existsSync(wranglerPath) ? wranglerVars(readFileSync(wranglerPath, "utf8")) : {};
const env = { ...vars };
for (const [name, value] of Object.entries(process.env)) {
  if (ENV_NAMES.test(name)) env[name] = value;
}
// workerd gives the SDK these two modules; compatibility flags at their defaults.
pyodide.registerJsModule("_cloudflare_compat_flags", {
  python_workflows_implicit_dependencies: false,
  python_request_headers_preserve_commas: false,
});
pyodide.registerJsModule("_pyodide_entrypoint_helper", {
  patchWaitUntil(ctx) {},
  cloudflareWorkersModule: { env, waitUntil(promise) {} },
  cloudflareSocketsModule: null,
  doAnImport: (name) => import(name),
});
pyodide.runPython("import sys; sys.path[:0] = ['/worker', '/sdk']");
const entry = pyodide.pyimport("entry");

const { PyProxy } = pyodide.ffi;

// An RPC method as workerd's Python entrypoint helper calls one: each argument through the
// SDK's python_from_rpc, the result through python_to_rpc.
const callRpc = pyodide.runPython(`
from inspect import isawaitable
from workers import python_from_rpc, python_to_rpc

async def call_rpc(method, *args):
    result = method(*[python_from_rpc(arg) for arg in args])
    if isawaitable(result):
        result = await result
    return python_to_rpc(result)

call_rpc
`);

// Calls one handler as workerd does (relaxed: extra arguments are dropped) and unwraps
// an SDK Response to its JS Response; or an RPC method (`rpc`).
async function callHandler(instance, name, handlerArgs, rpc = false) {
  const method = instance[name];
  if (typeof method !== "function") {
    if (rpc) throw new TypeError(`The RPC receiver does not implement the method "${name}".`);
    throw new TypeError(`Method ${name} does not exist`);
  }
  try {
    if (rpc) return await callRpc(method, ...handlerArgs);
    const result = await method.callRelaxed(...handlerArgs);
    if (result instanceof PyProxy) {
      try {
        return result.js_object ?? result.js_response;
      } finally {
        result.destroy();
      }
    }
    return result;
  } finally {
    method.destroy();
  }
}

objects = new ObjectHost(
  dataDir,
  {
    construct: (state) => entry.ChatMemorySQLite(state, env),
    call: callHandler,
    release: (instance) => instance.destroy(),
  },
  reportError,
  Number(process.env.PYODIDE_IDLE_EVICT_MS) || IDLE_EVICT_MS,
);
env.CHAT_MEMORY = objects.namespace;

async function workerFetch(request) {
  const instance = entry.Default(new ExecutionContext(), env);
  try {
    return await callHandler(instance, "fetch", [request]);
  } finally {
    instance.destroy();
  }
}

const GONE = Symbol("the client went away mid-body");

// The body, null when it is over the limit, GONE when the client left before it was whole.
async function readBody(req) {
  const chunks = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return null;
      chunks.push(chunk);
    }
  } catch (err) {
    if (req.aborted || err?.code === "ECONNRESET") return GONE;
    throw err;
  }
  return Buffer.concat(chunks);
}

let inFlight = 0;
let clientsGone = 0;
const server = createServer(async (req, res) => {
  inFlight += 1;
  try {
    const body = await readBody(req);
    if (body === GONE) {
      // A disconnect, not a failure of the host (as workerd and the local host see it): the
      // Worker never saw the request, and there is no one left to answer.
      clientsGone += 1;
      return;
    }
    if (body === null) {
      res.writeHead(413, { "content-type": "text/plain" }).end("Payload Too Large");
      return;
    }
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    const origin = `http://${req.headers.host || `${args.host}:${args.port}`}`;
    const hasBody = !["GET", "HEAD"].includes(req.method) && body.length > 0;
    let request;
    try {
      request = new Request(new URL(req.url, origin), { method: req.method, headers, body: hasBody ? body : undefined });
    } catch (err) {
      res.writeHead(400, { "content-type": "text/plain" }).end("Bad Request");
      return;
    }
    let response;
    try {
      response = await workerFetch(request);
      if (!(response instanceof Response)) throw new TypeError("the Worker's fetch did not return a Response");
    } catch (err) {
      reportError(`worker ${req.method} ${req.url}: ${err?.stack ?? err}`);
      res.writeHead(500, { "content-type": "text/plain" }).end("Internal Server Error");
      return;
    }
    const data = Buffer.from(await response.arrayBuffer());
    res.writeHead(response.status, [...response.headers].flat());
    res.end(data);
  } catch (err) {
    reportError(`host: ${err?.stack ?? err}`);
    if (!res.headersSent) res.writeHead(500).end();
  } finally {
    inFlight -= 1;
  }
});
server.keepAliveTimeout = 30_000;

function wipeData() {
  objects.closeAll();
  objects.alarms.clear();
  for (const name of readdirSync(dataDir)) {
    if (!name.startsWith("_alarms")) rmSync(join(dataDir, name), { recursive: true, force: true });
  }
}

function control() {
  const lines = createInterface({ input: process.stdin });
  lines.on("line", async (line) => {
    const command = line.trim();
    let answer;
    try {
      await objects.idle();
      if (command === "reset") wipeData();
      else if (command === "evict") objects.closeAll();
      else if (command !== "errors" && command !== "stats") throw new Error(`unknown command ${command}`);
      // `stats` reads the errors without taking them: the test that asks for stats mid-test
      // must not swallow what the suite's own `errors` check after it is there to see.
      answer = { ok: command, errors: command === "stats" ? [...errors] : errors.splice(0) };
      if (command === "stats") {
        const memory = process.memoryUsage();
        Object.assign(answer, {
          open: objects.open,
          evictions: objects.evictions,
          rss: memory.rss,
          wasm: pyodide._module.HEAPU8.length,
          alarms: objects.alarmsRun,
          alarm_cpu_ms: objects.alarmCpuMs,
          sql_ms: sqlClock.ms,
          alarm_sql_ms: objects.alarmSqlMs,
          clients_gone: clientsGone,
        });
      }
      if (command === "evict") objects.start();
    } catch (err) {
      answer = { error: String(err?.message ?? err), errors: errors.splice(0) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  });
  lines.on("close", shutdown); // the test session that drives this host is gone
}

async function shutdown() {
  server.close();
  const deadline = Date.now() + 10_000;
  while (inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  try {
    await objects.idle(5_000);
  } catch {}
  objects.close();
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);

server.listen(Number(args.port), args.host, () => {
  objects.start(); // alarms persisted by an earlier run fire now (or when due)
  const { port } = server.address();
  const url = `http://${args.host.includes(":") ? `[${args.host}]` : args.host}:${port}`;
  process.stdout.write(
    JSON.stringify({
      ready: url,
      cold_start_s: process.uptime(),
      pyodide_s: pyodideSeconds,
      vars: Object.keys(vars).sort(),
    }) + "\n",
  );
  if (args.control) control();
});
