// The control plane through e2b's Sandbox: create, getInfo, connect,
// list (metadata and state filters), kill, setTimeout, a sandbox that ends
// at its timeout, metrics, env vars at create (pause and resume:
// pause.test.mjs).
import assert from "node:assert/strict";
import { test } from "node:test";
import { NotFoundError, RateLimitError, Sandbox, SandboxError } from "e2b";
import { RUN, create, eventually, listAll, sleep } from "./lib.mjs";

test("create, getInfo, connect and isRunning", { timeout: 60_000 }, async (t) => {
  const before = Date.now();
  const sbx = await create(t, Sandbox, { timeoutMs: 60_000, metadata: { purpose: "info" } });
  assert.match(sbx.sandboxId, /^[A-Za-z0-9_-]+$/, "a sandbox id usable in a PORT-ID.HOST name");

  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.equal(typeof info.templateId, "string");
  assert.deepEqual(info.metadata, { run: RUN, purpose: "info" });
  assert.equal(info.state, "running");
  assert.ok(info.startedAt.getTime() >= before - 5_000 && info.startedAt.getTime() <= Date.now() + 5_000, `startedAt ${info.startedAt.toISOString()}`);
  const ttl = info.endAt.getTime() - info.startedAt.getTime();
  assert.ok(ttl > 50_000 && ttl < 70_000, `endAt - startedAt = ${ttl} ms, want about the 60 s timeout`);
  assert.equal(typeof info.envdVersion, "string");

  const same = await Sandbox.getInfo(sbx.sandboxId);
  assert.equal(same.sandboxId, sbx.sandboxId);
  assert.deepEqual(same.metadata, info.metadata);

  assert.equal(await sbx.isRunning(), true);

  // connect returns a handle with its own access token that drives the
  // same sandbox.
  await sbx.files.write("/home/user/connect.txt", "seen through connect");
  const again = await Sandbox.connect(sbx.sandboxId);
  assert.equal(again.sandboxId, sbx.sandboxId);
  const r = await again.commands.run("cat /home/user/connect.txt");
  assert.equal(r.stdout, "seen through connect");
});

test("list filters by metadata and state", { timeout: 60_000 }, async (t) => {
  const tag = `list-${Date.now()}`;
  const a = await create(t, Sandbox, { metadata: { tag, idx: "a" } });
  const b = await create(t, Sandbox, { metadata: { tag, idx: "b" } });
  const other = await create(t, Sandbox, { metadata: { tag: `${tag}-other` } });

  const mine = await listAll(Sandbox.list({ query: { metadata: { run: RUN, tag } } }));
  assert.deepEqual(mine.map((s) => s.sandboxId).sort(), [a.sandboxId, b.sandboxId].sort(), "metadata filter");
  for (const s of mine) {
    assert.equal(s.state, "running");
    assert.equal(s.metadata.tag, tag);
    assert.ok(s.endAt > s.startedAt);
  }

  const one = await listAll(Sandbox.list({ query: { metadata: { tag, idx: "b" } } }));
  assert.deepEqual(one.map((s) => s.sandboxId), [b.sandboxId], "every metadata pair must match");

  const running = await listAll(Sandbox.list({ query: { state: ["running"], metadata: { run: RUN } } }));
  const ids = running.map((s) => s.sandboxId);
  for (const s of [a, b, other]) assert.ok(ids.includes(s.sandboxId), `running list lacks ${s.sandboxId}`);

  const paused = await listAll(Sandbox.list({ query: { state: ["paused"], metadata: { run: RUN } } }));
  assert.deepEqual(paused, [], "no sandbox is paused");

  const all = await listAll(Sandbox.list());
  for (const s of [a, b, other]) assert.ok(all.some((x) => x.sandboxId === s.sandboxId), `unfiltered list lacks ${s.sandboxId}`);
});

test("list pages with limit, newest first unless order is asc", { timeout: 60_000 }, async (t) => {
  const tag = `pages-${Date.now()}`;
  const made = [];
  for (let i = 0; i < 3; i++) made.push((await create(t, Sandbox, { metadata: { tag } })).sandboxId);
  const query = { metadata: { run: RUN, tag } };

  for (const [order, want] of [[undefined, [...made].reverse()], ["asc", made]]) {
    const p = Sandbox.list({ limit: 1, query, order });
    const pages = [];
    while (p.hasNext) {
      const items = await p.nextItems();
      pages.push(items.map((s) => s.sandboxId));
      assert.equal(p.hasNext, pages.length < 3, `order ${order}: hasNext after page ${pages.length}`);
      assert.equal(p.nextToken === undefined, pages.length === 3, `order ${order}: nextToken after page ${pages.length}`);
      assert.ok(pages.length <= 3, "more pages than sandboxes");
    }
    assert.deepEqual(pages, want.map((id) => [id]), `order ${order}: one sandbox a page, in start order`);
  }

  // A token is the next page's, as E2B's: a paginator made from it goes on.
  const first = Sandbox.list({ limit: 2, query });
  assert.deepEqual((await first.nextItems()).map((s) => s.sandboxId), [made[2], made[1]]);
  const rest = await Sandbox.list({ limit: 2, query, nextToken: first.nextToken }).nextItems();
  assert.deepEqual(rest.map((s) => s.sandboxId), [made[0]]);
});

test("kill ends the sandbox", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  await sbx.commands.run("true");
  assert.equal(await sbx.kill(), true);

  await assert.rejects(sbx.getInfo(), NotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false, "a second kill finds nothing");
  const left = await listAll(Sandbox.list({ query: { metadata: { run: RUN } } }));
  assert.ok(!left.some((s) => s.sandboxId === sbx.sandboxId), "a killed sandbox is not listed");
  // The SDK reads 502 from /health as "not running".
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.commands.run("true"));
});

test("an unknown sandbox is NotFoundError", { timeout: 30_000 }, async () => {
  await assert.rejects(Sandbox.getInfo("nsbox-no-such-sandbox"), NotFoundError);
  await assert.rejects(Sandbox.connect("nsbox-no-such-sandbox"), NotFoundError);
  await assert.rejects(Sandbox.setTimeout("nsbox-no-such-sandbox", 10_000), NotFoundError);
  assert.equal(await Sandbox.kill("nsbox-no-such-sandbox"), false);
});

test("an unknown template is refused", { timeout: 30_000 }, async (t) => {
  await assert.rejects(async () => {
    const sbx = await Sandbox.create("nsbox-no-such-template", { timeoutMs: 10_000 });
    t.after(() => sbx.kill().catch(() => {}));
  }, SandboxError);
});

test("setTimeout moves the sandbox's end", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { timeoutMs: 30_000 });
  await sbx.setTimeout(300_000);
  let info = await sbx.getInfo();
  let left = info.endAt.getTime() - Date.now();
  assert.ok(left > 280_000 && left < 320_000, `after setTimeout(300 s) the sandbox ends in ${left} ms`);

  await sbx.setTimeout(2_000);
  info = await sbx.getInfo();
  left = info.endAt.getTime() - Date.now();
  assert.ok(left < 5_000, `after setTimeout(2 s) the sandbox ends in ${left} ms`);
  await eventually(() => assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError), 20_000);
});

test("connect to a running sandbox extends its timeout, never shortens it", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { timeoutMs: 600_000 });
  const before = (await sbx.getInfo()).endAt.getTime();
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 10_000 });
  const after = (await sbx.getInfo()).endAt.getTime();
  assert.ok(after >= before, `a shorter timeout moved the end ${before - after} ms earlier`);
  await Sandbox.connect(sbx.sandboxId, { timeoutMs: 1_200_000 });
  const longer = (await sbx.getInfo()).endAt.getTime();
  assert.ok(longer > after, "a longer timeout extends it");
});

test("a sandbox ends at its timeout", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { timeoutMs: 3_000 });
  const bg = await sbx.commands.run("sleep 1000", { background: true });
  assert.ok(bg.pid > 0);
  assert.equal(await sbx.isRunning(), true);
  await sleep(3_000);
  await eventually(async () => {
    await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError);
    await assert.rejects(Sandbox.connect(sbx.sandboxId), NotFoundError);
  }, 20_000);
  const left = await listAll(Sandbox.list({ query: { metadata: { run: RUN } } }));
  assert.ok(!left.some((s) => s.sandboxId === sbx.sandboxId), "an expired sandbox is not listed");
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.commands.run("true"), "the expired sandbox's handle is dead");
  assert.equal(await sbx.kill(), false, "nothing left to kill");
});

test("create passes env vars to every command", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox, { envs: { NSBOX_E2B_A: "alpha", NSBOX_E2B_B: "two words" } });
  const r = await sbx.commands.run('printf "%s|%s" "$NSBOX_E2B_A" "$NSBOX_E2B_B"');
  assert.equal(r.stdout, "alpha|two words");
});

test("getMetrics answers a list of samples", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const metrics = await sbx.getMetrics();
  assert.ok(Array.isArray(metrics));
  for (const m of metrics) {
    assert.ok(m.timestamp instanceof Date && !Number.isNaN(m.timestamp.getTime()));
    for (const k of ["cpuUsedPct", "cpuCount", "memUsed", "memTotal"]) assert.equal(typeof m[k], "number", k);
  }
});

test("getMetrics({start, end}) answers the present for a range that reaches it, nothing for a past one", { timeout: 60_000 }, async (t) => {
  const sbx = await create(t, Sandbox);
  const start = new Date(Date.now() - 60_000);
  const end = new Date();
  const now = await sbx.getMetrics({ start, end });
  assert.equal(now.length, 1);
  assert.ok(now[0].timestamp >= start && now[0].timestamp.getTime() <= end.getTime() + 10_000, `${now[0].timestamp} in the range`);
  const past = await sbx.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) });
  assert.deepEqual(past, []);
});

test("a flood of creates past [sessions] max gets RateLimitError and leaves the rest working", { timeout: 120_000 }, async (t) => {
  // The daemon holds at most 16 sessions; 24 creates at once. A refusal is
  // answered at once (429); the request timeout is only a bound for a hang,
  // long enough for 16 creates on a busy two-core machine, so that a slow
  // create is never mistaken for a refused one.
  const results = await Promise.allSettled(Array.from({ length: 24 }, () =>
    Sandbox.create({ timeoutMs: 60_000, requestTimeoutMs: 60_000, metadata: { run: RUN, flood: "1" } })));
  const made = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  t.after(() => Promise.all(made.map((s) => s.kill().catch(() => {}))));
  const refused = results.filter((r) => r.status === "rejected");
  assert.ok(made.length > 0 && made.length <= 16, `${made.length} created`);
  assert.ok(refused.length >= 8, `${refused.length} refused`);
  for (const r of refused) {
    assert.ok(r.reason instanceof RateLimitError, `a refused create: ${r.reason}`);
  }
  // Those made work, and once they are gone a new one can be made.
  assert.equal((await made[0].commands.run("echo ok")).stdout, "ok\n");
  await Promise.all(made.map((s) => s.kill()));
  made.length = 0;
  const again = await create(t, Sandbox);
  assert.equal((await again.commands.run("echo again")).stdout, "again\n");
});
