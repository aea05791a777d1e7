// sandbox.files.watchDir through envd's WatchDir stream: changes made by
// commands and by the files API come in order, named under the watched
// directory; recursive reaches directories made later; 10,000 files made
// in a row come as 10,000 events; a host directory cannot be watched;
// a stopped watch lets the sandbox's others run (the agent holds 16).
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FilesystemEventType, InvalidArgumentError, NotFoundError, Sandbox } from "e2b";
import { create } from "./lib.mjs";

const names = { [FilesystemEventType.CREATE]: "create", [FilesystemEventType.WRITE]: "write",
  [FilesystemEventType.REMOVE]: "remove", [FilesystemEventType.RENAME]: "rename", [FilesystemEventType.CHMOD]: "chmod" };

// watch starts watching dir and returns the handle and a function that
// resolves with the events seen up to one matching last (included).
async function watch(sbx, dir, opts = {}) {
  const seen = [];
  let waiter = null;
  const handle = await sbx.files.watchDir(dir, (e) => {
    seen.push(`${names[e.type]} ${e.name}`);
    if (waiter && seen.includes(waiter.last)) waiter.resolve(seen.slice());
  }, { timeoutMs: 0, ...opts });
  const until = (last) => new Promise((resolve) => {
    if (seen.includes(last)) return resolve(seen.slice());
    waiter = { last, resolve };
  });
  return { handle, until };
}

test("watchDir: changes in order, from commands and the files API", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.makeDir("/home/user/w/sub");
  const { handle, until } = await watch(sbx, "w");
  await sbx.commands.run("cd /home/user/w && : > sub/ignored && : > a && echo x >> a && mv a b && rm b");
  await sbx.files.write("w/c.txt", "hello");
  await sbx.files.remove("w/c.txt");
  const got = await until("remove c.txt");
  // The files API writes a workspace file from the host: made, given to
  // the sandbox's user (chmod: its owner changed), written.
  assert.deepEqual(got, ["create a", "write a", "rename a", "create b", "remove b",
    "create c.txt", "chmod c.txt", "write c.txt", "remove c.txt"]);
  await handle.stop();
});

test("watchDir: recursive, a directory made after the watch started", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.makeDir("/tmp/r");
  const { handle, until } = await watch(sbx, "/tmp/r", { recursive: true });
  await sbx.files.makeDir("/tmp/r/d");
  await until("create d");
  await sbx.files.write("/tmp/r/d/f", "x");
  await sbx.files.makeDir("/tmp/r/d/end");
  // Outside the workspace the agent writes, as the sandbox's user: the
  // file made, truncated (a write), written.
  assert.deepEqual((await until("create d/end")).slice(1), ["create d/f", "write d/f", "write d/f", "create d/end"]);
  await handle.stop();
});

test("watchDir: 10,000 files, none lost", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.makeDir("many");
  const { handle, until } = await watch(sbx, "many");
  await sbx.commands.run("cd /home/user/many && i=0; while [ $i -lt 10000 ]; do : > f$i; i=$((i+1)); done; : > end");
  const got = await until("create end");
  assert.equal(got.length, 10001);
  got.slice(0, 10000).forEach((e, i) => assert.equal(e, `create f${i}`));
  await handle.stop();
});

test("watchDir: a host directory, a missing one and a file are refused", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const host = mkdtempSync(join(tmpdir(), "nsbox-watch-")); // the host's, not the sandbox's /tmp
  await assert.rejects(sbx.files.watchDir(host, () => {}), NotFoundError);
  await assert.rejects(sbx.files.watchDir("/proc/1/root" + host, () => {}), (e) => !(e instanceof assert.AssertionError));
  await assert.rejects(sbx.files.watchDir("missing", () => {}), NotFoundError);
  await sbx.files.write("file.txt", "x");
  await assert.rejects(sbx.files.watchDir("file.txt", () => {}), InvalidArgumentError);
});

test("watchDir: stopped watches are gone from the sandbox", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  // The agent holds at most 16 watches: 40 in a row, each stopped, only
  // fit if each stop frees its own (a stop reaches the sandbox a moment
  // later, so a refusal is retried).
  for (let i = 0; i < 40; i++) {
    for (;;) {
      try {
        const h = await sbx.files.watchDir("/tmp", () => {});
        await h.stop();
        break;
      } catch (e) {
        if (!/too many|exhausted|more than 16/i.test(String(e))) throw e;
      }
    }
  }
  const { handle, until } = await watch(sbx, "/tmp");
  await sbx.files.write("/tmp/last", "x");
  await until("write last");
  await handle.stop();
});
