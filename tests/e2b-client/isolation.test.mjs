// The same isolation as /v1 for what the E2B SDKs start: commands and
// code run as the sandbox's unprivileged user, with no capabilities,
// no_new_privs and the seccomp filter, on a read-only rootfs, with
// loopback only, bounded by the sandbox's limits; whatever the SDK asks
// (user "root", a long timeout), it gets no more than the operator allows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { CommandExitError, Sandbox } from "e2b";
import { create, eventually } from "./lib.mjs";

const CANARY = process.env.NSBOX_E2B_HOST_CANARY;

// status reads fields of /proc/self/status as the command sees them.
async function status(sbx, opts = {}) {
  const r = await sbx.commands.run("cat /proc/self/status", opts);
  return Object.fromEntries(r.stdout.split("\n").filter((l) => l.includes(":")).map((l) => l.split(":\t").map((s) => s.trim())));
}

test("a command runs unprivileged, filtered and confined, even as user root", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  for (const opts of [{}, { user: "root" }]) {
    const st = await status(sbx, opts);
    assert.match(st.Uid, /^1000\s/, `uid with ${JSON.stringify(opts)}`);
    for (const cap of ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]) {
      assert.equal(st[cap], "0000000000000000", `${cap} with ${JSON.stringify(opts)}`);
    }
    assert.equal(st.NoNewPrivs, "1");
    assert.equal(st.Seccomp, "2", "the seccomp filter is installed");
  }
  // The rootfs is read-only; the home is the sandbox's own workspace.
  await assert.rejects(sbx.commands.run("touch /usr/nsbox-x"), (e) => e instanceof CommandExitError && /Read-only file system/.test(e.stderr));
  await assert.rejects(sbx.commands.run("echo x >> /etc/passwd"), CommandExitError);
  assert.equal((await sbx.commands.run("touch /home/user/ok && echo yes")).stdout, "yes\n");
  // Loopback only.
  const ifaces = (await sbx.commands.run("tail -n +3 /proc/net/dev | cut -d: -f1")).stdout.split("\n").map((s) => s.trim()).filter(Boolean);
  assert.deepEqual(ifaces, ["lo"]);
  // The kernel surface the filter removes.
  await assert.rejects(sbx.commands.run("unshare -U true"), CommandExitError);
});

test("the host's files are out of reach", { timeout: 60_000, skip: !CANARY && "NSBOX_E2B_HOST_CANARY is not set" }, async (t) => {
  const sbx = await create(t, Sandbox);
  await assert.rejects(sbx.commands.run(`cat ${CANARY}`), (e) => e instanceof CommandExitError && !e.stdout.includes("host secret"));
  await assert.rejects(sbx.files.read(CANARY), (e) => !String(e).includes("host secret"));
  await assert.rejects(sbx.files.read("/home/user/../../.." + CANARY));
  // The files API reaches every path of the sandbox, resolved inside it:
  // a symlink to the host's file, /proc/*/root and a symlink swapped
  // meanwhile all lead to the sandbox's tree, where the canary is not.
  await sbx.commands.run(`ln -s ${CANARY} /tmp/canary-link && ln -s ${CANARY} /home/user/canary-link`);
  for (const p of ["/tmp/canary-link", "/home/user/canary-link", "/proc/1/root" + CANARY, "/proc/self/root" + CANARY]) {
    await assert.rejects(sbx.files.read(p), (e) => !String(e).includes("host secret"), p);
    if (p.startsWith("/proc")) { // not there, or /proc/1 not the user's to enter
      assert.equal(await sbx.files.exists(p).catch((e) => String(e).includes("host secret")), false, p);
    } else { // a link that leads nowhere: envd's own path, no type
      const info = await sbx.files.getInfo(p);
      assert.equal(info.symlinkTarget, p);
      assert.notEqual(info.type, "file");
    }
  }
  await assert.rejects(sbx.files.write("/tmp/canary-link", "from the sandbox"));
  const swap = await sbx.commands.run(`echo sandbox > /tmp/real; while :; do ln -sfn ${CANARY} /tmp/swap; ln -sfn /tmp/real /tmp/swap; done`, { background: true });
  for (let i = 0; i < 100; i++) {
    const got = await sbx.files.read("/tmp/swap").catch((e) => String(e));
    assert.ok(!got.includes("host secret"), "a swapped symlink read the host's file");
  }
  await swap.kill();
});

test("a fork bomb in a command hits the pids limit; kill ends its whole tree", { timeout: 90_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.write("forkbomb.py", [
    "import os, sys, time",
    "n = 0",
    "try:",
    "    while True:",
    "        if os.fork() == 0:",
    "            time.sleep(600)",
    "            os._exit(0)",
    "        n += 1",
    "except OSError as e:",
    "    print('stopped after', n, 'forks:', e.strerror, flush=True)",
    "time.sleep(600)",
  ].join("\n"));
  let out = "";
  const bomb = await sbx.commands.run("exec python3 forkbomb.py", { background: true, timeoutMs: 0, onStdout: (d) => { out += d; } });
  await eventually(() => assert.match(out, /stopped after \d+ forks: Resource temporarily unavailable/), 30_000);
  // The sandbox is at its pids limit: killing the command's process
  // group takes every fork with it.
  assert.equal(await sbx.commands.kill(bomb.pid), true);
  await eventually(async () => assert.equal((await sbx.commands.run("echo alive")).stdout, "alive\n"), 30_000, 500);
  const n = Number((await sbx.commands.run("ps -e --no-headers | wc -l")).stdout.trim());
  assert.ok(n < 10, `the forks are gone: ${n} processes left`);
});

test("runCode is confined like a command", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, CodeSandbox);
  const e = await sbx.runCode("import os\nopen('/proc/self/status').read().count('Seccomp:\\t2'), os.getuid(), os.access('/usr', os.W_OK)");
  assert.equal(e.error, undefined, e.error?.traceback);
  assert.equal(e.text, "(1, 1000, False)");
});

test("a timeout above the operator's maximum is refused", { timeout: 30_000 }, async () => {
  await assert.rejects(Sandbox.create({ timeoutMs: 400 * 24 * 3600 * 1000 }), /max_lifetime/);
});

test("sandboxed code cannot open the process agent's channel to the daemon", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.write("probe.py", [
    "import glob, os",
    "sockets = opened = 0",
    "for p in glob.glob('/proc/[0-9]*/fd/*'):",
    "    try:",
    "        if not os.readlink(p).startswith('socket:'):",
    "            continue",
    "    except OSError:",
    "        continue",
    "    sockets += 1",
    "    try:",
    "        os.close(os.open(p, os.O_RDWR))",
    "        opened += 1",
    "    except OSError:",
    "        pass",
    "print(sockets, opened)",
  ].join("\n"));
  // The runner and the agent are not dumpable (PR_SET_DUMPABLE 0, issue
  // 35): their fds, the ends of their channels, are not even listed, and
  // no socket can be opened.
  const [sockets, opened] = (await sbx.commands.run("python3 probe.py")).stdout.trim().split(" ").map(Number);
  assert.equal(sockets, 0, "the runner's or the agent's sockets are listed in /proc");
  assert.equal(opened, 0, "a socket of the runner or the agent was opened through /proc");
});
