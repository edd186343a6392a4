// The consolidation methods against the local stack: a store whose language model and
// embeddings are the scripted provider on loopback (`KIVIDB_PROVIDER_URL`,
// tools/scripted_model.py, whose plan rule merges what states the same fact), runs kept for
// review. A run is read, applied and reverted; a proposal discarded; a version restored.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { ConflictError, MemoryClient, NotFoundError } from "../dist/index.js";

const TEA = "The user loves green tea every morning.";
const TEA_AGAIN = "The user loves green tea every single morning.";
const HIKING = "The user goes hiking in the Alps each summer.";

const client = new MemoryClient();
const name = `ts-con-${randomUUID().slice(0, 8)}`;
const store = client.store("local", name);

before(async () => {
  const provider = process.env.KIVIDB_PROVIDER_URL;
  assert.ok(provider, "KIVIDB_PROVIDER_URL: the scripted provider's /v1 URL");
  await client.putStore("local", name, {
    llm_provider: "custom", llm_model: "scripted", llm_base_url: provider,
    embed_provider: "custom", embed_model: "scripted", embed_base_url: provider,
    dimensions: 384, dedupe_threshold: 0.999, consolidation_mode: "review",
  });
});

after(async () => {
  await client.deleteStore("local", name);
});

async function finished(runId) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const run = await store.getConsolidation(runId);
    if (!["queued", "running"].includes(run.status)) return run;
    assert.ok(Date.now() < deadline, `run ${runId} still ${run.status}`);
    await sleep(250);
  }
}

async function current(actorId) {
  const page = await store.listMemories({ actorId, limit: 100 });
  return Object.fromEntries(page.memories.map((m) => [m.id, m.text]));
}

describe("consolidation", () => {
  test("a reviewed run is read, applied and reverted", async () => {
    const a = (await store.addMemory(TEA, { actorId: "ann" })).id;
    const b = (await store.addMemory(TEA_AGAIN, { actorId: "ann" })).id;
    const c = (await store.addMemory(HIKING, { actorId: "ann" })).id;
    const queued = await store.consolidate("ann");
    assert.equal(queued.status, "queued");
    const run = await finished(queued.consolidation_id);
    assert.equal(run.status, "proposed");
    assert.equal(run.steps.length, 1);
    const [step] = run.steps;
    assert.equal(step.action, "merge");
    assert.deepEqual(step.before.map((m) => m.id), [a, b]);
    assert.equal(step.after.text, TEA_AGAIN);
    assert.deepEqual(await current("ann"), { [a]: TEA, [b]: TEA_AGAIN, [c]: HIKING });

    const listed = await store.listConsolidations({ actorId: "ann", status: ["proposed", "failed"] });
    assert.deepEqual(listed.consolidations.map((r) => r.consolidation_id), [run.consolidation_id]);
    assert.equal((await store.listConsolidations({ actorId: "ann", status: "applied" })).consolidations.length, 0);

    const applied = await store.applyConsolidation(run.consolidation_id);
    assert.equal(applied.status, "applied");
    const merged = applied.steps[0].after.id;
    assert.deepEqual(await current("ann"), { [merged]: TEA_AGAIN, [c]: HIKING });
    await assert.rejects(store.applyConsolidation(run.consolidation_id), ConflictError);

    const reverted = await store.revertConsolidation(run.consolidation_id);
    assert.equal(reverted.status, "reverted");
    assert.deepEqual(new Set(Object.values(await current("ann"))), new Set([TEA, TEA_AGAIN, HIKING]));
    assert.ok(!(merged in (await current("ann"))));
  });

  test("a discarded proposal changes nothing; a replaced version is restored", async () => {
    const a = (await store.addMemory(TEA, { actorId: "bo" })).id;
    const b = (await store.addMemory(TEA_AGAIN, { actorId: "bo" })).id;
    const run = await finished((await store.consolidate("bo")).consolidation_id);
    const discarded = await store.discardConsolidation(run.consolidation_id);
    assert.equal(discarded.status, "discarded");
    assert.deepEqual(await current("bo"), { [a]: TEA, [b]: TEA_AGAIN });
    await assert.rejects(store.discardConsolidation(run.consolidation_id), ConflictError);

    const newer = await store.addMemory("The user loves black tea every morning.", { actorId: "bo", supersedes: a });
    await assert.rejects(store.restoreMemory(newer.id), ConflictError);
    const restored = await store.restoreMemory(a);
    assert.equal(restored.text, TEA);
    assert.equal(restored.source.restored_from, a);
    assert.deepEqual(await current("bo"), { [restored.id]: TEA, [b]: TEA_AGAIN });
    await assert.rejects(store.getConsolidation("con_00000000000000000000"), NotFoundError);
  });
});
