// Sandbox.create's network option and Sandbox.updateNetwork through the
// SDK: allowOut is the sandbox's egress through the daemon's proxy (here
// to a test server on the host's 127.0.0.1, named NSBOX_E2B_EGRESS, that
// the daemon's [network] config allows and resolves), everything else
// stays out; allowPublicTraffic opens the sandbox's own servers without
// credentials; maskRequestHost is the Host they see (docs/E2B.md).
import assert from "node:assert/strict";
import { test } from "node:test";
import { CommandExitError, Sandbox, SandboxError } from "e2b";
import { create, untilListening, viaHost } from "./lib.mjs";

const EGRESS = process.env.NSBOX_E2B_EGRESS; // host:port, allowed by the daemon's operator
const ALL_TRAFFIC = "0.0.0.0/0";

test("network.allowOut: the named host is reached, nothing else", { timeout: 120_000 }, async (t) => {
  assert.ok(EGRESS, "NSBOX_E2B_EGRESS is not set (e2b_test.go sets it)");
  const sbx = await create(t, Sandbox, { network: { allowOut: [EGRESS], denyOut: [ALL_TRAFFIC] } });
  const ok = await sbx.commands.run(`curl -sS --max-time 30 http://${EGRESS}/hello`);
  assert.equal(ok.stdout, "hello from upstream");
  // Another host: the proxy refuses it (403), curl -f fails.
  await assert.rejects(sbx.commands.run("curl -sSf --max-time 30 http://other.test/"), CommandExitError);
  // A direct connection, past the proxy: nothing but loopback is there.
  await assert.rejects(sbx.commands.run(`curl -sS --noproxy '*' --max-time 5 http://${EGRESS}/hello`), CommandExitError);

  const info = await sbx.getInfo();
  assert.deepEqual(info.network?.allowOut, [EGRESS]);
  assert.deepEqual(info.network?.denyOut, [ALL_TRAFFIC]);

  // updateNetwork may change denyOut; what gets out cannot change.
  await sbx.updateNetwork({ allowOut: [EGRESS], denyOut: ["8.8.8.8"] });
  assert.deepEqual((await sbx.getInfo()).network?.denyOut, ["8.8.8.8"]);
  await assert.rejects(sbx.updateNetwork({}), (e) => e instanceof SandboxError && /allowOut/.test(e.message));
  assert.equal((await sbx.commands.run(`curl -sS --max-time 30 http://${EGRESS}/hello`)).stdout, "hello from upstream");
});

test("network: without allowOut nothing gets out; what the operator does not allow is refused", { timeout: 90_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { network: { denyOut: ["8.8.8.8"] } });
  await assert.rejects(sbx.commands.run(`curl -sS --max-time 5 http://${EGRESS}/hello`), CommandExitError);
  await assert.rejects(Sandbox.create({ network: { allowOut: ["1.1.1.1"] } }), (e) => e instanceof SandboxError && /1\.1\.1\.1/.test(e.message));
  await assert.rejects(Sandbox.create({ network: { allowOut: [ALL_TRAFFIC] } }), (e) => e instanceof SandboxError && /allowOut\[0\]/.test(e.message));
});

test("network.allowPublicTraffic and maskRequestHost: the sandbox's server without a token, with the masked Host", { timeout: 90_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { network: { allowPublicTraffic: true, maskRequestHost: "custom-host.example.com:${PORT}" } });
  const srv = await sbx.commands.run(`python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = self.headers['Host'].encode()
        self.send_response(200); self.send_header('Content-Length', str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8080), H).serve_forever()
"`, { background: true });
  t.after(() => srv.kill().catch(() => {}));
  await untilListening(sbx, 8080);
  const res = await viaHost(sbx.getHost(8080), "/");
  assert.equal(res.status, 200, res.body);
  assert.equal(res.body, "custom-host.example.com:8080");

  const closed = await create(t, Sandbox, { network: { allowPublicTraffic: false } });
  assert.ok(closed.trafficAccessToken);
  assert.equal((await viaHost(closed.getHost(8080), "/")).status, 401);
});
