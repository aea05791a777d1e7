// Who may do what: the API key on the control plane, the per-sandbox
// access token on the sandbox routes, and one sandbox unable to see or
// reach another's files.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { Sandbox as CodeSandbox } from "@e2b/code-interpreter";
import { AuthenticationError, CommandExitError, Sandbox } from "e2b";
import { API_URL, JUPYTER_PORT, assertRefused, create, rawSandboxFetch } from "./lib.mjs";

const WRONG_KEY = `e2b_${randomBytes(20).toString("hex")}`;

test("a wrong API key is refused", { timeout: 60_000 }, async (t) => {
  await assert.rejects(async () => {
    const sbx = await Sandbox.create({ apiKey: WRONG_KEY, timeoutMs: 10_000 });
    t.after(() => sbx.kill().catch(() => {}));
  }, AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey: WRONG_KEY }).nextItems(), AuthenticationError);

  // It cannot touch a sandbox the right key made.
  const sbx = await create(t, Sandbox);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: WRONG_KEY }), AuthenticationError);
  await assert.rejects(Sandbox.kill(sbx.sandboxId, { apiKey: WRONG_KEY }), AuthenticationError);
  await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 1_000, { apiKey: WRONG_KEY }), AuthenticationError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: WRONG_KEY }), AuthenticationError);
  assert.equal(await sbx.isRunning(), true, "the sandbox is untouched");
});

test("a request without an API key is 401", { timeout: 30_000 }, async () => {
  for (const [method, path] of [["GET", "/v2/sandboxes"], ["POST", "/v2/sandboxes"], ["GET", "/sandboxes/x"]]) {
    const res = await fetch(new URL(path, API_URL), {
      method,
      headers: { "Content-Type": "application/json" },
      body: method === "POST" ? JSON.stringify({ templateID: "base" }) : undefined,
    });
    await res.text();
    assert.equal(res.status, 401, `${method} ${path}`);
  }
});

test("a sandbox cannot read another's files", { timeout: 60_000 }, async (t) => {
  const a = await create(t, Sandbox);
  const b = await create(t, Sandbox);
  await a.files.write("/home/user/secret.txt", "A's secret");
  await a.commands.run("echo A > /tmp/a-tmp.txt");

  assert.equal(await b.files.exists("/home/user/secret.txt"), false);
  await assert.rejects(b.files.read("/home/user/secret.txt"));
  await assert.rejects(b.commands.run("cat /home/user/secret.txt"), CommandExitError);
  await assert.rejects(b.commands.run("cat /tmp/a-tmp.txt"), CommandExitError);
  await assert.rejects(b.commands.run("cat /workspace/secret.txt"), CommandExitError);

  // Each writes its own file at the same path.
  await b.files.write("/home/user/secret.txt", "B's own");
  assert.equal(await a.files.read("/home/user/secret.txt"), "A's secret");
  assert.equal(await b.files.read("/home/user/secret.txt"), "B's own");

  // B's processes are not A's.
  const bg = await a.commands.run("sleep 1000", { background: true });
  assert.ok(!(await b.commands.list()).some((p) => p.pid === bg.pid && p.args.includes("sleep 1000")), "B lists A's process");
});

test("a sandbox's token does not open another sandbox", { timeout: 60_000 }, async (t) => {
  const a = await create(t, CodeSandbox);
  const b = await create(t, CodeSandbox);
  await a.files.write("/home/user/secret.txt", "A's secret");
  assert.equal(typeof a.envdAccessToken, "string", "create answers an envdAccessToken");
  assert.ok(a.envdAccessToken.length >= 16);
  assert.notEqual(a.envdAccessToken, b.envdAccessToken);

  const read = "/files?path=%2Fhome%2Fuser%2Fsecret.txt";
  const bToken = { "X-Access-Token": b.envdAccessToken };

  // The control: A's own token reads it.
  const ok = await rawSandboxFetch(read, { sandboxId: a.sandboxId, headers: { "X-Access-Token": a.envdAccessToken } });
  assert.equal(ok.status, 200);
  assert.equal(await ok.text(), "A's secret");

  await assertRefused(await rawSandboxFetch(read, { sandboxId: a.sandboxId, headers: bToken }), "GET /files with B's token on A");
  await assertRefused(await rawSandboxFetch(read, { sandboxId: a.sandboxId }), "GET /files with no token on A");
  await assertRefused(await rawSandboxFetch(read, { sandboxId: a.sandboxId, headers: { "X-Access-Token": "nsbox-made-up-token" } }), "GET /files with a made-up token");

  const upload = new FormData();
  upload.append("file", new Blob(["B was here"]), "/home/user/secret.txt");
  await assertRefused(await rawSandboxFetch("/files?path=%2Fhome%2Fuser%2Fsecret.txt", { sandboxId: a.sandboxId, method: "POST", body: upload, headers: bToken }), "POST /files with B's token on A");

  // A Connect server stream may refuse in the stream's end message (HTTP
  // 200) instead of with a status: accept either, never A's output.
  const msg = Buffer.from(JSON.stringify({ process: { cmd: "/bin/bash", args: ["-l", "-c", "cat /home/user/secret.txt"] } }));
  const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
  envelope.writeUInt32BE(msg.length, 1);
  const res = await rawSandboxFetch("/process.Process/Start", {
    sandboxId: a.sandboxId,
    method: "POST",
    body: envelope,
    headers: { ...bToken, "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1" },
  });
  if (res.status === 200) {
    const body = Buffer.from(await res.arrayBuffer()).toString("latin1");
    assert.ok(!body.includes(Buffer.from("A's secret").toString("base64")), "B's token ran a command in A");
    assert.match(body, /"code":"(unauthenticated|permission_denied|not_found)"/, `process.Process/Start with B's token on A: ${body.slice(0, 300)}`);
  } else {
    await assertRefused(res, "process.Process/Start with B's token on A");
  }
  await assertRefused(await rawSandboxFetch("/filesystem.Filesystem/ListDir", {
    sandboxId: a.sandboxId,
    method: "POST",
    body: JSON.stringify({ path: "/home/user", depth: 1 }),
    headers: { ...bToken, "Content-Type": "application/json", "Connect-Protocol-Version": "1" },
  }), "filesystem.Filesystem/ListDir with B's token on A");
  await assertRefused(await rawSandboxFetch("/execute", {
    sandboxId: a.sandboxId,
    port: JUPYTER_PORT,
    method: "POST",
    body: JSON.stringify({ code: 'open("/home/user/secret.txt").read()' }),
    headers: { ...bToken, "Content-Type": "application/json" },
  }), "/execute with B's token on A");
  await assertRefused(await rawSandboxFetch("/execute", {
    sandboxId: a.sandboxId,
    port: JUPYTER_PORT,
    method: "POST",
    body: JSON.stringify({ code: "1" }),
    headers: { "Content-Type": "application/json" },
  }), "/execute with no token on A");
  await assertRefused(await rawSandboxFetch("/contexts", { sandboxId: a.sandboxId, port: JUPYTER_PORT }), "GET /contexts with no token on A");

  assert.equal(await a.files.read("/home/user/secret.txt"), "A's secret", "A's file is untouched");
});
