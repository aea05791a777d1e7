// The SDK side of `nsbox bench --only e2b`: Sandbox.create() and
// runCode("x += 1") round trips through the unmodified
// @e2b/code-interpreter SDK, timed here in the client as an agent sees
// them. Usage: node bench.mjs SANDBOXES CELLS (E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY set). Prints one JSON line: {"create_ms": [...],
// "run_code_ms": [...]}. The first cell of each sandbox ("x = 0") and the
// kill are not timed, nor one warm-up sandbox.
import { performance } from "node:perf_hooks";
import { Sandbox } from "@e2b/code-interpreter";

const [sandboxes, cells] = process.argv.slice(2).map(Number);
const out = { create_ms: [], run_code_ms: [] };
// One untimed round first: node's first request pays for its connection
// and its JIT, which an agent that keeps its process pays once.
{
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  await sbx.runCode("x = 0");
  await sbx.kill();
}
for (let i = 0; i < sandboxes; i++) {
  let t0 = performance.now();
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  out.create_ms.push(performance.now() - t0);
  try {
    await sbx.runCode("x = 0");
    for (let j = 0; j < cells; j++) {
      t0 = performance.now();
      const e = await sbx.runCode("x += 1");
      out.run_code_ms.push(performance.now() - t0);
      if (e.error) throw new Error(`${e.error.name}: ${e.error.value}`);
    }
  } finally {
    await sbx.kill();
  }
}
console.log(JSON.stringify(out));
