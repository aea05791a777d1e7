// End-to-end test of `nsbox mcp` with the official MCP TypeScript SDK: a
// client nsbox did not write spawns the server on stdio and drives every
// tool. Environment: NSBOX_BIN (the nsbox binary), NSBOX_SOCKET (a running
// daemon), NSBOX_MCP_ROOTFS (rootfs for the session; the plot part needs
// matplotlib), NSBOX_MCP_PLOT=0 to skip the plot part (no data-science rootfs),
// NSBOX_MCP_JS=0|1 whether the rootfs has Node.js, so that run_javascript is
// listed and driven (default: as the plot part, the data-science rootfs has
// Node.js), or not listed.
// Exits non-zero on the first failed check.
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const bin = process.env.NSBOX_BIN ?? "nsbox";
const socket = process.env.NSBOX_SOCKET;
assert.ok(socket, "NSBOX_SOCKET must name the daemon's socket");
const rootfs = process.env.NSBOX_MCP_ROOTFS ?? "";
const wantPlot = process.env.NSBOX_MCP_PLOT !== "0";
const wantJS = process.env.NSBOX_MCP_JS ? process.env.NSBOX_MCP_JS !== "0" : wantPlot;

const args = ["mcp", "--socket", socket, "--log-level", "debug"];
if (rootfs) args.push("--rootfs", rootfs);
const transport = new StdioClientTransport({ command: bin, args, stderr: "inherit" });
const client = new Client({ name: "nsbox-e2e", version: "0.0.1" });

function log(...a) {
  console.log("mcp-client:", ...a);
}

// text joins a result's text blocks.
function text(res) {
  return res.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
}

async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  log(`${name}(${JSON.stringify(args).slice(0, 80)}) -> isError=${!!res.isError}`, JSON.stringify(text(res).slice(0, 200)));
  return res;
}

// pngSize checks the PNG signature and IHDR chunk and returns the size.
function pngSize(buf) {
  const sig = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
  assert.deepEqual([...buf.subarray(0, 8)], sig, "PNG signature");
  assert.equal(buf.subarray(12, 16).toString("latin1"), "IHDR", "first chunk is IHDR");
  return { width: buf.readUInt32BE(16), height: buf.readUInt32BE(20) };
}

await client.connect(transport);
try {
  // tools/list: names and input schemas.
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of ["run_python", "run_shell", "write_file", "read_file", "list_files", "reset_session"]) {
    assert.ok(byName[name], `tool ${name} listed`);
    assert.equal(byName[name].inputSchema.type, "object", `${name} input schema is an object`);
    assert.ok(byName[name].description.length > 40, `${name} has a description`);
  }
  assert.deepEqual(byName.run_python.inputSchema.required, ["code"]);
  assert.equal(byName.run_python.inputSchema.properties.code.type, "string");
  assert.equal(byName.run_python.inputSchema.properties.timeout_s.maximum, 600);
  assert.deepEqual(byName.run_shell.inputSchema.required, ["command"]);
  assert.deepEqual(byName.write_file.inputSchema.properties.encoding.enum, ["utf-8", "base64"]);
  if (wantJS) {
    assert.ok(byName.run_javascript, "run_javascript listed on a rootfs with Node.js");
    assert.deepEqual(byName.run_javascript.inputSchema.required, ["code"]);
    assert.equal(byName.run_javascript.inputSchema.properties.typescript.type, "boolean");
    assert.match(byName.run_javascript.description, /separate from run_python's sandbox/);
  } else {
    assert.ok(!byName.run_javascript, "run_javascript not listed on a rootfs without Node.js");
  }
  log(`listed ${tools.length} tools`);

  // State persists across calls.
  let res = await call("run_python", { code: "x = 41\nprint('set x')" });
  assert.ok(!res.isError, text(res));
  assert.match(text(res), /set x/);
  res = await call("run_python", { code: "x + 1" });
  assert.ok(!res.isError, text(res));
  assert.match(text(res), /--- value ---\n42/);
  assert.equal(res.structuredContent.value, "42");
  assert.equal(res.structuredContent.status, "ok");

  // An exception is a tool error with the traceback, not a protocol error.
  res = await call("run_python", { code: "def f():\n    return 1 / 0\n\nf()" });
  assert.equal(res.isError, true);
  assert.match(text(res), /Traceback \(most recent call last\)/);
  assert.match(text(res), /ZeroDivisionError: division by zero/);
  assert.equal(res.structuredContent.exception.name, "ZeroDivisionError");

  // A timeout is a tool error too, and the session lives on.
  res = await call("run_python", { code: "while True: pass", timeout_s: 1 });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent.status, "timeout");
  res = await call("run_python", { code: "x" });
  assert.equal(res.structuredContent.value, "41");

  // Invalid arguments (schema violation) are a tool error as well.
  res = await call("run_python", { code: "1", timeout_s: 100000 });
  assert.equal(res.isError, true);
  assert.match(text(res), /timeout_s is 100000, above its maximum of 600 s/);

  // An unknown tool is protocol misuse: a JSON-RPC error.
  await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }));

  // Shell in the same sandbox.
  res = await call("run_shell", { command: "echo hello from $0; pwd; exit 3" });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent.exit_code, 3);
  assert.match(text(res), /hello from/);
  assert.match(res.structuredContent.stdout, /\/workspace/);

  // Files: write, list, read back (text and binary), see them from code and shell.
  res = await call("write_file", { path: "data/in.csv", content: "a,b\n1,2\n3,4\n" });
  assert.ok(!res.isError, text(res));
  res = await call("write_file", { path: "blob.bin", content: Buffer.from([0, 1, 2, 255]).toString("base64"), encoding: "base64" });
  assert.ok(!res.isError, text(res));
  res = await call("list_files", {});
  assert.ok(!res.isError, text(res));
  const paths = res.structuredContent.files.map((f) => f.path);
  assert.ok(paths.includes("data/in.csv") && paths.includes("blob.bin"), `listed ${paths}`);
  res = await call("list_files", { path: "data" });
  assert.deepEqual(res.structuredContent.files.map((f) => f.path).sort(), ["data", "data/in.csv"]);
  res = await call("read_file", { path: "data/in.csv" });
  assert.equal(text(res), "a,b\n1,2\n3,4\n");
  res = await call("read_file", { path: "blob.bin" });
  assert.equal(res.structuredContent.encoding, "base64");
  assert.match(text(res), /AAEC\/w==/);
  res = await call("run_python", { code: "open('data/in.csv').read().count('\\n')" });
  assert.equal(res.structuredContent.value, "3");
  res = await call("run_shell", { command: "wc -l < data/in.csv" });
  assert.ok(!res.isError, text(res));
  assert.equal(res.structuredContent.stdout.trim(), "3");
  res = await call("read_file", { path: "missing.txt" });
  assert.equal(res.isError, true);
  res = await call("read_file", { path: "/etc/passwd" });
  assert.equal(res.isError, true, "host paths are not reachable");
  res = await call("read_file", { path: "../../etc/passwd" });
  assert.equal(res.isError, true, "paths cannot climb out of /workspace");

  if (wantPlot) {
    res = await call("run_python", {
      code:
        "import matplotlib.pyplot as plt\n" +
        "fig, ax = plt.subplots(figsize=(4, 3), dpi=100)\n" +
        "ax.plot([1, 2, 3], [1, 4, 9])\n" +
        "fig.savefig('plot.png')\n" +
        "plt.show()",
    });
    assert.ok(!res.isError, text(res));
    const images = res.content.filter((c) => c.type === "image");
    assert.equal(images.length, 1, "one image block per figure");
    assert.equal(images[0].mimeType, "image/png");
    const size = pngSize(Buffer.from(images[0].data, "base64"));
    assert.deepEqual(size, { width: 400, height: 300 });
    log(`plot: PNG ${size.width}x${size.height}`);
    // The saved file comes back as an image through read_file.
    res = await call("read_file", { path: "plot.png" });
    const img = res.content.find((c) => c.type === "image");
    assert.ok(img, "read_file returns an image block for a PNG");
    assert.deepEqual(pngSize(Buffer.from(img.data, "base64")), { width: 400, height: 300 });
  } else {
    log("SKIP plot: NSBOX_MCP_PLOT=0 (no data-science rootfs with matplotlib)");
  }

  if (wantJS) {
    // JavaScript: a Node.js session of its own, state across calls, the
    // last value as the REPL shows it, top-level await.
    res = await call("run_javascript", { code: "const xs = [1, 2, 3]\nconsole.log('sum', xs.reduce((a, b) => a + b))" });
    assert.ok(!res.isError, text(res));
    assert.match(text(res), /--- stdout ---\nsum 6/);
    res = await call("run_javascript", { code: "xs.map((v) => v * 2)" });
    assert.equal(res.structuredContent.value, "[ 2, 4, 6 ]");
    res = await call("run_javascript", { code: "await new Promise((r) => setTimeout(() => r(42), 10))" });
    assert.equal(res.structuredContent.value, "42", text(res));
    // Apart from run_python's: neither its variables nor its /workspace.
    res = await call("run_javascript", { code: "[typeof x, require('fs').existsSync('data/in.csv')]" });
    assert.equal(res.structuredContent.value, "[ 'undefined', false ]", text(res));
    // An exception is a tool error whose stack names the user's line.
    res = await call("run_javascript", { code: "function f() {\n  throw new TypeError('bad')\n}\nf()" });
    assert.equal(res.isError, true);
    assert.equal(res.structuredContent.exception.name, "TypeError");
    assert.match(text(res), /--- exception ---\n[^]*TypeError: bad[^]*<cell \d+>:2:\d+/);
    // A timeout interrupts the cell; the session lives on.
    res = await call("run_javascript", { code: "while (true) {}", timeout_s: 1 });
    assert.equal(res.isError, true);
    assert.equal(res.structuredContent.status, "timeout");
    res = await call("run_javascript", { code: "xs.length" });
    assert.equal(res.structuredContent.value, "3", text(res));
    // The session is JavaScript (its first call said so): TypeScript is refused.
    res = await call("run_javascript", { code: "const n: number = 1", typescript: true });
    assert.equal(res.isError, true);
    assert.match(text(res), /reset_session/);
  } else {
    log("SKIP run_javascript: the rootfs has no Node.js");
  }

  // reset_session: state and files are gone.
  res = await call("reset_session", {});
  assert.ok(!res.isError, text(res));
  res = await call("run_python", { code: "x" });
  assert.equal(res.isError, true);
  assert.equal(res.structuredContent.exception.name, "NameError");
  res = await call("list_files", {});
  assert.ok(!res.structuredContent.files.some((f) => f.path === "data/in.csv"), "files gone after reset");
  if (wantJS) {
    // The Node.js session went too; a first call with typescript: true makes a TypeScript one.
    res = await call("run_javascript", { code: "typeof xs" });
    assert.equal(res.structuredContent.value, "'undefined'", text(res));
    res = await call("reset_session", {});
    res = await call("run_javascript", { code: "const n: number = 41\nn + 1", typescript: true });
    assert.ok(!res.isError, text(res));
    assert.equal(res.structuredContent.value, "42");
    res = await call("run_javascript", { code: "n" });
    assert.equal(res.structuredContent.value, "41", text(res));
  }
} finally {
  await client.close();
}
log("PASS");
