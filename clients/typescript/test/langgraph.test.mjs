// `@kividb/memory/langgraph` under LangGraph.js itself: a `StateGraph` compiled with the store
// (nodes reach it as `config.store`), and the prebuilt `createReactAgent` whose tools reach it
// through `getStore()`, on LangChain's own test double for models, `FakeStreamingChatModel`
// (`@langchain/core/utils/testing`). Then the `BaseStore` contract as LangGraph.js's stores keep it
// (their tests: libs/checkpoint/src/tests/store.test.ts and the Redis store's, which are not
// published to npm; docs/integrations.md says what was run of them): puts, gets, deletes, batches
// in order, filters, paging, vector search with an `IndexConfig`, namespaces, invalid labels.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { AIMessage, AIMessageChunk } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { Annotation, getStore, StateGraph } from "@langchain/langgraph";
import { InvalidNamespaceError } from "@langchain/langgraph-checkpoint";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

import { MemoryClient } from "../dist/index.js";
import { apiFilter, KiviDBStore } from "../dist/langgraph.js";
import { scriptedStore } from "./support.mjs";

const { client, store } = scriptedStore("ts-langgraph");
const kivi = () => new KiviDBStore({ store });
const run = () => `r${randomUUID().slice(0, 8)}`;

test("a StateGraph's nodes keep and find a user's preference through config.store", async () => {
  const user = run();
  const State = Annotation.Root({ text: Annotation(), found: Annotation() });
  const graph = new StateGraph(State)
    .addNode("remember", async (state, config) => {
      await config.store.put([user, "preferences"], "theme", { color: state.text });
      return {};
    })
    .addNode("recall", async (_state, config) => {
      const items = await config.store.search([user], { filter: { color: "dark" } });
      return { found: items.map((i) => `${i.namespace.join("/")}:${i.key}=${i.value.color}`) };
    })
    .addEdge("__start__", "remember")
    .addEdge("remember", "recall")
    .compile({ store: kivi() });
  const out = await graph.invoke({ text: "dark" });
  assert.deepEqual(out.found, [`${user}/preferences:theme=dark`]);
  // kept in the store, as any other client reads it
  const kept = await store.getKeyedMemory([user, "preferences"], "theme");
  assert.deepEqual(kept.value, { color: "dark" });
});

test("createReactAgent's tools keep and read memories through getStore(), the model LangChain's FakeStreamingChatModel", async () => {
  const user = run();
  const remember = tool(
    async ({ fact }) => {
      await getStore().put([user, "memories"], "fact-1", { text: fact });
      return `kept: ${fact}`;
    },
    { name: "remember", description: "Keep a fact", schema: z.object({ fact: z.string() }), returnDirect: true },
  );
  const recallTool = tool(
    async ({ query }) => {
      const items = await getStore().search([user, "memories"], { query, limit: 3 });
      return items.map((i) => i.value.text).join("; ") || "nothing";
    },
    { name: "recall", description: "Find facts", schema: z.object({ query: z.string() }), returnDirect: true },
  );
  const calling = (name, args) =>
    new FakeStreamingChatModel({ chunks: [new AIMessageChunk({ content: "", tool_calls: [{ id: `call_${name}`, name, args }] })] });

  const writer = createReactAgent({ llm: calling("remember", { fact: "Ann lives in Porto" }), tools: [remember, recallTool], store: kivi() });
  const first = await writer.invoke({ messages: [{ role: "user", content: "I live in Porto" }] });
  assert.equal(first.messages.at(-1).content, "kept: Ann lives in Porto");

  const reader = createReactAgent({ llm: calling("recall", { query: "Porto" }), tools: [remember, recallTool], store: kivi() });
  const second = await reader.invoke({ messages: [{ role: "user", content: "Where do I live?" }] });
  assert.equal(second.messages.at(-1).content, "Ann lives in Porto");
  // the model double was called once per run, and its tool call ran against the store
  assert.ok(second.messages.some((m) => m instanceof AIMessage && m.tool_calls?.[0]?.name === "recall"));
});

test("put, get, update and delete keep values exactly, with the API's times", async () => {
  const s = kivi();
  const ns = [run(), "documents"];
  const value = { title: "Test", nested: { list: [1, "two", null, { deep: true }] }, "é": "ü ✓" };
  await s.put(ns, "doc1", value);
  const got = await s.get(ns, "doc1");
  assert.deepEqual(got.value, value);
  assert.deepEqual(got.namespace, ns);
  assert.equal(got.key, "doc1");
  assert.ok(got.createdAt instanceof Date && got.updatedAt instanceof Date);
  await new Promise((r) => setTimeout(r, 5));
  await s.put(ns, "doc1", { title: "Updated" });
  const updated = await s.get(ns, "doc1");
  assert.deepEqual(updated.value, { title: "Updated" });
  assert.equal(updated.createdAt.getTime(), got.createdAt.getTime());
  assert.ok(updated.updatedAt >= got.updatedAt);
  await s.delete(ns, "doc1");
  assert.equal(await s.get(ns, "doc1"), null);
  await s.delete(ns, "doc1"); // deleting what is gone is not an error
  assert.equal(await s.get(ns, "never"), null);
});

test("a batch runs its operations in order, each result at its place", async () => {
  const s = kivi();
  const ns = [run()];
  const results = await s.batch([
    { namespace: ns, key: "a", value: { n: 1 } },
    { namespace: ns, key: "a" },
    { namespace: ns, key: "a", value: null },
    { namespace: ns, key: "a" },
    { namespace: ns, key: "b", value: { n: 2 } },
    { namespacePrefix: ns, limit: 10, offset: 0 },
    { matchConditions: [{ matchType: "prefix", path: ns }], limit: 10, offset: 0 },
  ]);
  assert.equal(results[0], null);
  assert.deepEqual(results[1].value, { n: 1 });
  assert.equal(results[3], null);
  assert.deepEqual(results[5].map((i) => i.key), ["b"]);
  assert.deepEqual(results[6], [ns]);
});

test("search filters by value (operators, booleans, nested paths), pages, and takes whole labels as prefix", async () => {
  const s = kivi();
  const root = run();
  const docs = [
    ["a", { color: "red", score: 4.5, ok: true, meta: { lang: "en" } }],
    ["b", { color: "red", score: 3.0, ok: false, meta: { lang: "pt" } }],
    ["c", { color: "green", score: 4.0, ok: true, meta: { lang: "en" } }],
    ["d", { color: "blue", score: 3.5, ok: true }],
  ];
  for (const [key, value] of docs) await s.put([root, "items"], key, value);
  await s.put([`${root}x`, "items"], "z", { color: "red" }); // a label that only starts alike
  const keys = async (options) => (await s.search([root], options)).map((i) => i.key).sort();
  assert.deepEqual(await keys({ filter: { color: "red" } }), ["a", "b"]);
  assert.deepEqual(await keys({ filter: { score: { $gt: 3.5 } } }), ["a", "c"]);
  assert.deepEqual(await keys({ filter: { score: { $gte: 3.5, $lt: 4.5 } } }), ["c", "d"]);
  assert.deepEqual(await keys({ filter: { score: { $ne: 3.0 } } }), ["a", "c", "d"]);
  assert.deepEqual(await keys({ filter: { ok: false } }), ["b"]);
  assert.deepEqual(await keys({ filter: { "meta.lang": "en" } }), ["a", "c"]);
  assert.deepEqual(await keys({ filter: { color: "red", ok: true } }), ["a"]);
  assert.deepEqual(await keys({ filter: { color: "purple" } }), []);
  // NaN and infinities (JSON has neither) mean what they mean for numbers
  assert.deepEqual(await keys({ filter: { score: { $lt: Infinity } } }), ["a", "b", "c", "d"]);
  assert.deepEqual(await keys({ filter: { score: { $eq: NaN } } }), []);
  assert.deepEqual(apiFilter({ score: { $ne: NaN } }), undefined);
  const all = await s.search([root], { limit: 10 });
  assert.equal(all.length, 4);
  const paged = [...(await s.search([root], { limit: 2, offset: 0 })), ...(await s.search([root], { limit: 2, offset: 2 }))];
  assert.deepEqual(paged.map((i) => i.key).sort(), ["a", "b", "c", "d"]);
  assert.deepEqual(await s.search([run()]), []);
});

test("listNamespaces: prefix, suffix, wildcards, depth and paging", async () => {
  const s = kivi();
  const root = run();
  for (const ns of [[root, "b", "c"], [root, "b", "d"], [root, "c", "e"]]) await s.put(ns, "k", { v: 1 });
  assert.deepEqual(await s.listNamespaces({ prefix: [root] }), [[root, "b", "c"], [root, "b", "d"], [root, "c", "e"]]);
  assert.deepEqual(await s.listNamespaces({ prefix: [root], suffix: ["d"] }), [[root, "b", "d"]]);
  assert.deepEqual(await s.listNamespaces({ prefix: [root, "*", "c"] }), [[root, "b", "c"]]);
  assert.deepEqual(await s.listNamespaces({ prefix: [root], maxDepth: 2 }), [[root, "b"], [root, "c"]]);
  assert.deepEqual(await s.listNamespaces({ prefix: [root], limit: 2, offset: 1 }), [[root, "b", "d"], [root, "c", "e"]]);
  assert.deepEqual(await s.listNamespaces({ prefix: ["non", "existent"] }), []);
});

test("invalid namespaces are refused before any op of the batch runs; `langgraph` is a root only through batch", async () => {
  const s = kivi();
  const doc = { foo: "bar" };
  const root = run();
  await assert.rejects(s.put([], "foo", doc), InvalidNamespaceError);
  await assert.rejects(s.put(["the", "thing.about"], "foo", doc), InvalidNamespaceError);
  await assert.rejects(s.put(["some", "fun", ""], "foo", doc), InvalidNamespaceError);
  await assert.rejects(s.put(["langgraph", "foo"], "bar", doc), InvalidNamespaceError);
  await assert.rejects(
    s.batch([{ namespace: [root], key: "first", value: doc }, { namespace: [root, "a.b"], key: "k", value: doc }]),
    InvalidNamespaceError,
  );
  assert.equal(await s.get([root], "first"), null); // the valid op before it did not run
  await s.batch([{ namespace: ["langgraph", root], key: "bar", value: doc }]);
  assert.deepEqual((await s.get(["langgraph", root], "bar")).value, doc);
  await s.delete(["langgraph", root], "bar");
});

test("with an IndexConfig, items are embedded here at their fields and found by meaning, scores the cosine", async () => {
  // a store of 4 dimensions and embeddings of the test's own: four letter counts, normalized
  const name = `ts-lg-vec-${randomUUID().slice(0, 8)}`;
  await client.putStore("local", name, { dimensions: 4 });
  try {
    const embed = (text) => {
      const v = [0, 0, 0, 0];
      for (const ch of text.toLowerCase()) if ("aeio".includes(ch)) v["aeio".indexOf(ch)] += 1;
      const norm = Math.hypot(...v) || 1;
      return v.map((x) => x / norm);
    };
    const embeddings = { embedDocuments: async (texts) => texts.map(embed), embedQuery: async (text) => embed(text) };
    const s = new KiviDBStore({ store: new MemoryClient().store("local", name), index: { dims: 4, embeddings, fields: ["text"] } });
    await s.put(["docs"], "a", { text: "aaaa" });
    await s.put(["docs"], "e", { text: "eeee" });
    await s.put(["docs"], "none", { other: 1 }); // no text at its field: found by filters only
    await s.put(["docs"], "off", { text: "aaaa" }, false);
    const found = await s.search(["docs"], { query: "aaa" });
    assert.equal(found[0].key, "a");
    assert.ok(Math.abs(found[0].score - 1) < 1e-6, String(found[0].score));
    assert.ok(!found.some((i) => i.key === "off" && i.score !== undefined && i.score > 0.99));
    const filtered = await s.search(["docs"], { query: "aaa", filter: { text: "eeee" } });
    assert.deepEqual(filtered.map((i) => i.key), ["e"]);
    await s.put(["docs"], "e", { text: "aaae" }); // the vectors follow the new value
    const again = await s.search(["docs"], { query: "aaae", limit: 1 });
    assert.equal(again[0].key, "e");
  } finally {
    await client.deleteStore("local", name);
  }
});

test("a store without an embedding model ignores a query, as LangGraph's stores do without an index", async () => {
  const name = `ts-lg-plain-${randomUUID().slice(0, 8)}`;
  await client.putStore("local", name, { dimensions: 3 });
  try {
    const s = new KiviDBStore({ store: new MemoryClient().store("local", name) });
    await s.put(["n"], "one", { text: "first" }, ["text"]);
    await s.put(["n"], "two", { text: "second" });
    const found = await s.search(["n"], { query: "first" });
    assert.deepEqual(found.map((i) => i.key).sort(), ["one", "two"]);
  } finally {
    await client.deleteStore("local", name);
  }
});

test("ttl: an item lives defaultTTL minutes after its put, and a read starts its time again", async () => {
  const s = new KiviDBStore({ store, ttl: { defaultTTL: 2 / 60, refreshOnRead: true } });
  const ns = [run(), "ttl"];
  await s.put(ns, "k", { v: 1 });
  const kept = await store.getKeyedMemory(ns, "k");
  const life = Date.parse(kept.expires_at) - Date.parse(kept.updated_at);
  assert.ok(life > 1000 && life <= 2500, `lives ${life} ms`);
  await new Promise((r) => setTimeout(r, 1200));
  assert.deepEqual((await s.get(ns, "k")).value, { v: 1 }); // refreshed: 2 s from now
  await new Promise((r) => setTimeout(r, 1200));
  assert.deepEqual((await s.get(ns, "k")).value, { v: 1 });
  const deadline = Date.now() + 10_000;
  while ((await store.searchKeyedMemories(ns)).items.length > 0) {
    assert.ok(Date.now() < deadline, "the item never expired");
    await new Promise((r) => setTimeout(r, 300));
  }
});
