// Pause and resume (nsbox's park and revive): a paused sandbox is listed
// as paused and does not run; connect brings it back, same id and
// tokens, with its files and its code contexts' Python state; another
// key cannot reach it; pausing what is gone is NotFoundError.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { NotFoundError, Sandbox } from "e2b";
import { RUN, create, listAll, value } from "./lib.mjs";

const OTHER_KEY = process.env.NSBOX_E2B_OTHER_KEY;


test("pause keeps files and Python state; connect resumes the sandbox", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, CodeSandbox, { metadata: { purpose: "pause" } });
  const id = sbx.sandboxId;
  await sbx.files.write("/home/user/kept.txt", "kept across the pause");
  await value(sbx, "x = 41");
  const ctx = await sbx.createCodeContext();
  await value(sbx, "y = 'in a context'", { context: ctx });

  assert.equal(await sbx.pause(), true, "pause of a running sandbox");
  assert.equal(await Sandbox.pause(id), false, "pause of a paused sandbox: already paused");

  const info = await Sandbox.getInfo(id);
  assert.equal(info.state, "paused");
  const paused = await listAll(Sandbox.list({ query: { state: ["paused"], metadata: { run: RUN, purpose: "pause" } } }));
  assert.deepEqual(paused.map((s) => s.sandboxId), [id]);
  const running = await listAll(Sandbox.list({ query: { state: ["running"], metadata: { run: RUN, purpose: "pause" } } }));
  assert.deepEqual(running, [], "a paused sandbox is not listed as running");
  assert.equal(await sbx.isRunning(), false, "a paused sandbox does not answer");
  await assert.rejects(sbx.commands.run("echo no", { requestTimeoutMs: 5_000 }), "a command on a paused sandbox");

  if (OTHER_KEY) {
    // Another key: not found, and the sandbox stays paused.
    await assert.rejects(Sandbox.connect(id, { apiKey: OTHER_KEY }), NotFoundError);
    await assert.rejects(Sandbox.getInfo(id, { apiKey: OTHER_KEY }), NotFoundError);
    assert.equal(await Sandbox.kill(id, { apiKey: OTHER_KEY }), false);
    assert.equal((await Sandbox.getInfo(id)).state, "paused");
  } else {
    t.diagnostic("NSBOX_E2B_OTHER_KEY unset: the other-key checks are skipped");
  }

  const before = Date.now();
  const same = await CodeSandbox.connect(id, { timeoutMs: 90_000 });
  const after = Date.now();
  assert.equal(same.sandboxId, id);
  const back = await same.getInfo();
  assert.equal(back.state, "running");
  // 90 s from when the connect was served, however long the resume took
  // (a second either way for the clock's rounding).
  const end = back.endAt.getTime();
  assert.ok(end >= before + 89_000 && end <= after + 91_000, `endAt is ${end - before} ms after the connect was asked for and ${end - after} ms after its answer, want the 90 s connect gave`);

  assert.equal(await same.files.read("/home/user/kept.txt"), "kept across the pause");
  assert.equal(await value(same, "x + 1"), "42");
  assert.equal(await value(same, "import os\nos.getcwd(), os.environ['HOME']"), "('/home/user', '/home/user')", "the home survives a pause");
  assert.equal((await same.commands.run('echo "$PWD $HOME"')).stdout, "/home/user /home/user\n");
  assert.equal(await value(same, "y", { context: ctx }), "in a context");
  assert.equal((await same.commands.run("cat /home/user/kept.txt && echo")).stdout, "kept across the pause\n");

  // The first handle's tokens are the sandbox's still.
  assert.equal(await sbx.isRunning(), true);
  assert.equal((await sbx.commands.run("echo alive")).stdout, "alive\n");
  // Connecting to a running sandbox is as before.
  await sbx.connect();
  assert.equal(await value(sbx, "x"), "41");
});

test("pausing an unknown, killed or foreign sandbox is NotFoundError", { timeout: 60_000 }, async (t) => {
  await assert.rejects(Sandbox.pause("0123456789abcdef0123456789abcdef"), NotFoundError);
  const sbx = await create(t, Sandbox);
  if (OTHER_KEY) {
    await assert.rejects(Sandbox.pause(sbx.sandboxId, { apiKey: OTHER_KEY }), NotFoundError);
    assert.equal(await sbx.isRunning(), true, "another key's pause leaves it running");
  }
  await sbx.kill();
  await assert.rejects(sbx.pause(), NotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError);
});

test("a paused sandbox can be killed", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  assert.equal(await sbx.pause(), true);
  assert.equal(await Sandbox.kill(sbx.sandboxId), true);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError);
});

test("a paused sandbox outlives its timeout, as on E2B; connect resumes it", { timeout: 60_000 }, async (t) => {
  // Set up with time to spare on a busy machine; then a 5 s timeout and
  // the pause at once, and a wait past the end it had.
  const sbx = await create(t, CodeSandbox, { timeoutMs: 60_000 });
  await value(sbx, "z = 'still here'");
  await sbx.setTimeout(5_000);
  const end = Date.now() + 5_000; // the sandbox's end is before this
  assert.equal(await sbx.pause(), true);
  await new Promise((r) => setTimeout(r, end + 1_000 - Date.now())); // past the 5 s timeout
  assert.equal((await Sandbox.getInfo(sbx.sandboxId)).state, "paused", "a paused sandbox past its timeout");
  const back = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 30_000 });
  assert.equal(await value(back, "z"), "still here");
});

test("lifecycle onTimeout pause: the timeout pauses the sandbox, connect resumes it", { timeout: 60_000 }, async (t) => {
  // Set up with time to spare on a busy machine, then a 3 s timeout.
  const sbx = await create(t, CodeSandbox, { timeoutMs: 60_000, lifecycle: { onTimeout: "pause" } });
  assert.equal((await sbx.getInfo()).lifecycle?.onTimeout, "pause");
  await value(sbx, "w = 'paused by its timeout'");
  const ctx = await sbx.createCodeContext();
  await value(sbx, "v = 7", { context: ctx });
  await sbx.setTimeout(3_000);
  let state;
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
    state = (await Sandbox.getInfo(sbx.sandboxId)).state;
    if (state === "paused") break;
  }
  assert.equal(state, "paused", "a sandbox with onTimeout pause, past its timeout");
  assert.equal(await sbx.isRunning(), false);
  const back = await CodeSandbox.connect(sbx.sandboxId, { timeoutMs: 30_000 });
  assert.equal(await value(back, "w"), "paused by its timeout");
  assert.equal(await value(back, "v", { context: ctx }), "7");
});
