// nsbox Node.js runner: executes cells sent over fd 3 in persistent vm
// contexts. Frames are a 4-byte big-endian length then JSON, as for
// runner.py, and the replies are the same. The source is run by NodeArgv's
// bootstrap as a function of require, with the filename nsbox-runner (its
// frames are cut from the user's stack traces by that name), and of
// importModule, the bootstrap's own import() (a vm script has none).
(function (require, importModule) {
'use strict';
const fs = require('fs');
const net = require('net');
const vm = require('vm');
const util = require('util');
const Module = require('module');
const { spawnSync } = require('child_process');
const { promiseHooks } = require('v8');

// A guest runner (container/runner/guest) runs beside another
// interpreter, started by its sandbox's process agent: requests come on
// stdin, and each reply is one JSON line on stdout right after its
// request's marker (the ready reply after NSBOX_GUEST_MARKER's).
const GUEST = process.env.NSBOX_GUEST_MARKER;
delete process.env.NSBOX_GUEST_MARKER;
let replyMarker = GUEST;
const CTL = GUEST === undefined ? 3 : 0;
const REPR_CAP = 65536;
const WORKSPACE = '/workspace';
const RUNNER_FILE = 'nsbox-runner';

process.argv.length = 1; // argv[1] was this source
// Debian's node finds its modules (/usr/share/nodejs) from its prefix,
// which it derives from /proc/self/exe: make sure they are there.
for (const p of ['/usr/local/lib/nodejs', '/usr/local/share/nodejs', '/usr/lib/x86_64-linux-gnu/nodejs', '/usr/lib/nodejs', '/usr/share/nodejs']) {
  if (!Module.globalPaths.includes(p)) Module.globalPaths.push(p);
}

// The sandbox's stdout and stderr are pipes, which libuv writes without
// blocking: past the pipe's 64 KiB the rest waits in memory until the event
// loop runs, so a synchronous flood would neither reach the host (and its
// output cap) nor stop growing. Blocking writes keep the flood at the
// host's pace and let a marker written with fs.writeSync follow everything
// the cell printed.
for (const s of [process.stdout, process.stderr]) {
  if (s._handle && typeof s._handle.setBlocking === 'function') s._handle.setBlocking(true);
}

const realExit = process.exit.bind(process);
const kExit = Symbol('nsbox.exit');
// process.exit in a cell ends the cell, not the runner (Python's
// SystemExit): code 0 is a normal end, any other an exception.
process.exit = function exit(code) {
  const c = code === undefined ? (process.exitCode || 0) : code;
  const e = new Error('process.exit(' + c + ')');
  e.name = 'ProcessExit';
  e[kExit] = Number(c) || 0;
  throw e;
};

// Errors nobody catches (a timer's, a rejected promise nobody awaits) are
// reported on stderr; they must not end the session.
process.on('uncaughtException', (e) => {
  try { fs.writeSync(2, 'Uncaught ' + describe(e) + '\n'); } catch (_) {}
});
process.on('unhandledRejection', (e) => {
  try { fs.writeSync(2, 'Unhandled promise rejection: ' + describe(e) + '\n'); } catch (_) {}
});

function describe(e) {
  if (e && typeof e.stack === 'string') return cleanStack(e.stack);
  return util.inspect(e);
}

// The host interrupts a cell with SIGINT. A synchronous cell runs with
// breakOnSigint (vm removes this listener meanwhile and terminates the
// script); an asynchronous one is waiting on the event loop, where this
// listener ends it. Between cells a SIGINT is ignored.
let onInterrupt = null;
process.on('SIGINT', () => { if (onInterrupt) onInterrupt(); });

// Cuts the runner's frames (and vm's, below the cell) from a stack.
function cleanStack(stack) {
  let lines = stack.split('\n');
  // node puts the throwing line over the stack ("file:line", the code, a
  // caret, a blank line): not when it is the runner's (process.exit).
  if (lines[0].startsWith(RUNNER_FILE + ':')) lines = lines.slice(lines.indexOf('') + 1);
  let lastCell = -1;
  lines.forEach((l, i) => { if (l.startsWith('    at ') && l.includes('<cell ')) lastCell = i; });
  return lines.filter((l, i) => {
    if (!l.startsWith('    at ')) return true;
    if (lastCell >= 0 && i > lastCell) return false;
    return !l.includes(RUNNER_FILE) && !l.includes('(node:vm:') && !l.includes(' node:vm:');
  }).join('\n');
}

function exception(e) {
  if (e === null || (typeof e !== 'object' && typeof e !== 'function')) {
    return { name: 'Uncaught', value: util.inspect(e), traceback: 'Uncaught ' + util.inspect(e) };
  }
  let name = 'Error', value = '', tb = '';
  try { name = String(e.name || (e.constructor && e.constructor.name) || 'Error'); } catch (_) {}
  try { value = e.message === undefined ? util.inspect(e) : String(e.message); } catch (_) {}
  try { tb = typeof e.stack === 'string' ? cleanStack(e.stack) : name + ': ' + value; } catch (_) {}
  return { name, value, traceback: tb };
}

function interrupted() {
  return { name: 'Interrupted', value: 'the cell was interrupted (SIGINT: its timeout, its output cap or a cancel)',
    traceback: 'Interrupted: the cell was interrupted' };
}

// A syntax error located by line and column, shown as node shows one.
function syntaxError(file, code, line, col, msg) {
  const text = code.split('\n')[line - 1] || '';
  return { name: 'SyntaxError', value: msg,
    traceback: file + ':' + line + ':' + col + '\n' + text + '\n' + ' '.repeat(Math.max(col - 1, 0)) + '^\n\nSyntaxError: ' + msg };
}

// ---- contexts ----

// One vm context per context name ("" is the default), each with its own
// globals and execution count. It gets node's globals (console, process,
// Buffer, timers, URL, fetch...) and a require rooted at /workspace.
const contexts = new Map();
let allowed = null; // allowed_imports, once a request carries it

function cellRequire() {
  const req = Module.createRequire(WORKSPACE + '/');
  const wrapped = function require(id) {
    if (allowed !== null) checkImport(id);
    return req(id);
  };
  wrapped.resolve = req.resolve;
  wrapped.cache = req.cache;
  return wrapped;
}

function checkImport(id) {
  const name = String(id).replace(/^node:/, '');
  if (allowed.some((a) => name === a || name.startsWith(a + '/'))) return;
  const e = new Error("require of '" + id + "' is not allowed: allowed_imports is " + JSON.stringify(allowed));
  e.code = 'ERR_NSBOX_IMPORT_NOT_ALLOWED';
  throw e;
}

// import() in a cell (node runs it with --experimental-vm-modules: a vm
// script has no import() of its own otherwise): resolved from /workspace
// as require resolves, and loaded by the runner's import().
const workspaceRequire = Module.createRequire(WORKSPACE + '/');

function dynamicImport(spec) {
  spec = String(spec);
  if (allowed !== null) checkImport(spec);
  let target = spec;
  if (!Module.isBuiltin(spec)) {
    try { target = require('url').pathToFileURL(workspaceRequire.resolve(spec)).href; } catch (_) {}
  }
  return importModule(target);
}

function newContext() {
  const sandbox = {};
  const g = vm.createContext(sandbox);
  const inner = vm.runInContext('globalThis', g);
  for (const k of Object.getOwnPropertyNames(globalThis)) {
    // A new context has V8's own console, which prints nothing.
    if ((k in inner && k !== 'console') || k === 'global') continue;
    Object.defineProperty(sandbox, k, Object.getOwnPropertyDescriptor(globalThis, k));
  }
  sandbox.global = inner;
  sandbox.require = cellRequire();
  return { g, count: 0 };
}

function context(name) {
  let c = contexts.get(name);
  if (!c) { c = newContext(); contexts.set(name, c); }
  return c;
}

// ---- top-level await ----

let acorn = null;

function parser() {
  if (acorn === null) acorn = require('acorn');
  return acorn;
}

// Rewrites a cell with top-level await into an async function whose
// declarations are hoisted to the context (they persist) and whose last
// expression is returned, as node's REPL does (lib/internal/repl/await.js):
//   const r = await f(); r   ->   let r; (async () => { void (r = await f()); return (r) })()
// Line numbers stay: the hoisted names and the wrapper go on line 1.
// Returns null when the cell has no top-level await (or a top-level
// return, which the wrapper would change).
function rewriteAwait(src) {
  const prefix = '(async () => { ';
  const wrapped = prefix + src + '\n})()';
  let root;
  try {
    root = parser().parse(wrapped, { ecmaVersion: 'latest' });
  } catch (e) {
    return null; // the cell's own compile reports it
  }
  const body = root.body[0].expression.callee.body;
  const out = wrapped.split('');
  const hoisted = [];
  const st = { await: false, ret: false };
  const prepend = (node, s) => { out[node.start] = s + out[node.start]; };
  const append = (node, s) => { out[node.end - 1] += s; };
  const names = (p, into) => {
    switch (p && p.type) {
      case 'Identifier': into.push(p.name); break;
      case 'ObjectPattern': p.properties.forEach((q) => names(q.type === 'RestElement' ? q.argument : q.value, into)); break;
      case 'ArrayPattern': p.elements.forEach((q) => names(q, into)); break;
      case 'AssignmentPattern': names(p.left, into); break;
      case 'RestElement': names(p.argument, into); break;
    }
  };
  const walk = (node, parent) => {
    if (!node || typeof node.type !== 'string') return;
    const top = parent === body;
    switch (node.type) {
      case 'FunctionExpression': case 'ArrowFunctionExpression':
        return; // its awaits and returns are its own
      case 'FunctionDeclaration':
        if (top) { prepend(node, 'this.' + node.id.name + ' = ' + node.id.name + '; '); hoisted.push('var ' + node.id.name + '; '); }
        return;
      case 'ClassDeclaration':
        if (top) { prepend(node, node.id.name + '='); hoisted.push('let ' + node.id.name + '; '); }
        break;
      case 'AwaitExpression': st.await = true; break;
      case 'ForOfStatement': if (node.await) st.await = true; break;
      case 'ReturnStatement': st.ret = true; break;
      case 'VariableDeclaration': {
        const kind = node.kind;
        if (kind !== 'var' && !top) break;
        const inFor = (parent.type === 'ForOfStatement' || parent.type === 'ForInStatement') && parent.left === node;
        if (inFor && kind !== 'var') break;
        const ids = [];
        node.declarations.forEach((d) => names(d.id, ids));
        if (ids.length) hoisted.push((kind === 'var' ? 'var ' : 'let ') + ids.join(', ') + '; ');
        const many = node.declarations.length !== 1;
        // "const" -> "void" (or "void ("), each declarator in parentheses.
        for (let i = node.start; i < node.start + kind.length; i++) out[i] = '';
        out[node.start] = inFor ? '' : 'void' + (many ? ' (' : '');
        if (!inFor) {
          node.declarations.forEach((d) => { prepend(d, '('); append(d, d.init ? ')' : '=undefined)'); });
          if (many) append(node.declarations[node.declarations.length - 1], ')');
        }
        break;
      }
    }
    for (const k of Object.keys(node)) {
      const v = node[k];
      if (Array.isArray(v)) v.forEach((c) => walk(c, node));
      else if (v && typeof v.type === 'string') walk(v, node);
    }
  };
  body.body.forEach((n) => walk(n, body));
  if (!st.await || st.ret) return null;
  const last = body.body[body.body.length - 1];
  if (last && last.type === 'ExpressionStatement') {
    prepend(last, 'return (');
    append(last.expression, ')');
  }
  return hoisted.join('') + out.join('');
}

// Rewrites a cell's static import declarations into awaits of import(),
// which a vm script can run (as a notebook's JavaScript kernel takes
// them):
//   import fs, { readFileSync as r } from 'fs'  ->  const fs = (await import('fs')).default, { readFileSync: r } = await import('fs');
// Each keeps its lines. A cell without them, or that does not parse as a
// module, is left as it is.
function rewriteImports(src) {
  let root;
  try {
    root = parser().parse(src, { ecmaVersion: 'latest', sourceType: 'module', allowAwaitOutsideFunction: true, allowReturnOutsideFunction: true });
  } catch (e) {
    return src;
  }
  const decls = root.body.filter((n) => n.type === 'ImportDeclaration');
  if (!decls.length) return src;
  let out = '';
  let at = 0;
  for (const d of decls) {
    const mod = 'await import(' + JSON.stringify(d.source.value) + ')';
    const parts = [];
    const named = [];
    for (const sp of d.specifiers) {
      if (sp.type === 'ImportDefaultSpecifier') parts.push(sp.local.name + ' = (' + mod + ').default');
      else if (sp.type === 'ImportNamespaceSpecifier') parts.push(sp.local.name + ' = ' + mod);
      else {
        const name = sp.imported.type === 'Literal' ? JSON.stringify(sp.imported.value) : sp.imported.name;
        named.push(name === sp.local.name ? name : name + ': ' + sp.local.name);
      }
    }
    if (named.length) parts.push('{ ' + named.join(', ') + ' } = ' + mod);
    const lines = src.slice(d.start, d.end).split('\n').length - 1;
    out += src.slice(at, d.start) + (parts.length ? 'const ' + parts.join(', ') + ';' : mod + ';') + '\n'.repeat(lines);
    at = d.end;
  }
  return out + src.slice(at);
}

// ---- TypeScript ----

// Strips a TypeScript cell's types with the rootfs's esbuild (it does not
// type-check: a type error is no error here). esbuild reprints the code,
// dropping blank lines and comments; its source map puts each line back on
// its line in the cell (padding with blank lines), so stack traces name the
// user's lines (columns are esbuild's).
function stripTypes(file, code) {
  const r = spawnSync('esbuild', ['--loader=ts', '--sourcemap=inline', '--log-level=error', '--color=false', '--log-limit=1'],
    { input: code, encoding: 'utf8', maxBuffer: 256 << 20 });
  if (r.error) {
    const e = new Error('TypeScript needs esbuild in the rootfs: ' + r.error.message);
    e.name = 'TypeScriptUnavailable';
    throw e;
  }
  if (r.status !== 0) {
    const m = /\[ERROR\] (.*)\n(?:[^]*?)<stdin>:(\d+):(\d+):/.exec(r.stderr);
    if (m) return { error: syntaxError(file, code, Number(m[2]), Number(m[3]) + 1, m[1]) };
    return { error: { name: 'SyntaxError', value: r.stderr.trim(), traceback: r.stderr.trim() } };
  }
  return { code: relayout(r.stdout) };
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

// The source line (0-based) each generated line starts at, from a source
// map's mappings (base64 VLQ; only the segments' third field matters).
function firstSourceLines(mappings) {
  const res = [];
  let srcLine = 0;
  mappings.split(';').forEach((line) => {
    let first = -1;
    for (const seg of line.split(',')) {
      if (!seg) continue;
      const f = [];
      let v = 0, shift = 0;
      for (const ch of seg) {
        const d = B64.indexOf(ch);
        v += (d & 31) << shift;
        if (d & 32) { shift += 5; continue; }
        f.push(v & 1 ? -(v >>> 1) : v >>> 1);
        v = 0; shift = 0;
      }
      if (f.length >= 4) {
        srcLine += f[2];
        if (first < 0) first = srcLine;
      }
    }
    res.push(first);
  });
  return res;
}

function relayout(js) {
  const m = /\n\/\/# sourceMappingURL=data:application\/json;base64,([A-Za-z0-9+/=]+)\s*$/.exec(js);
  if (!m) return js;
  js = js.slice(0, m.index);
  let starts;
  try { starts = firstSourceLines(JSON.parse(Buffer.from(m[1], 'base64').toString()).mappings); } catch (_) { return js; }
  const out = [];
  js.split('\n').forEach((line, i) => {
    const want = starts[i] === undefined ? -1 : starts[i];
    while (want > out.length) out.push('');
    out.push(line);
  });
  return out.join('\n');
}

// ---- cells ----

function fileName(ctx, n) { return ctx ? '<cell ' + ctx + ':' + n + '>' : '<cell ' + n + '>'; }

function compile(code, file) {
  const opts = { filename: file, importModuleDynamically: dynamicImport };
  // As node's REPL: a cell that is one object literal is an object, not a block.
  if (/^\s*{/.test(code) && /}\s*$/.test(code)) {
    try { return new vm.Script('(' + code.trim() + ')\n', opts); } catch (_) {}
  }
  if (/\bimport\b/.test(code)) code = rewriteImports(code);
  if (/\bawait\b/.test(code)) {
    const r = rewriteAwait(code);
    if (r !== null) return Object.assign(new vm.Script(r, opts), { async: true });
  }
  return new vm.Script(code, opts);
}

function show(v) {
  let r = util.inspect(v, { showProxy: true });
  if (r.length > REPR_CAP) r = r.slice(0, REPR_CAP) + '...';
  return r;
}

// Runs one cell, filling the reply's value and exception fields; returns
// a promise only for a cell with a top-level await (the others are
// answered without a turn of the microtask queue).
function runCell(req, c, n, rep) {
  const file = fileName(req.context || '', n);
  let code = req.code || '';
  if (req.lang === 'ts') {
    const t = stripTypes(file, code);
    if (t.error) { rep.exception = t.error; return; }
    code = t.code;
  }
  let script;
  try {
    script = compile(code, file);
  } catch (e) {
    rep.exception = exception(e);
    return;
  }
  let v;
  try {
    v = script.runInContext(c.g, { breakOnSigint: !req.no_interrupt, displayErrors: true });
  } catch (e) {
    cellError(rep, e);
    return;
  }
  if (!script.async) {
    result(rep, c, v);
    return;
  }
  return (async () => {
    let stop = null;
    const stopped = new Promise((resolve) => { stop = resolve; });
    onInterrupt = () => stop(kInterrupted);
    try {
      v = await Promise.race([v, stopped]);
      if (v === kInterrupted) { rep.exception = interrupted(); return; }
    } catch (e) {
      cellError(rep, e);
      return;
    } finally {
      onInterrupt = null;
    }
    result(rep, c, v);
  })();
}

function cellError(rep, e) {
  if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') rep.exception = interrupted();
  else if (e && e[kExit] !== undefined) { if (e[kExit] !== 0) rep.exception = exception(e); }
  else rep.exception = exception(e);
}

function result(rep, c, v) {
  if (v !== undefined) {
    try { c.g._ = v; } catch (_) {}
    rep.value = show(v);
  }
}
const kInterrupted = Symbol('interrupted');

// setup: preimport modules (require's cache keeps them) and warm the cell
// path once: a context, a compile with the import hook, a run that prints,
// inspect, acorn for await. V8 compiles each function at its first call
// and node makes process.stdout at its first use: done here, the first
// real cell of a pooled runner costs what the next ones do. What the
// scratch cell prints is the set-up's output, which the host discards.
async function setup(names) {
  const skipped = [];
  const req = cellRequire();
  for (const n of names || []) {
    try { req(n); } catch (_) { skipped.push(n); }
  }
  // In the default context itself: V8 sets up a context's builtins at
  // its first script. The scratch cell binds nothing, leaves no value and
  // does not count. It goes the whole way a real cell goes (cell: the
  // compile, the run, its markers; the reply's JSON), with breakOnSigint
  // and without (a session's cells and a one-shot run's): a pooled
  // runner's first real cell is its first cell, and V8 compiles each
  // function at its first call (a first cell 1.7 ms where runCell alone
  // was warmed, 1.2 ms so). Its markers (a space) are set-up output.
  const c = context('');
  for (const noInterrupt of [false, true]) {
    let rep = cell({ code: 'console.log("")', marker: ' ', no_interrupt: noInterrupt }, c, 0, { count: 0 });
    if (rep instanceof Promise) rep = await rep;
    JSON.stringify(rep);
  }
  show({ a: [1] });
  try { rewriteAwait('await 0'); } catch (_) {}
  return skipped;
}

function restoreEnv(saved) {
  for (const [k, v] of saved) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
}

function writeAll(fd, s) {
  const b = Buffer.from(s);
  let off = 0;
  while (off < b.length) off += fs.writeSync(fd, b, off);
}

// Answers one request: the reply, or a promise of it (a set-up, a cell
// with a top-level await).
function handle(req) {
  if ('drop_context' in req) {
    const had = contexts.delete(req.drop_context || '');
    return { dropped: req.drop_context ? had : true };
  }
  if (req.agent) {
    return { error: 'processes are not supported in a Node session yet' };
  }
  if ('home' in req) {
    // The working directory and $HOME (an E2B sandbox's /home/user); a
    // path that is not a directory changes nothing.
    try {
      if (fs.statSync(req.home).isDirectory()) {
        process.chdir(req.home);
        process.env.HOME = req.home;
      }
    } catch (_) { /* no such directory: the workspace stays */ }
    return { home: process.cwd() };
  }
  if (req.snapshot || req.restore) {
    return { error: 'fork and park are for Python sessions' };
  }
  if (req.fence) return marked(req, {});
  const rep = {};
  if (req.setup) {
    rep.count = context('').count;
    return setup(req.preimport).then((s) => { rep.skipped = s; }, (e) => { rep.exception = exception(e); })
      .then(() => marked(req, rep));
  }
  const c = context(req.context || '');
  const n = ++c.count;
  rep.count = n;
  return cell(req, c, n, rep);
}

// Runs the cell req as cell n of context c: the reply rep, or a promise
// of it.
function cell(req, c, n, rep) {
  if ('allowed_imports' in req) allowed = req.allowed_imports || [];
  const saved = new Map();
  for (const k of Object.keys(req.env || {})) {
    saved.set(k, process.env[k]);
    process.env[k] = req.env[k];
  }
  const t0 = process.hrtime.bigint();
  const end = (e) => {
    if (e !== undefined) rep.exception = exception(e);
    restoreEnv(saved);
    rep.elapsed_us = Number((process.hrtime.bigint() - t0) / 1000n);
    return marked(req, rep);
  };
  // A cell that settled a promise may have rejected one nobody handles:
  // node reports it (unhandledRejection, on stderr) only once the tick's
  // microtasks are done, which may be after the answer and its end marker,
  // where nothing would take it. Such a cell answers a turn later.
  let settled = false;
  const unhook = promiseHooks.onSettled(() => { settled = true; });
  let p;
  try {
    p = runCell(req, c, n, rep);
  } catch (e) {
    unhook();
    return end(e);
  }
  if (p === undefined) {
    unhook();
    return settled ? nextTurn(end) : end();
  }
  return p.then(() => { unhook(); return nextTurn(end); }, (e) => { unhook(); return nextTurn(() => end(e)); });
}

// nextTurn calls f once the event loop has turned (after the current
// tick's microtasks and promise rejections): a promise of its result.
function nextTurn(f) {
  return new Promise((resolve) => setImmediate(() => resolve(f())));
}

// Writes the request's end marker on stdout and stderr; returns rep.
function marked(req, rep) {
  for (const fd of GUEST === undefined ? [1, 2] : [2]) {
    try { writeAll(fd, req.marker); } catch (_) { rep.unmarked = true; }
  }
  return rep;
}

// ---- the control socket ----

// onread hands each read to onData straight from the socket's handle,
// without the Readable stream's machinery (its code is cold in an idle
// runner: ~0.1 ms of a pooled run's cell, with the direct write in send
// and handle's synchronous path).
const ctlBuf = Buffer.allocUnsafe(65536);
const ctl = new net.Socket({ fd: CTL, readable: true, writable: GUEST === undefined, onread: { buffer: ctlBuf, callback: (n, b) => { onData(Buffer.from(b.subarray(0, n))); } } });
let buf = Buffer.alloc(0);
let skip = 0; // bytes to drop: the one that carries an agent's fd
let busy = false;

function send(obj) {
  if (GUEST !== undefined) {
    // One write: nothing the cell left queued comes between the marker
    // and its reply.
    try { writeAll(1, replyMarker + JSON.stringify(obj) + '\n'); } catch (_) { realExit(0); }
    return;
  }
  const b = Buffer.from(JSON.stringify(obj));
  const h = Buffer.alloc(4);
  h.writeUInt32BE(b.length);
  const f = Buffer.concat([h, b]);
  // Straight to the socket when nothing is queued (the usual case); what
  // it does not take now goes through the stream, after.
  let off = 0;
  if (ctl.writableLength === 0) {
    try {
      while (off < f.length) off += fs.writeSync(CTL, f, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') realExit(0);
    }
  }
  if (off < f.length) ctl.write(off ? f.subarray(off) : f);
}

async function pump() {
  if (busy) return;
  busy = true;
  try {
    for (;;) {
      if (skip > 0 && buf.length > 0) {
        const k = Math.min(skip, buf.length);
        buf = buf.subarray(k);
        skip -= k;
      }
      if (skip > 0 || buf.length < 4) break;
      const n = buf.readUInt32BE(0);
      if (buf.length < 4 + n) break;
      let req;
      try {
        req = JSON.parse(buf.subarray(4, 4 + n).toString());
      } catch (e) {
        fs.writeSync(2, 'nsbox runner: bad frame: ' + e.message + '\n');
        realExit(2);
      }
      buf = buf.subarray(4 + n);
      replyMarker = req.marker || '';
      if (req.agent || req.snapshot || req.restore) skip = 1;
      let rep;
      try {
        rep = handle(req);
        if (rep instanceof Promise) rep = await rep;
      } catch (e) {
        rep = { error: 'runner: ' + describe(e) };
      }
      send(rep);
    }
  } finally {
    busy = false;
  }
}

function onData(d) { buf = buf.length ? Buffer.concat([buf, d]) : d; pump(); }
ctl.on('end', () => realExit(0));
ctl.on('error', () => realExit(0));
send({ ready: true, pid: process.pid });
})
