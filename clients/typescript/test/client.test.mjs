// The TypeScript client against the real API: the local stack `make test` starts
// (tests/e2e/test_typescript_client.py runs this file with KIVIDB_API_URL and KIVIDB_API_KEY).
// Every method is called, and the API's errors come back typed, with their details.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import {
  ApiError,
  AuthenticationError,
  ConflictError,
  MemoryClient,
  NotFoundError,
  PermissionDeniedError,
  ValidationError,
} from "../dist/index.js";

const client = new MemoryClient(); // KIVIDB_API_URL and KIVIDB_API_KEY
const name = `ts-${randomUUID().slice(0, 12)}`;
const store = client.store("local", name);

before(async () => {
  const made = await client.putStore("local", name, { dimensions: 3, dedupe_threshold: 0.99 });
  assert.equal(made.name, name);
  assert.equal(made.dimensions, 3);
});

after(async () => {
  await client.deleteStore("local", name);
});

describe("stores", () => {
  test("listed, read and changed", async () => {
    const all = await client.listStores();
    assert.ok(all.stores.some((s) => s.name === name && s.instance_id === "local"));
    const one = await client.listStores("local");
    assert.ok(one.stores.some((s) => s.name === name));
    const changed = await client.putStore("local", name, { summarize_after: 20 });
    assert.equal(changed.summarize_after, 20);
    const read = await client.getStore("local", name);
    assert.equal(read.counts?.sessions, 0);
  });
});

describe("working memory", () => {
  test("events, recall, sessions, pop, export and import", async () => {
    const added = await store.addEvents(
      "s1",
      [
        { role: "user", content: "I prefer green tea" },
        { role: "assistant", content: "Noted." },
      ],
      { actorId: "ann" },
    );
    assert.deepEqual(added, { session_id: "s1", added: 2, message_count: 2 });
    const again = await store.addEvents("s1", [{ role: "user", content: "and biscuits" }], {
      actorId: "ann",
      idempotencyKey: "ts-once-1",
    });
    const replayed = await store.addEvents("s1", [{ role: "user", content: "and biscuits" }], {
      actorId: "ann",
      idempotencyKey: "ts-once-1",
    });
    assert.deepEqual(replayed, again); // the first answer, written once
    const recalled = await store.recall("s1", { actorId: "ann" });
    assert.equal(recalled.messages.length, 3);
    assert.match(recalled.context, /green tea/);
    const listed = await store.listSessions({ limit: 10 });
    assert.deepEqual(listed.sessions.map((s) => s.session_id), ["s1"]);
    const session = await store.getSession("s1", { recent: 2 });
    assert.equal(session.messages.length, 2);
    const popped = await store.popMessage("s1");
    assert.equal(popped.message?.content, "and biscuits");
    const ids = await store.exportSessionIds();
    assert.deepEqual(ids.session_ids, ["s1"]);
    const exported = await store.exportSession("s1");
    assert.equal(exported.messages.length, 2);
    const imported = await store.importSession("s2", exported); // as exported, fields it has no place for left out
    assert.equal(imported.message_count, 2);
    await store.deleteSession("s2");
    await assert.rejects(store.getSession("s2"), NotFoundError);
  });

  test("extraction without a language model is a conflict", async () => {
    await assert.rejects(store.extract("s1"), (error) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.status, 409);
      return true;
    });
  });
});

describe("long-term memory", () => {
  test("add, duplicate, supersede, list, search, patch, get and forget", async () => {
    const tea = await store.addMemory("Ann likes green tea", { actorId: "ann", vector: [1, 0, 0], topics: ["drinks"] });
    assert.equal(tea.duplicate, false);
    const same = await store.addMemory("Ann likes green tea", { actorId: "ann", vector: [1, 0, 0] });
    assert.equal(same.duplicate, true);
    assert.equal(same.id, tea.id);
    const coffee = await store.addMemory("Ann likes coffee now", { actorId: "ann", vector: [0, 1, 0], supersedes: tea.id });
    assert.equal(coffee.supersedes, tea.id);
    const listed = await store.listMemories({ actorId: "ann", includeSuperseded: true });
    assert.deepEqual(new Set(listed.memories.map((m) => m.id)), new Set([tea.id, coffee.id]));
    const byTopic = await store.listMemories({ actorId: "ann", topics: ["drinks"], includeSuperseded: true });
    // dates as Date objects or ISO text
    const since = await store.listMemories({ actorId: "ann", includeSuperseded: true, createdAfter: new Date(Date.now() + 60_000) });
    assert.equal(since.memories.length, 0);
    const then = await store.listMemories({ actorId: "ann", asOf: new Date(Date.now() - 3_600_000) });
    assert.equal(then.memories.length, 0);
    assert.deepEqual(byTopic.memories.map((m) => m.id), [tea.id]);
    const found = await store.search("coffee", { mode: "keyword", actorId: "ann" });
    assert.equal(found.memories[0]?.id, coffee.id);
    const byVector = await store.search("what does Ann drink", { mode: "semantic", queryVector: [0, 1, 0], actorId: "ann" });
    assert.equal(byVector.memories[0]?.id, coffee.id);
    const patched = await store.updateMemory(coffee.id, { importance: 0.9 });
    assert.equal(patched.importance, 0.9);
    const read = await store.getMemory(coffee.id);
    assert.equal(read.versions?.length, 1);
    await store.deleteMemory(coffee.id);
    await assert.rejects(store.getMemory(coffee.id), NotFoundError);
    await store.addMemory("Bob plays chess", { actorId: "bob", vector: [0, 0, 1] });
    const forgotten = await store.forgetActor("bob");
    assert.equal(forgotten.deleted, 1);
    await store.addMemory("Cy keeps bees", { actorId: "cy", vector: [0, 0, 1] });
    const page = await store.exportMemories();
    assert.equal(page.memories.length, 1); // the deleted chain and the forgotten actor are gone
    const result = await store.importMemories(page.memories); // written again, the same
    assert.equal(result.imported, 1);
  });

  test("profiles: changed, read, their history, exported and imported", async () => {
    await client.putStore("local", name, {
      profile_fields: [
        { name: "city", description: "Where the user lives" },
        { name: "pets", description: "The user's pets", type: "list" },
      ],
    });
    await store.updateProfile("dee", { city: "Porto", pets: ["Rex"] });
    const changed = await store.updateProfile("dee", { city: "Braga" });
    assert.equal(changed.fields.city.value, "Braga");
    assert.equal(changed.fields.city.source.by, "caller");
    assert.deepEqual((await store.getProfile("dee")).fields.pets.value, ["Rex"]);
    const history = await store.profileHistory("dee", "city");
    assert.deepEqual(history.versions.map((v) => v.value), ["Braga", "Porto"]);
    await assert.rejects(store.updateProfile("dee", { shoe: 42 }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.ok(error.details.some((d) => d.field === "fields.shoe"));
      return true;
    });
    const page = await store.exportProfiles({ limit: 10 });
    const dee = page.profiles.find((p) => p.actor_id === "dee");
    assert.deepEqual(dee.history.city.map((v) => v.value), ["Braga", "Porto"]);
    const imported = await store.importProfiles([{ ...dee, actor_id: "dee-again" }]);
    assert.equal(imported.imported, 1);
    const again = await store.profileHistory("dee-again", "city");
    assert.deepEqual(again.versions, history.versions);
  });

  test("keyed memories", async () => {
    const kept = await store.putKeyedMemory(["users", "ann"], "theme", { color: "dark" });
    assert.deepEqual(kept.value, { color: "dark" });
    const read = await store.getKeyedMemory(["users", "ann"], "theme");
    assert.deepEqual(read.value, { color: "dark" });
    const found = await store.searchKeyedMemories(["users"], { filter: { color: "dark" } });
    assert.equal(found.items.length, 1);
    const spaces = await store.listKeyedNamespaces({ prefix: ["users"] });
    assert.deepEqual(spaces.namespaces, [["users", "ann"]]);
    await store.deleteKeyedMemory(["users", "ann"], "theme");
    await assert.rejects(store.getKeyedMemory(["users", "ann"], "theme"), NotFoundError);
    await assert.rejects(store.getKeyedMemory(["a.b"], "k"), TypeError); // a label with a dot: refused before any call
  });
});

describe("keys, usage and webhooks", () => {
  test("a read-only key reads and cannot write; usage counts; a secret is shown once", async () => {
    const made = await client.createKey("read", { stores: [{ instance_id: "local", store: name }], name: "ts reader" });
    assert.match(made.api_key, /^kvm_/);
    const keys = await client.listKeys();
    assert.ok(keys.keys.some((k) => k.key_id === made.key_id && k.access === "read"));
    const reader = new MemoryClient({ baseUrl: process.env.KIVIDB_API_URL, apiKey: made.api_key });
    const recalled = await reader.store("local", name).recall("s1", { actorId: "ann" });
    assert.equal(recalled.session_id, "s1");
    await assert.rejects(reader.store("local", name).addMemory("x", { vector: [1, 0, 0] }), PermissionDeniedError);
    await client.deleteKey(made.key_id);
    await assert.rejects(reader.listStores(), AuthenticationError);
    const usage = await store.usage();
    assert.equal(usage.days.length, 30);
    assert.ok(usage.days.at(-1).messages_added >= 3);
    const today = new Date();
    const org = await client.organizationUsage(today, today);
    assert.equal(org.days.length, 1);
    await client.putStore("local", name, { webhooks: [{ url: "https://hooks.example.com/in", events: ["memory.deleted"] }] });
    const secret = await store.rotateWebhookSecret();
    assert.match(secret.secret, /^whsec_/);
    const deliveries = await store.webhookDeliveries();
    assert.deepEqual(deliveries.deliveries, []);
    await client.putStore("local", name, { webhooks: null });
  });
});

describe("errors", () => {
  test("422 names each field; 404 has the API's code; no key anywhere", async () => {
    await assert.rejects(store.addMemory("", { vector: [1, 0, 0] }), (error) => {
      assert.ok(error instanceof ValidationError);
      assert.equal(error.code, "validation_error");
      assert.equal(error.details[0].field, "text");
      return true;
    });
    await assert.rejects(client.store("local", "no-such-store-ts").recall("s"), (error) => {
      assert.ok(error instanceof NotFoundError && error instanceof ApiError);
      assert.equal(error.code, "store_not_found");
      const shown = `${error.message} ${error.stack} ${JSON.stringify(error)}`;
      assert.ok(!shown.includes(process.env.KIVIDB_API_KEY));
      return true;
    });
    assert.ok(!String(client).includes(process.env.KIVIDB_API_KEY));
    assert.ok(!JSON.stringify(client).includes(process.env.KIVIDB_API_KEY));
  });

  test("an aborted call says so", async () => {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(client.listStores(undefined, { signal: controller.signal }), (error) => {
      assert.equal(error.aborted, true);
      return true;
    });
  });
});
