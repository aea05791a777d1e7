// sandbox.git (the SDK runs git commands in the sandbox) on the
// data-science rootfs, which has git and curl (rootfs/build/profile.go):
// a repository made, committed, pushed to a git daemon on the sandbox's
// loopback, cloned and pulled back; the global config the SDK writes in
// $HOME.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox } from "e2b";
import { create, DATASCI } from "./lib.mjs";

// gitSandbox makes a data-science sandbox, or skips the test, saying why,
// when its rootfs predates git in the profile.
async function gitSandbox(t) {
  const sbx = await create(t, Sandbox, {}, DATASCI);
  const found = await sbx.commands.run("command -v git curl || true");
  if (found.stdout.trim().split("\n").length !== 2) {
    t.skip(`the rootfs ${DATASCI} has no git or curl (${JSON.stringify(found.stdout)}): rebuild it, nsbox rootfs build --profile datasci --force`);
    return null;
  }
  return sbx;
}

test("git: init, commit, push to a git daemon on loopback, clone, pull", { timeout: 120_000 }, async (t) => {
  const sbx = await gitSandbox(t);
  if (!sbx) return;
  const base = "/home/user/g";
  const repo = `${base}/repo`;
  const author = { authorName: "Nsbox Test", authorEmail: "test@nsbox.invalid" };
  await sbx.git.init(repo, { initialBranch: "main" });
  await sbx.files.write(`${repo}/README.md`, "one\n");
  await sbx.git.add(repo);
  await sbx.git.commit(repo, "first", author);
  assert.equal((await sbx.commands.run(`git -C ${repo} log -1 --format=%an/%s`)).stdout.trim(), "Nsbox Test/first");

  await sbx.commands.run(`git init -q --bare --initial-branch=main ${base}/remote.git`);
  const daemon = await sbx.commands.run(
    `exec git daemon --reuseaddr --base-path=${base} --export-all --enable=receive-pack --listen=127.0.0.1 --port=9418`,
    { background: true },
  );
  t.after(() => daemon.kill().catch(() => {}));
  const url = "git://127.0.0.1:9418/remote.git";
  await sbx.git.remoteAdd(repo, "origin", url);
  // The daemon is listening once a ls-remote answers (bounded by the
  // test's timeout, never a fixed sleep).
  await sbx.commands.run(`until git ls-remote ${url} >/dev/null 2>&1; do sleep 0.1; done`, { timeoutMs: 60_000 });
  await sbx.git.push(repo, { remote: "origin", branch: "main" });
  assert.equal((await sbx.commands.run(`git --git-dir=${base}/remote.git log -1 --format=%s`)).stdout.trim(), "first");

  await sbx.git.clone(url, { path: `${base}/clone` });
  assert.equal(await sbx.files.read(`${base}/clone/README.md`), "one\n");
  await sbx.files.write(`${repo}/README.md`, "one\ntwo\n");
  await sbx.git.add(repo);
  await sbx.git.commit(repo, "second", author);
  await sbx.git.push(repo);
  await sbx.git.pull(`${base}/clone`);
  assert.equal(await sbx.files.read(`${base}/clone/README.md`), "one\ntwo\n");
  const status = await sbx.git.status(`${base}/clone`);
  assert.equal(status.currentBranch, "main");
});

test("git: configureUser writes the global config in $HOME", { timeout: 60_000 }, async (t) => {
  const sbx = await gitSandbox(t);
  if (!sbx) return;
  await sbx.git.configureUser("Nsbox Test", "test@nsbox.invalid");
  assert.equal((await sbx.commands.run("git config --global --get user.email")).stdout.trim(), "test@nsbox.invalid");
  assert.equal((await sbx.commands.run("cat $HOME/.gitconfig")).exitCode, 0);
  assert.equal((await sbx.commands.run("curl --version")).stdout.split(" ")[0], "curl");
});
