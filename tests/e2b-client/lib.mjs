// Shared helpers of the E2B client tests. The connection comes from the
// environment exactly as an unmodified E2B program gets it (E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY); every sandbox a test creates is killed
// when that test ends, whatever happened.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import { setTimeout as sleep } from "node:timers/promises";

for (const name of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY"]) {
  if (!process.env[name]) {
    throw new Error(`${name} is not set: these tests drive a running nsbox daemon started with --e2b-listen (tests/e2b-client/e2b_test.go sets it)`);
  }
}
if ((process.env.E2B_DEBUG ?? "").toLowerCase() === "true") {
  throw new Error("E2B_DEBUG=true makes the SDK fake every sandbox without asking the server; unset it");
}

export const API_URL = process.env.E2B_API_URL;
export const SANDBOX_URL = process.env.E2B_SANDBOX_URL;
export const API_KEY = process.env.E2B_API_KEY;

// DATASCI names the data-science rootfs (matplotlib, pandas) as a
// template. Tests that need nothing more use the SDKs' defaults ("base",
// "code-interpreter-v1"), which nsbox maps to its default rootfs.
export const DATASCI = process.env.NSBOX_E2B_TEMPLATE_DATASCI || "default";

// POLYGLOT names the rootfs of the polyglot profile (R and Java) as a
// template, "" when the store has none (its tests skip).
export const POLYGLOT = process.env.NSBOX_E2B_TEMPLATE_POLYGLOT || "";

// envd's and the code interpreter's ports, as the SDKs send them in
// E2b-Sandbox-Port.
export const ENVD_PORT = 49983;
export const JUPYTER_PORT = 49999;

// TIMEOUT_MS is the sandboxes' timeout: one a crashed test leaks still
// ends by itself.
export const TIMEOUT_MS = 120_000;

// RUN tags this run's sandboxes (metadata "run"), so that list assertions
// see only what this run made.
export const RUN = randomBytes(6).toString("hex");

export const PNG_MAGIC = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

export { sleep };

// create makes a sandbox of cls (e2b's or the code interpreter's Sandbox),
// of template if given (else the SDK's default), and kills it when the
// test t ends.
export async function create(t, cls, opts = {}, template) {
  const o = { timeoutMs: TIMEOUT_MS, ...opts, metadata: { run: RUN, ...(opts.metadata ?? {}) } };
  const sbx = template === undefined ? await cls.create(o) : await cls.create(template, o);
  t.after(() => sbx.kill().catch(() => {}));
  return sbx;
}

// listAll reads every page of a Sandbox.list paginator.
export async function listAll(paginator) {
  const out = [];
  while (paginator.hasNext) out.push(...(await paginator.nextItems()));
  return out;
}

// eventually retries fn, which throws while its condition does not hold,
// until it passes or ms have gone by; then it throws fn's last error.
export async function eventually(fn, ms = 15_000, every = 200) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
    }
    await sleep(every);
  }
}

export function sha256(bytes) {
  return createHash("sha256").update(bytes).digest("hex");
}

// rawSandboxFetch sends a request to a sandbox route the way the SDKs do
// when E2B_SANDBOX_URL is set (E2b-Sandbox-Id and E2b-Sandbox-Port
// headers), with exactly the extra headers given.
export function rawSandboxFetch(path, { sandboxId, port = ENVD_PORT, headers = {}, method = "GET", body } = {}) {
  return fetch(new URL(path, SANDBOX_URL), {
    method,
    body,
    headers: { "E2b-Sandbox-Id": sandboxId, "E2b-Sandbox-Port": String(port), ...headers },
    signal: AbortSignal.timeout(15_000),
  });
}

// assertRefused checks that res refuses the request (401, 403 or 404).
export async function assertRefused(res, what) {
  const body = await res.text();
  assert.ok([401, 403, 404].includes(res.status), `${what}: want 401, 403 or 404, got ${res.status}: ${body.slice(0, 300)}`);
}

// run runs code and returns its execution, failing the test on an error.
export async function run(sbx, code, opts) {
  const e = await sbx.runCode(code, opts);
  assert.equal(e.error, undefined, e.error && `${code}: ${e.error.name}: ${e.error.value}\n${e.error.traceback}`);
  return e;
}

// value runs code and returns its main result's text, failing on an error.
export async function value(sbx, code, opts) {
  return (await run(sbx, code, opts)).text;
}

// viaHost sends GET path to the endpoint with Host: host (getHost's
// PORT-ID.DOMAIN) and headers, and resolves to its status and body.
export function viaHost(host, path, headers = {}) {
  const u = new URL(API_URL);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, headers: { host, ...headers }, timeout: 15_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end();
  });
}

// untilListening waits in sbx until something listens on 127.0.0.1:port
// (bounded by the caller's test timeout).
export async function untilListening(sbx, port) {
  await sbx.commands.run(`python3 -c 'import socket, time
while True:
    try:
        socket.create_connection(("127.0.0.1", ${port})).close(); break
    except OSError:
        time.sleep(0.05)'`, { timeoutMs: 60_000 });
}
