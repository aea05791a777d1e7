// @e2b/code-interpreter's runCode (POST /execute, JSON lines) and code
// contexts (/contexts): state across calls, the main result, logs and
// callbacks, a figure as png, an exception with its traceback, a cell
// timeout after which the context lives on, separate contexts, restart
// and remove.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Sandbox } from "@e2b/code-interpreter";
import { NotFoundError, SandboxError, TimeoutError } from "e2b";
import { DATASCI, PNG_MAGIC, create, run } from "./lib.mjs";

test("state across calls and the main result", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const first = await run(sbx, "x = 1");
  assert.deepEqual(first.results, [], "a statement has no result");
  assert.equal(first.text, undefined);
  const e = await run(sbx, "x + 1");
  assert.equal(e.text, "2");
  assert.equal(e.results.length, 1);
  assert.equal(e.results[0].text, "2");
  assert.equal(e.results[0].isMainResult, true);
  assert.equal(typeof e.executionCount, "number");
  assert.ok(e.executionCount > first.executionCount, `execution count ${first.executionCount} then ${e.executionCount}`);
  assert.equal((await run(sbx, "'a' * 3")).text, "aaa", "a str's text is the str, as E2B's (its repr less the quotes)");
});

test("stdout and stderr as logs and callbacks", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const out = [];
  const err = [];
  const e = await run(sbx, 'import sys\nprint("out1")\nprint("err1", file=sys.stderr)\nprint("out2")\n7 * 6', {
    onStdout: (m) => out.push(m.line),
    onStderr: (m) => err.push(m.line),
  });
  assert.equal(e.logs.stdout.join(""), "out1\nout2\n");
  assert.equal(e.logs.stderr.join(""), "err1\n");
  assert.equal(out.join(""), "out1\nout2\n");
  assert.equal(err.join(""), "err1\n");
  assert.equal(e.text, "42");
});

test("a matplotlib figure is a png result", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox, {}, DATASCI);
  const results = [];
  const e = await run(sbx, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('nsbox')\nplt.show()", {
    onResult: (r) => results.push(r),
  });
  const png = e.results.find((r) => r.png);
  assert.ok(png, `no png result among ${JSON.stringify(e.results.map((r) => r.formats()))}`);
  assert.ok(png.formats().includes("png"));
  const bytes = Buffer.from(png.png, "base64");
  assert.ok(bytes.subarray(0, 8).equals(PNG_MAGIC), "the png decodes to a PNG");
  assert.ok(bytes.length > 1000, `a ${bytes.length}-byte PNG`);
  assert.ok(results.some((r) => r.png), "onResult sees the figure");
});

test("a figure's chart, a DataFrame's data, a PIL image shown", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox, {}, DATASCI);
  const bars = await run(sbx, "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [5, 7], label='n')\nplt.title('Counts')\nplt.ylabel('Count (pcs)')\nplt.show()");
  const chart = bars.results[0].chart;
  assert.ok(chart, `no chart: ${JSON.stringify(bars.results.map((r) => r.formats()))}`);
  assert.equal(chart.type, "bar");
  assert.equal(chart.title, "Counts");
  assert.equal(chart.y_unit, "pcs");
  assert.equal(chart.x_label, null);
  assert.deepEqual(chart.elements, [{ label: "a", value: 5, group: "n" }, { label: "b", value: 7, group: "n" }]);
  assert.deepEqual(bars.results[0].extra, {}, "nothing beyond E2B's fields");

  const lines = await run(sbx, "fig, axs = plt.subplots(1, 2)\nfig.suptitle('Two')\naxs[0].plot([1, 2], [3, 4], label='up')\naxs[1].pie([1, 3], labels=['x', 'y'])");
  const sup = lines.results[0].chart;
  assert.equal(sup.type, "superchart");
  assert.equal(sup.title, "Two");
  assert.deepEqual(sup.elements.map((c) => c.type), ["line", "pie"]);
  assert.deepEqual(sup.elements[0].elements, [{ label: "up", points: [[1, 3], [2, 4]] }]);
  assert.deepEqual(sup.elements[1].elements.map((w) => [w.label, w.angle]), [["x", 90], ["y", 270]]);

  const df = await run(sbx, "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', None]})");
  assert.equal(df.results.length, 1);
  assert.equal(df.results[0].isMainResult, true);
  assert.deepEqual(df.results[0].data, { a: [1, 2], b: ["x", null] });
  assert.match(df.results[0].text, /a +b/, "the text is still the repr");
  assert.match(df.results[0].html ?? "", /<table[\s\S]*<th>a<\/th>/, "a DataFrame's HTML table, as E2B's html");

  const rich = await run(sbx, "class R:\n    def _repr_markdown_(self): return '**hi**'\n    def _repr_json_(self): return {'k': 1}\nR()");
  assert.equal(rich.results[0].markdown, "**hi**");
  assert.deepEqual(rich.results[0].json, { k: 1 });

  const img = await run(sbx, "from PIL import Image\nim = Image.new('RGB', (4, 4))\nim.show()\nim.save('x.png')\nprint('done')");
  assert.equal(img.results.length, 2, "show() and save() each display the image");
  for (const r of img.results) {
    assert.ok(Buffer.from(r.png, "base64").subarray(0, 8).equals(PNG_MAGIC), "a PNG");
    assert.equal(r.chart, undefined);
  }
  assert.equal(img.logs.stdout.join(""), "done\n");
});

test("an exception is an execution error with its traceback", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const errors = [];
  const e = await sbx.runCode('def f():\n    raise ValueError("boom")\n\nf()', { onError: (x) => errors.push(x) });
  assert.ok(e.error, "execution.error is set");
  assert.equal(e.error.name, "ValueError");
  assert.equal(e.error.value, "boom");
  assert.equal(typeof e.error.traceback, "string");
  assert.match(e.error.traceback, /raise ValueError\("boom"\)/, "the traceback shows the raising line");
  assert.match(e.error.traceback, /ValueError/);
  assert.deepEqual(e.results, []);
  assert.equal(errors.length, 1);
  // The context survives an exception.
  assert.equal((await run(sbx, "f.__name__")).text, "f");
});

test("a cell timeout is TimeoutError and the context lives on", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await run(sbx, "z = 42");
  const start = Date.now();
  await assert.rejects(sbx.runCode("import time\ntime.sleep(600)", { timeoutMs: 2_000 }), TimeoutError);
  assert.ok(Date.now() - start < 15_000, `the timeout took ${Date.now() - start} ms`);
  // The server stopped the cell when the client went away: the next one
  // runs at once, in the same namespace.
  const e = await run(sbx, "z", { timeoutMs: 30_000 });
  assert.equal(e.text, "42");
});

test("a cell running when its sandbox is killed rejects with TimeoutError", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  let started;
  const running = new Promise((resolve) => (started = resolve));
  const cell = sbx.runCode("import time\nprint('started', flush=True)\ntime.sleep(300)", { timeoutMs: 300_000, onStdout: started });
  await running;
  // The verdict is attached before the kill: the cell may reject before
  // kill() returns, and a rejection with no handler yet fails the test.
  const verdict = assert.rejects(cell, (err) => {
    assert.ok(err instanceof TimeoutError, `want TimeoutError, got ${err}`);
    assert.match(err.message, /sandbox was killed while the request was in progress/);
    return true;
  });
  await sbx.kill();
  await verdict;
});

test("contexts do not share variables; restart and remove", { timeout: 120_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const ctx = await sbx.createCodeContext();
  assert.equal(typeof ctx.id, "string");
  assert.ok(ctx.id.length > 0);
  assert.equal(ctx.language, "python");
  assert.equal(typeof ctx.cwd, "string");

  await run(sbx, "a = 1");
  await run(sbx, "a = 2", { context: ctx });
  assert.equal((await run(sbx, "a", { context: ctx })).text, "2");
  assert.equal((await run(sbx, "a")).text, "1", "the default context keeps its own a");
  await run(sbx, "only_in_ctx = True", { context: ctx });
  const e = await sbx.runCode("only_in_ctx");
  assert.equal(e.error?.name, "NameError", "the default context does not see another context's variables");

  const other = await sbx.createCodeContext({ language: "python" });
  assert.notEqual(other.id, ctx.id);
  const e2 = await sbx.runCode("a", { context: other });
  assert.equal(e2.error?.name, "NameError", "a new context starts empty");

  const ids = (await sbx.listCodeContexts()).map((c) => c.id);
  assert.ok(ids.includes(ctx.id) && ids.includes(other.id), `listCodeContexts: ${ids}`);

  await sbx.restartCodeContext(ctx);
  const e3 = await sbx.runCode("a", { context: ctx });
  assert.equal(e3.error?.name, "NameError", "restart clears the context's variables");
  await run(sbx, "a = 3", { context: ctx });
  assert.equal((await run(sbx, "a", { context: ctx })).text, "3", "a restarted context runs code");
  assert.equal((await run(sbx, "a")).text, "1", "restart leaves other contexts alone");

  await sbx.removeCodeContext(other.id);
  const after = (await sbx.listCodeContexts()).map((c) => c.id);
  assert.ok(!after.includes(other.id), `a removed context is not listed: ${after}`);
  assert.ok(after.includes(ctx.id));
  await assert.rejects(sbx.runCode("1", { context: other }), SandboxError, "code in a removed context is refused");
  await assert.rejects(sbx.removeCodeContext(other.id), NotFoundError);
});

test("runCode with language python", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  assert.equal((await run(sbx, "1 + 1", { language: "python" })).text, "2");
});

test("envs hold for one execution only", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { envs: { FROM_CREATE: "c" } });
  const e = await run(sbx, "import os, subprocess\n(os.environ.get('ONE'), os.environ.get('FROM_CREATE'), subprocess.run(['sh', '-c', 'echo $ONE'], capture_output=True, text=True).stdout.strip())", { envs: { ONE: "1" } });
  assert.equal(e.text, "('1', 'c', '1')");
  assert.equal((await run(sbx, "import os\nos.environ.get('ONE'), os.environ.get('FROM_CREATE')")).text, "(None, 'c')");
});

test("an indented cell is dedented, as E2B's kernel does", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const e = await run(sbx, `
    total = 0
    for i in range(4):
        total += i
    total
  `);
  assert.equal(e.text, "6");
  const err = await sbx.runCode(`
      a = 1
      a / 0
  `);
  assert.equal(err.error?.name, "ZeroDivisionError");
  assert.match(err.error.traceback, /line 3/, "the traceback's line is the cell's own");
});

test("a result's text: a str without its quotes, other values their repr", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  for (const [code, want] of [
    ["'bar'", "bar"],
    ["\"it's\"", "it's"],
    ["['bar']", "['bar']"],
    ["('x', 1)", "('x', 1)"],
    ["1", "1"],
    ["'1'", "1"],
  ]) {
    assert.equal((await run(sbx, code)).text, want, code);
  }
});

test("code and commands run in /home/user, which is $HOME", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const e = await run(sbx, "import os, pathlib, subprocess\nprint(os.getcwd(), os.environ['HOME'], pathlib.Path.home(), subprocess.run('pwd', capture_output=True, text=True).stdout.strip())");
  assert.equal(e.logs.stdout.join(""), "/home/user /home/user /home/user /home/user\n");
  const ctx = await sbx.createCodeContext();
  const c = await run(sbx, "import os\nprint(os.getcwd(), os.path.expanduser('~'))", { context: ctx });
  assert.equal(c.logs.stdout.join(""), "/home/user /home/user\n", "a context's too");
  const cmd = await sbx.commands.run('echo "$PWD $HOME" && cd && pwd');
  assert.equal(cmd.stdout, "/home/user /home/user\n/home/user\n");
  await sbx.files.write("here.txt", "relative to the home");
  assert.equal((await run(sbx, "open('here.txt').read()")).text, "relative to the home");
});
