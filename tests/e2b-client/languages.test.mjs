// runCode in JavaScript, TypeScript and bash (nsbox's guest interpreters
// beside the sandbox's Python), their default contexts, contexts of those
// languages and their cwd, a Python context's cwd, the refusal of a
// language nsbox does not run (and of R and Java on a rootfs without
// them), and R and Java on the polyglot rootfs when it is there.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox } from "@e2b/code-interpreter";
import { SandboxError, TimeoutError } from "e2b";
import { JUPYTER_PORT, POLYGLOT, create, rawSandboxFetch, run } from "./lib.mjs";

test("JavaScript: state, logs, the last value, imports, errors, files shared with Python", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const js = { language: "js" };
  const first = await run(sbx, "let x = 41\nconsole.log('hi')\nconsole.error('oops')", js);
  assert.deepEqual(first.logs.stdout, ["hi\n"]);
  assert.deepEqual(first.logs.stderr, ["oops\n"]);
  assert.equal((await run(sbx, "x + 1", { language: "javascript" })).text, "42");
  assert.equal((await run(sbx, "process.cwd()", js)).text, "/home/user");
  assert.equal((await run(sbx, "await new Promise((r) => setTimeout(() => r('later'), 10))", js)).text, "later");
  const imp = await run(sbx, "\n  import { readFileSync } from 'fs'\n  import * as path from 'path'\n  console.log(typeof readFileSync, path.join('a', 'b'))\n", js);
  assert.deepEqual(imp.logs.stdout, ["function a/b\n"]);
  const err = await sbx.runCode("null.y", js);
  assert.equal(err.error?.name, "TypeError");
  assert.match(err.error.value, /null/);
  assert.equal(typeof err.error.traceback, "string");
  await run(sbx, "require('fs').writeFileSync('from-js.txt', 'js wrote this')", js);
  assert.equal((await run(sbx, "open('from-js.txt').read()")).text, "js wrote this", "one sandbox: Python reads what JavaScript wrote");
  const ts = await run(sbx, "const m: string = 'typed'; m", { language: "ts" });
  assert.equal(ts.text, "typed");
});

test("JavaScript: a cell past its timeout is TimeoutError, and the context lives on", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await run(sbx, "var kept = 'yes'", { language: "js" });
  await assert.rejects(sbx.runCode("while (true) {}", { language: "js", timeoutMs: 1500 }), TimeoutError);
  assert.equal((await run(sbx, "kept", { language: "js" })).text, "yes");
});

test("bash: a stateful session with envs per execution and exit codes as errors", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { envs: { FROM_CREATE: "c" } });
  const sh = { language: "bash" };
  assert.deepEqual((await run(sbx, "pwd; echo $FROM_CREATE", sh)).logs.stdout.join(""), "/home/user\nc\n");
  await run(sbx, "greeting=hello; greet() { echo \"$greeting $1\"; }; cd /tmp", sh);
  assert.equal((await run(sbx, "greet world; pwd", sh)).logs.stdout.join(""), "hello world\n/tmp\n", "variables, functions and cwd stay");
  assert.equal((await run(sbx, "echo $ONE; sh -c 'echo child $ONE'", { ...sh, envs: { ONE: "1" } })).logs.stdout.join(""), "1\nchild 1\n");
  assert.equal((await run(sbx, "echo ${ONE:-unset}", sh)).logs.stdout.join(""), "unset\n", "an execution's envs are its own");
  const e = await sbx.runCode("echo before; ls /no-such-dir", sh);
  assert.deepEqual(e.logs.stdout, ["before\n"]);
  assert.match(e.logs.stderr.join(""), /no-such-dir/);
  assert.equal(e.error?.value, "2", "a failing last command is an error whose value is its exit status");
  assert.equal((await run(sbx, "echo $greeting", sh)).logs.stdout.join(""), "hello\n", "the session lives on after an error");
});

test("default contexts and contexts of other languages, with their cwd", { timeout: 180_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const langs = (await sbx.listCodeContexts()).map((c) => c.language);
  assert.ok(langs.includes("python") && langs.includes("javascript"), `default contexts: ${langs}`);

  const jsctx = await sbx.createCodeContext({ language: "js", cwd: "/tmp" });
  assert.equal(jsctx.language, "javascript");
  assert.equal(jsctx.cwd, "/tmp");
  assert.equal((await run(sbx, "process.cwd()", { context: jsctx })).text, "/tmp");
  await run(sbx, "var mine = 1", { context: jsctx });
  const other = await sbx.runCode("typeof mine", { language: "js" });
  assert.equal(other.text, "undefined", "the default JavaScript context does not see another context's variables");
  const listed = await sbx.listCodeContexts();
  assert.deepEqual(listed.find((c) => c.id === jsctx.id), { id: jsctx.id, language: "javascript", cwd: "/tmp" });
  await sbx.restartCodeContext(jsctx);
  assert.equal((await run(sbx, "typeof mine", { context: jsctx })).text, "undefined", "a restart clears it");
  assert.equal((await run(sbx, "process.cwd()", { context: jsctx })).text, "/tmp", "and it starts again in its cwd");
  await sbx.removeCodeContext(jsctx.id);
  await assert.rejects(sbx.runCode("1", { context: jsctx }), SandboxError);

  const bashctx = await sbx.createCodeContext({ language: "bash", cwd: "/usr" });
  assert.equal((await run(sbx, "pwd", { context: bashctx })).logs.stdout.join(""), "/usr\n");
  await assert.rejects(sbx.createCodeContext({ language: "bash", cwd: "/no-such-dir" }), SandboxError, "a cwd that is no directory");
  await run(sbx, "1", { language: "ts" });
  const after = (await sbx.listCodeContexts()).map((c) => c.language);
  assert.ok(after.includes("typescript"), `a default context is listed once it ran: ${after}`);
});

test("a Python context's cwd", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const tmp = await sbx.createCodeContext({ language: "python", cwd: "/tmp" });
  assert.equal(tmp.cwd, "/tmp");
  const cwd = "import os\nprint(os.getcwd(), end='')";
  assert.equal((await run(sbx, cwd, { context: tmp })).logs.stdout.join(""), "/tmp");
  assert.equal((await run(sbx, cwd)).logs.stdout.join(""), "/home/user", "the default context keeps the home");
  await run(sbx, "os.chdir('/usr')", { context: tmp });
  await run(sbx, "x = 1");
  assert.equal((await run(sbx, cwd, { context: tmp })).logs.stdout.join(""), "/usr", "a context keeps where its own cell moved it");
  await run(sbx, "open('where.txt', 'w').write('tmp')", { context: await sbx.createCodeContext({ cwd: "/tmp" }) });
  assert.equal((await run(sbx, "open('/tmp/where.txt').read()")).text, "tmp", "relative paths are the context's cwd's");
  // The sandbox's user (uid 1000) cannot enter /root: the context is
  // made and listed, and runs where the interpreter was, as E2B's %cd
  // does when it fails.
  const root = await sbx.createCodeContext({ language: "python", cwd: "/root" });
  assert.equal((await sbx.listCodeContexts()).find((c) => c.id === root.id)?.cwd, "/root");
  assert.equal((await run(sbx, "1 + 1", { context: root })).text, "2");
});

test("a language nsbox does not run is refused, naming those it does; R and Java name the rootfs profile that has them", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const execute = async (language) => {
    const res = await rawSandboxFetch("/execute", {
      sandboxId: sbx.sandboxId,
      port: JUPYTER_PORT,
      method: "POST",
      body: JSON.stringify({ code: "1", language }),
      headers: { "X-Access-Token": sbx.envdAccessToken, "Content-Type": "application/json" },
    });
    return { status: res.status, body: await res.text() };
  };
  for (const language of ["cobol", "r", "java"]) {
    await assert.rejects(sbx.runCode("1", { language }), /400/);
    await assert.rejects(sbx.createCodeContext({ language }), /400/);
    const { status, body } = await execute(language);
    assert.equal(status, 400, body);
    if (language === "cobol") {
      assert.match(body, /runs python, bash, javascript, typescript, r, java/);
    } else {
      assert.match(body, /needs (R|Java).* in the rootfs.*use a rootfs of the polyglot profile/);
    }
  }
  await assert.rejects(sbx.runCode("1", { language: "js", context: await sbx.createCodeContext() }), "a context and a language at once");
});

test("after a pause, JavaScript, bash and Python contexts run again, JavaScript's and bash's empty", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const jsctx = await sbx.createCodeContext({ language: "js", cwd: "/tmp" });
  const pyctx = await sbx.createCodeContext({ cwd: "/tmp" });
  await run(sbx, "var a = 1", { context: jsctx });
  await run(sbx, "b=2", { language: "bash" });
  await run(sbx, "import os\nos.getcwd()", { context: pyctx });
  assert.equal(await sbx.pause(), true);
  const same = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 90_000 });
  assert.equal((await run(same, "typeof a", { context: jsctx })).text, "undefined", "a Node runner is not carried");
  assert.equal((await run(same, "process.cwd()", { context: jsctx })).text, "/tmp", "the context starts again in its cwd");
  assert.equal((await run(same, "echo ${b:-gone}", { language: "bash" })).logs.stdout.join(""), "gone\n");
  assert.equal((await run(same, "import os\nos.getcwd()", { context: pyctx })).text, "/tmp");
  assert.equal((await run(same, "import os\nos.getcwd()")).text, "/home/user");
});

test("R and Java on the polyglot rootfs: state, the last value, envs, errors, cwd", { timeout: 300_000, skip: POLYGLOT ? false : "no polyglot rootfs (make rootfs-polyglot)" }, async (t) => {
  const sbx = await create(t, Sandbox, { envs: { TEST_ENV_VAR: "supertest" } }, POLYGLOT);
  assert.equal((await run(sbx, "getwd()", { language: "r" })).text, '[1] "/home/user"');
  assert.equal((await run(sbx, "x <- 41", { language: "r" })).text, undefined);
  const r = await run(sbx, "cat('from r\\n')\nx + 1", { language: "r" });
  assert.equal(r.text, "[1] 42");
  assert.deepEqual(r.logs.stdout, ["from r\n"]);
  assert.equal((await run(sbx, 'Sys.getenv("TEST_ENV_VAR")', { language: "r" })).text, '[1] "supertest"');
  assert.equal((await run(sbx, 'Sys.getenv("FOO")', { language: "r", envs: { FOO: "bar" } })).text, '[1] "bar"');
  const rerr = await sbx.runCode("stop('boom')", { language: "r" });
  assert.equal(rerr.error?.name, "Error");
  assert.equal(rerr.error?.value, "boom");

  assert.equal((await run(sbx, 'System.getProperty("user.dir")', { language: "java" })).text, "/home/user");
  await run(sbx, "int y = 6;", { language: "java" });
  assert.equal((await run(sbx, "y * 7", { language: "java" })).text, "42");
  assert.equal((await run(sbx, 'System.getProperty("TEST_ENV_VAR")', { language: "java" })).text, "supertest");
  assert.equal((await run(sbx, 'System.getProperty("FOO")', { language: "java", envs: { FOO: "bar" } })).text, "bar");
  assert.equal((await run(sbx, 'System.getProperty("FOO", "default")', { language: "java" })).text, "default");
  const jerr = await sbx.runCode('Integer.parseInt("x")', { language: "java" });
  assert.equal(jerr.error?.name, "java.lang.NumberFormatException");
});
