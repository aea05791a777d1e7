// A Node command flooding stdout through envd streams to the client at its
// pace. Node's own pipe writes do not block, so before the process agent's
// preload the first 64 KiB arrived, the rest waited in Node's memory and
// the sandbox's memory limit killed the command ("signal: killed").
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox } from "e2b";
import { create } from "./lib.mjs";

test("a Node flood on stdout streams to the client", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  let n = 0;
  let enough;
  const got = new Promise((resolve) => { enough = resolve; });
  const h = await sbx.commands.run(`node -e 'for(;;)process.stdout.write("x".repeat(65536))'`, {
    background: true,
    onStdout: (d) => { n += d.length; if (n >= 16 << 20) enough(); },
  });
  const ended = h.wait().then((r) => `exit ${r.exitCode}`, (e) => String(e));
  const first = await Promise.race([got.then(() => null), ended]);
  assert.equal(first, null, `the flood ended after ${n} bytes: ${first}`);
  await h.kill();
});
