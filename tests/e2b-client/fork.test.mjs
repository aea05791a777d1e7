// Fork (nsbox's session fork): Sandbox.fork copies a running sandbox into
// new ones with its files and every code context's Python state, each
// with its own id and tokens; the parent is unchanged; another key cannot
// fork it; a paused one is refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { NotFoundError, Sandbox } from "e2b";
import { create, value } from "./lib.mjs";

const OTHER_KEY = process.env.NSBOX_E2B_OTHER_KEY;


test("fork copies files and Python state into new sandboxes; the parent is unchanged", { timeout: 120_000 }, async (t) => {
  const parent = await create(t, CodeSandbox, { metadata: { purpose: "fork" } });
  await parent.files.write("/home/user/kept.txt", "from the parent");
  await value(parent, "x = 41; shared = [1]; alias = shared");
  const ctx = await parent.createCodeContext();
  await value(parent, "y = 'in a context'", { context: ctx });

  const before = Date.now();
  const forks = await CodeSandbox.fork(parent.sandboxId, { count: 2, timeoutMs: 60_000 });
  assert.equal(forks.length, 2);
  for (const f of forks) {
    assert.ok(f instanceof CodeSandbox, `a fork failed: ${f}`);
    t.after(() => f.kill().catch(() => {}));
  }
  const [a, b] = forks;
  assert.notEqual(a.sandboxId, b.sandboxId);
  assert.match(a.sandboxId, /^[0-9a-f]{32}$/);
  for (const f of forks) {
    assert.equal(await value(f, "x + 1"), "42");
    assert.equal(await value(f, "shared is alias"), "True");
    assert.equal(await value(f, "y", { context: ctx }), "in a context");
    assert.equal(await value(f, "import os\nos.getcwd(), os.environ['HOME']"), "('/home/user', '/home/user')", "a fork's home is its parent's");
    assert.equal(await f.files.read("/home/user/kept.txt"), "from the parent");
    const info = await f.getInfo();
    assert.equal(info.metadata.purpose, "fork");
    const ttl = info.endAt.getTime() - before;
    assert.ok(ttl > 50_000 && ttl < 70_000, `a fork's endAt is ${ttl} ms away, want about the 60 s asked`);
  }
  // Each is its own: a change in one is seen nowhere else.
  await value(a, "x = 100");
  await a.files.write("/home/user/kept.txt", "changed in a fork");
  assert.equal(await value(b, "x"), "41");
  assert.equal(await value(parent, "x"), "41");
  assert.equal(await parent.files.read("/home/user/kept.txt"), "from the parent");
  assert.equal((await b.commands.run("cat /home/user/kept.txt")).stdout, "from the parent");

  if (OTHER_KEY) {
    await assert.rejects(Sandbox.fork(parent.sandboxId, { apiKey: OTHER_KEY }), NotFoundError);
  }
  await assert.rejects(Sandbox.fork(parent.sandboxId, { count: 17 }), "17 forks: more than nsbox's 16");
  assert.equal(await parent.pause(), true);
  await assert.rejects(Sandbox.fork(parent.sandboxId), "a paused sandbox is not forked");
});
