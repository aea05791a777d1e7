// One side of TestE2BPausedAcrossRestart (restart_test.go), not a
// node:test file: "pause" makes a code sandbox with a file and a
// variable, pauses it and prints its id; "resume ID", after the daemon's
// restart, checks that another key cannot reach it, connects, finds the
// file and the variable, runs a command and kills it.
import assert from "node:assert/strict";
import { Sandbox } from "@e2b/code-interpreter";
import { NotFoundError } from "e2b";

const [phase, id] = process.argv.slice(2);
const other = process.env.NSBOX_E2B_OTHER_KEY;

if (phase === "pause") {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  await sbx.files.write("/home/user/kept.txt", "kept across a restart");
  const ex = await sbx.runCode("x = 41");
  assert.equal(ex.error, undefined);
  assert.equal(await sbx.pause(), true);
  console.log(sbx.sandboxId);
} else if (phase === "resume") {
  assert.equal((await Sandbox.getInfo(id)).state, "paused");
  await assert.rejects(Sandbox.connect(id, { apiKey: other }), NotFoundError);
  await assert.rejects(Sandbox.getInfo(id, { apiKey: other }), NotFoundError);
  const sbx = await Sandbox.connect(id, { timeoutMs: 60_000 });
  assert.equal((await sbx.getInfo()).state, "running");
  assert.equal(await sbx.files.read("/home/user/kept.txt"), "kept across a restart");
  const ex = await sbx.runCode("x + 1");
  assert.equal(ex.error, undefined, `${ex.error?.name}: ${ex.error?.value}`);
  assert.equal(ex.text, "42");
  assert.equal((await sbx.commands.run("echo back")).stdout, "back\n");
  assert.equal(await sbx.kill(), true);
  console.log("resumed");
} else {
  throw new Error(`phase ${phase}: want pause or resume ID`);
}
