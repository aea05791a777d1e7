// sandbox.commands through envd's process.Process service (Connect-RPC,
// JSON, server streaming): output, exit codes, env, cwd, stdin, background
// processes listed, connected to and killed, and a command timeout.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CommandExitError, Sandbox, TimeoutError } from "e2b";
import { create, eventually } from "./lib.mjs";

test("stdout, stderr and exit code 0", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const out = [];
  const r = await sbx.commands.run("echo hello; echo oops >&2; echo world", { onStdout: (d) => out.push(d) });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hello\nworld\n");
  assert.equal(r.stderr, "oops\n");
  assert.equal(out.join(""), "hello\nworld\n", "onStdout sees every byte of stdout");
});

test("a nonzero exit is CommandExitError with the output", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await assert.rejects(sbx.commands.run("echo out; echo err >&2; exit 3"), (err) => {
    assert.ok(err instanceof CommandExitError, `want CommandExitError, got ${err}`);
    assert.equal(err.exitCode, 3);
    assert.equal(err.stdout, "out\n");
    assert.equal(err.stderr, "err\n");
    return true;
  });
  await assert.rejects(sbx.commands.run("nsbox-no-such-program"), (err) => err instanceof CommandExitError && err.exitCode === 127);
});

test("envs and cwd", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const env = await sbx.commands.run('printf "%s|%s" "$A" "$B"', { envs: { A: "1", B: "two words" } });
  assert.equal(env.stdout, "1|two words");
  assert.equal((await sbx.commands.run("pwd")).stdout, "/home/user\n", "the default cwd is the SDK user's home");
  assert.equal((await sbx.commands.run("pwd", { cwd: "/tmp" })).stdout, "/tmp\n");
  await sbx.commands.run("mkdir -p /home/user/sub");
  assert.equal((await sbx.commands.run("pwd", { cwd: "/home/user/sub" })).stdout, "/home/user/sub\n");
});

test("stdin: sendStdin then closeStdin to a background cat", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const h = await sbx.commands.run("cat", { background: true, stdin: true });
  assert.ok(h.pid > 0);
  await sbx.commands.sendStdin(h.pid, ""); // nothing: a no-op that succeeds, as envd's
  await h.sendStdin("hello\n");
  await sbx.commands.sendStdin(h.pid, new TextEncoder().encode("world\n"));
  await h.closeStdin();
  const r = await h.wait();
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "hello\nworld\n");
});

test("a background process is listed, killed and gone", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const h = await sbx.commands.run("sleep 1000", { background: true });
  assert.ok(h.pid > 0);
  // It outlives the call that started it.
  const r = await sbx.commands.run("echo still here");
  assert.equal(r.stdout, "still here\n");

  const list = await sbx.commands.list();
  const p = list.find((x) => x.pid === h.pid);
  assert.ok(p, `commands.list lacks pid ${h.pid}: ${JSON.stringify(list)}`);
  assert.equal(p.cmd, "/bin/bash");
  assert.ok(p.args.includes("sleep 1000"), `args ${JSON.stringify(p.args)}`);

  assert.equal(await sbx.commands.kill(h.pid), true);
  await assert.rejects(h.wait(), CommandExitError, "a killed command does not exit 0");
  await eventually(async () => {
    const after = await sbx.commands.list();
    assert.ok(!after.some((x) => x.pid === h.pid), `pid ${h.pid} still listed`);
  }, 10_000);
  assert.equal(await sbx.commands.kill(h.pid), false, "killing a gone pid finds nothing");
});

test("connect to a running command", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const h = await sbx.commands.run("for i in 1 2 3 4; do echo $i; sleep 0.5; done", { background: true });
  const c = await sbx.commands.connect(h.pid);
  assert.equal(c.pid, h.pid);
  const r = await c.wait();
  assert.equal(r.exitCode, 0);
  assert.match(r.stdout, /4\n$/);
  assert.equal((await h.wait()).stdout, "1\n2\n3\n4\n", "the starting stream saw everything");
});

test("a command timeout is TimeoutError and the sandbox lives on", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const start = Date.now();
  await assert.rejects(sbx.commands.run("sleep 60", { timeoutMs: 1_000 }), TimeoutError);
  assert.ok(Date.now() - start < 15_000, `the timeout took ${Date.now() - start} ms`);
  assert.equal((await sbx.commands.run("echo ok")).stdout, "ok\n");
});

test("a command running when its sandbox is killed is TimeoutError: killed or reached its end of life", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const h = await sbx.commands.run("sleep 60", { background: true });
  await sbx.kill();
  await assert.rejects(h.wait(), (err) => {
    assert.ok(err instanceof TimeoutError, `want TimeoutError, got ${err}`);
    assert.match(err.message, /killed or reached its end of life/);
    return true;
  });
});

test("an output flood stops at [sessions] command_output with output_limit", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  let n = 0;
  await assert.rejects(sbx.commands.run("head -c 200M /dev/zero; echo survived >&2", { onStdout: (d) => { n += d.length; } }), (err) => {
    assert.ok(err instanceof CommandExitError, `want CommandExitError, got ${err}`);
    assert.match(err.error ?? "", /output_limit/);
    assert.equal(err.stderr, "", "the shell was killed with the flood");
    return true;
  });
  // onStdout gets text: each NUL byte is one UTF-16 unit.
  assert.equal(n, 64 << 20, "the cap's bytes and no more");
  assert.equal((await sbx.commands.run("echo ok")).stdout, "ok\n");
});
