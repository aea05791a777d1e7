// sandbox.files through envd's REST /files and the filesystem.Filesystem
// service: write, read (text and bytes), list, exists, getInfo, makeDir,
// rename, remove, a 10 MiB upload, one filesystem shared with
// commands.run and runCode, and no way out of the workspace.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { NotFoundError, Sandbox } from "e2b";
import { create, sha256 } from "./lib.mjs";

test("write and read text and bytes", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const text = "hello nsbox\nsecond line: é ü\n";
  const info = await sbx.files.write("/home/user/hello.txt", text);
  assert.equal(info.path, "/home/user/hello.txt");
  assert.equal(info.name, "hello.txt");
  assert.equal(await sbx.files.read("/home/user/hello.txt"), text);
  const bytes = await sbx.files.read("/home/user/hello.txt", { format: "bytes" });
  assert.ok(bytes instanceof Uint8Array);
  assert.deepEqual(Buffer.from(bytes), Buffer.from(text));

  // A relative path is relative to the user's home, as in E2B.
  await sbx.files.write("relative.txt", "rel");
  assert.equal(await sbx.files.read("/home/user/relative.txt"), "rel");

  // Writing creates the parent directories; overwriting replaces.
  await sbx.files.write("/home/user/a/b/c.txt", "first");
  await sbx.files.write("/home/user/a/b/c.txt", "2nd");
  assert.equal(await sbx.files.read("/home/user/a/b/c.txt"), "2nd");

  // An empty file reads as "".
  await sbx.files.write("/home/user/empty.txt", "");
  assert.equal(await sbx.files.read("/home/user/empty.txt"), "");

  await assert.rejects(sbx.files.read("/home/user/missing.txt"), NotFoundError);
});

test("write several files at once", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const infos = await sbx.files.write([
    { path: "/home/user/multi/one.txt", data: "1" },
    { path: "/home/user/multi/two.txt", data: new TextEncoder().encode("2") },
  ]);
  assert.deepEqual(infos.map((i) => i.path).sort(), ["/home/user/multi/one.txt", "/home/user/multi/two.txt"]);
  assert.equal(await sbx.files.read("/home/user/multi/one.txt"), "1");
  assert.equal(await sbx.files.read("/home/user/multi/two.txt"), "2");
});

test("makeDir, list, exists, getInfo, rename, remove", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  assert.equal(await sbx.files.makeDir("/home/user/d"), true);
  assert.equal(await sbx.files.makeDir("/home/user/d"), false, "makeDir of an existing dir");
  assert.equal(await sbx.files.makeDir("/home/user/d/x/y"), true, "makeDir makes the parents");
  await sbx.files.write("/home/user/d/a.txt", "aaa");
  await sbx.files.write("/home/user/d/b.txt", "bb");
  await sbx.files.write("/home/user/d/sub/c.txt", "c");

  const top = await sbx.files.list("/home/user/d");
  assert.deepEqual(top.map((e) => `${e.name}:${e.type}`).sort(), ["a.txt:file", "b.txt:file", "sub:dir", "x:dir"]);
  const a = top.find((e) => e.name === "a.txt");
  assert.equal(a.path, "/home/user/d/a.txt");
  assert.equal(a.size, 3);
  const deep = await sbx.files.list("/home/user/d", { depth: 2 });
  assert.ok(deep.some((e) => e.path === "/home/user/d/sub/c.txt"), `depth 2 lists sub/c.txt: ${deep.map((e) => e.path)}`);
  assert.ok(deep.some((e) => e.path === "/home/user/d/x/y" && e.type === "dir"));
  assert.ok(!deep.some((e) => e.path.split("/").length > 6), "no deeper than 2");

  assert.equal(await sbx.files.exists("/home/user/d/a.txt"), true);
  assert.equal(await sbx.files.exists("/home/user/d"), true);
  assert.equal(await sbx.files.exists("/home/user/d/nope"), false);

  const st = await sbx.files.getInfo("/home/user/d/b.txt");
  assert.equal(st.name, "b.txt");
  assert.equal(st.type, "file");
  assert.equal(st.size, 2);
  assert.ok(st.modifiedTime instanceof Date);
  assert.equal((await sbx.files.getInfo("/home/user/d")).type, "dir");

  const moved = await sbx.files.rename("/home/user/d/a.txt", "/home/user/d/moved.txt");
  assert.equal(moved.path, "/home/user/d/moved.txt");
  assert.equal(await sbx.files.exists("/home/user/d/a.txt"), false);
  assert.equal(await sbx.files.read("/home/user/d/moved.txt"), "aaa");

  await sbx.files.remove("/home/user/d/moved.txt");
  assert.equal(await sbx.files.exists("/home/user/d/moved.txt"), false);
  await sbx.files.remove("/home/user/d");
  assert.equal(await sbx.files.exists("/home/user/d"), false, "remove of a directory removes its tree");
  await assert.rejects(sbx.files.list("/home/user/d"), NotFoundError);
});

test("entry info as envd's: mode bits, a directory's size, a symlink's target", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.makeDir("/home/user/d");
  await sbx.files.write("/home/user/d/a.txt", "test");
  await sbx.commands.run("chmod 755 /home/user/d && chmod 644 /home/user/d/a.txt && ln -s a.txt /home/user/d/link && ln -s nowhere /home/user/d/broken");

  const dir = await sbx.files.getInfo("/home/user/d");
  assert.equal(dir.type, "dir");
  assert.equal(dir.mode, 0o755, "the permission bits alone, no Go type bits");
  assert.equal(dir.permissions, "drwxr-xr-x");
  assert.ok(dir.size > 0, `a directory's size is lstat's: ${dir.size}`);
  assert.equal(dir.symlinkTarget, undefined);

  const link = await sbx.files.getInfo("/home/user/d/link");
  assert.equal(link.symlinkTarget, "/home/user/d/a.txt", "resolved to an absolute path, as envd's");
  assert.equal(link.type, "file", "the type of where it leads");
  assert.equal(link.mode, 0o644);
  assert.equal(link.permissions, "Lrwxrwxrwx");
  const broken = await sbx.files.getInfo("/home/user/d/broken");
  assert.equal(broken.symlinkTarget, "/home/user/d/broken", "one that does not resolve: its own path, as envd's");
  assert.equal(broken.mode, 0);

  const listed = Object.fromEntries((await sbx.files.list("/home/user/d")).map((e) => [e.name, e]));
  assert.equal(listed["a.txt"].mode, 0o644);
  assert.equal(listed["a.txt"].symlinkTarget, undefined);
  assert.equal(listed.link.symlinkTarget, "/home/user/d/a.txt");
});

test("a 10 MiB upload reads back equal", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const data = new Uint8Array(randomBytes(10 << 20));
  const want = sha256(data);
  await sbx.files.write("/home/user/big.bin", data);
  assert.equal((await sbx.files.getInfo("/home/user/big.bin")).size, 10 << 20);
  const got = await sbx.files.read("/home/user/big.bin", { format: "bytes" });
  assert.equal(got.length, data.length);
  assert.equal(sha256(got), want);
  const r = await sbx.commands.run("sha256sum /home/user/big.bin");
  assert.equal(r.stdout.split(" ")[0], want, "the sandbox sees the same bytes");
});

test("files.write and commands.run share one filesystem", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.write("/home/user/shared.txt", "from files.write");
  assert.equal((await sbx.commands.run("cat /home/user/shared.txt")).stdout, "from files.write");
  assert.equal((await sbx.commands.run("cat /workspace/shared.txt")).stdout, "from files.write", "the workspace is /home/user and /workspace");
  await sbx.commands.run("echo from commands > /home/user/from-cmd.txt");
  assert.equal(await sbx.files.read("/home/user/from-cmd.txt"), "from commands\n");
});

test("files.write and runCode share one filesystem", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, CodeSandbox);
  await sbx.files.write("/home/user/for-code.txt", "from files.write");
  const e = await sbx.runCode('open("/home/user/for-code.txt").read()');
  assert.equal(e.error, undefined, e.error && e.error.traceback);
  assert.equal(e.text, "from files.write");
  const w = await sbx.runCode('open("/home/user/from-code.txt", "w").write("from runCode")');
  assert.equal(w.error, undefined, w.error && w.error.traceback);
  assert.equal(await sbx.files.read("/home/user/from-code.txt"), "from runCode");
});

test("file operations reach the sandbox's tree as its user", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  // /tmp (the sandbox's tmpfs): written, read, listed, renamed, removed.
  const w = await sbx.files.write("/tmp/e2b/a/one.txt", "in tmp");
  assert.equal(w.path, "/tmp/e2b/a/one.txt");
  assert.equal((await sbx.commands.run("cat /tmp/e2b/a/one.txt")).stdout, "in tmp");
  assert.equal(await sbx.files.read("/tmp/e2b/a/one.txt"), "in tmp");
  assert.equal(await sbx.files.exists("/tmp/e2b/a/one.txt"), true);
  assert.equal((await sbx.files.getInfo("/tmp/e2b/a")).type, "dir");
  assert.deepEqual((await sbx.files.list("/tmp/e2b", { depth: 2 })).map((e) => e.path).sort(), ["/tmp/e2b/a", "/tmp/e2b/a/one.txt"]);
  assert.equal(await sbx.files.makeDir("/dev/shm/e2b"), true);
  await sbx.files.rename("/tmp/e2b/a/one.txt", "/tmp/e2b/two.txt");
  assert.equal(await sbx.files.read("/tmp/e2b/two.txt"), "in tmp");
  await sbx.files.remove("/tmp/e2b");
  assert.equal(await sbx.files.exists("/tmp/e2b"), false);

  // The read-only rootfs reads, as the sandbox's user, and refuses a
  // write (400: read-only file system, and where writes go).
  const passwd = (await sbx.commands.run("cat /etc/passwd")).stdout;
  assert.equal(await sbx.files.read("/etc/passwd"), passwd);
  await assert.rejects(sbx.files.write("/etc/nsbox-e2b", "x"), /read-only file system/);
  await assert.rejects(sbx.files.read("/home/user/../../etc/shadow"), "root's file, unreadable by the user");

  // Symlinks lead where they lead in the sandbox, as envd follows them.
  await sbx.commands.run("ln -s /etc /home/user/etc-link && ln -s /etc/passwd /home/user/passwd-link");
  assert.equal(await sbx.files.read("/home/user/etc-link/passwd"), passwd);
  assert.equal(await sbx.files.read("/home/user/passwd-link"), passwd);
  assert.ok((await sbx.files.list("/home/user/etc-link")).some((e) => e.path === "/home/user/etc-link/passwd"));
  await assert.rejects(sbx.files.write("/home/user/etc-link/nsbox-e2b", "x"), /read-only file system/);
  await assert.rejects(sbx.files.rename("/home/user/etc-link/hostname", "/home/user/stolen"));
  assert.equal((await sbx.commands.run("test -e /etc/nsbox-e2b; echo $?")).stdout, "1\n");

  // A FIFO or a device is refused, never waited on.
  await sbx.commands.run("mkfifo /tmp/fifo");
  await assert.rejects(sbx.files.read("/tmp/fifo"), /not a regular file/);
  await assert.rejects(sbx.files.read("/dev/zero"), /not a regular file/);

  // Root's writes outside the workspace are refused, saying why.
  await assert.rejects(sbx.files.write("/tmp/as-root.txt", "x", { user: "root" }), /not root/);
});

test("signed download and upload URLs work with no other credential", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.files.write("/home/user/shared.txt", "signed content");
  const down = await sbx.downloadUrl("/home/user/shared.txt", { useSignatureExpiration: 60 });
  const res = await fetch(down); // a plain URL: no token, no routing headers
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(await res.text(), "signed content");

  // The signature binds the path and the operation.
  const other = new URL(down);
  other.searchParams.set("path", "/home/user/other.txt");
  assert.notEqual((await fetch(other)).status, 200);
  const tampered = new URL(down);
  tampered.searchParams.set("signature", "v1_" + "A".repeat(43));
  assert.notEqual((await fetch(tampered)).status, 200);

  const up = await sbx.uploadUrl("/home/user/uploaded.txt");
  const form = new FormData();
  form.append("file", new Blob(["from a signed URL"]), "/home/user/uploaded.txt");
  const put = await fetch(up, { method: "POST", body: form });
  assert.equal(put.status, 200, await put.clone().text());
  assert.equal(await sbx.files.read("/home/user/uploaded.txt"), "from a signed URL");
  // A read signature does not write.
  const form2 = new FormData();
  form2.append("file", new Blob(["no"]), "/home/user/shared.txt");
  assert.notEqual((await fetch(down, { method: "POST", body: form2 })).status, 200);
  assert.equal(await sbx.files.read("/home/user/shared.txt"), "signed content");

  // One past its expiration is envd's 401, which the SDK's users see.
  const expired = await sbx.downloadUrl("/home/user/shared.txt", { useSignatureExpiration: -10_000 });
  const gone = await fetch(expired);
  assert.equal(gone.status, 401);
  assert.deepEqual(await gone.json(), { code: 401, message: "signature is already expired" });
});
