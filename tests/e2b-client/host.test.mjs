// sandbox.getHost(port): a server the sandbox runs on its loopback
// (python3 -m http.server) reached through the E2B endpoint at the host
// getHost names, PORT-ID.DOMAIN, with the sandbox's traffic token; the
// host is sent to the endpoint's address (the SDK would fetch
// https://HOST, for which the domain would have to resolve to the
// endpoint and carry TLS: docs/E2B.md, getHost).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox } from "e2b";
import { create, untilListening, viaHost } from "./lib.mjs";

test("getHost: a server in the sandbox, reached with its traffic token", { timeout: 90_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.write("/home/user/www/hello.txt", "hello from the sandbox\n");
  const srv = await sbx.commands.run("cd /home/user/www && exec python3 -m http.server 8000 --bind 127.0.0.1", { background: true });
  t.after(() => srv.kill().catch(() => {}));
  await untilListening(sbx, 8000);

  const host = sbx.getHost(8000);
  assert.match(host, new RegExp(`^8000-${sbx.sandboxId}\\.`));
  const token = { "e2b-traffic-access-token": sbx.trafficAccessToken };
  const ok = await viaHost(host, "/hello.txt", token);
  assert.equal(ok.status, 200, ok.body);
  assert.equal(ok.body, "hello from the sandbox\n");

  const none = await viaHost(host, "/hello.txt");
  assert.equal(none.status, 401, `no token: ${none.status} ${none.body}`);

  const closed = await viaHost(sbx.getHost(8001), "/", token);
  assert.equal(closed.status, 502, closed.body);
  const body = JSON.parse(closed.body);
  assert.equal(body.port, 8001);
  assert.equal(body.sandboxId, sbx.sandboxId);
  assert.match(body.message, /port 8001/);

  await sbx.kill();
  const gone = await viaHost(host, "/hello.txt", token);
  assert.equal(gone.status, 502, `after kill: ${gone.status} ${gone.body}`);
  assert.match(gone.body, /not running/);
});
