// `@kividb/memory/strands` driven by Strands Agents for TypeScript itself: an `Agent` whose
// `MemoryManager` holds the KiviDB store (its `add_memory` and `search_memory` tools, its
// injection of memories into the model's input, its extraction handing the conversation to
// `addMessages` with sequence numbers), on a scripted model: Strands' own `VercelModel` over the
// AI SDK's test double `MockLanguageModelV3` (`ai/test`). The store embeds with the scripted
// provider on loopback (`KIVIDB_PROVIDER_URL`, tools/scripted_model.py).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { Agent, InvocationTrigger, MemoryManager } from "@strands-agents/sdk";
import { VercelModel } from "@strands-agents/sdk/models/vercel";
import { MockLanguageModelV3, convertArrayToReadableStream } from "ai/test";

import { ApiConnectionError, MemoryClient } from "../dist/index.js";
import { KiviDBMemoryStore, messageEvent } from "../dist/strands.js";
import { scriptedStore, usage } from "./support.mjs";

const { client, name, store } = scriptedStore("ts-strands");
const finish = (unified) => ({ type: "finish", finishReason: { unified, raw: unified }, usage });
const say = (text) => ({
  stream: convertArrayToReadableStream([
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: text },
    { type: "text-end", id: "t" },
    finish("stop"),
  ]),
});
const call = (toolName, input) => ({
  stream: convertArrayToReadableStream([
    { type: "stream-start", warnings: [] },
    { type: "tool-call", toolCallId: `call_${randomUUID().slice(0, 6)}`, toolName, input: JSON.stringify(input) },
    finish("tool-calls"),
  ]),
});
/** The text the model was given, all of it (system prompt and messages). */
const given = (options) => JSON.stringify(options.prompt);

test("an agent keeps a memory with add_memory, and its conversation reaches the session through extraction", async () => {
  // every block handed over (Strands' default filter leaves out tool traffic)
  const extraction = { trigger: new InvocationTrigger(), filter: { exclude: [] } };
  const memory = new KiviDBMemoryStore({ store, actorId: "ann", extraction });
  const manager = new MemoryManager({ stores: [memory], addToolConfig: true });
  const mock = new MockLanguageModelV3({ doStream: [call("add_memory", { entries: ["Ann's favourite city is Porto"] }), say("I will remember that.")] });
  const agent = new Agent({ model: new VercelModel({ provider: mock }), memoryManager: manager, printer: false });

  const result = await agent.invoke("My favourite city is Porto.");
  assert.equal(String(result), "I will remember that.");
  await manager.flush();

  const kept = await store.listMemories({ actorId: "ann" });
  assert.ok(kept.memories.some((m) => m.text === "Ann's favourite city is Porto"), JSON.stringify(kept.memories));
  const session = await store.getSession("strands-ann");
  assert.equal(session.actor_id, "ann");
  const roles = session.messages.map((m) => m.role);
  assert.deepEqual(roles, ["user", "assistant", "user", "assistant"]);
  assert.equal(session.messages[0].content, "My favourite city is Porto.");
  assert.ok(session.messages[1].item.content.some((block) => block.toolUse?.name === "add_memory"));
  assert.ok(session.messages[2].item.content.some((block) => block.toolResult));
  assert.equal(session.messages[3].content, "I will remember that.");
});

test("the manager's injection puts the actor's memories in front of the model, and search_memory finds them", async () => {
  await store.addMemory("Ann keeps bees in her garden", { actorId: "ann" });
  await store.addMemory("Bob keeps bees too", { actorId: "bob" });
  const memory = new KiviDBMemoryStore({ store, actorId: "ann", searchMode: "keyword" });
  const mock = new MockLanguageModelV3({ doStream: [call("search_memory", { query: "bees" }), say("Bees.")] });
  const agent = new Agent({
    model: new VercelModel({ provider: mock }),
    memoryManager: { stores: [memory], injection: true },
    printer: false,
  });
  const result = await agent.invoke("What do I keep in my garden? bees?");
  assert.equal(String(result), "Bees.");
  const first = given(mock.doStreamCalls[0]);
  assert.match(first, /Ann keeps bees in her garden/);
  assert.doesNotMatch(first, /Bob keeps bees/); // never another actor's
  // the tool's result the model got in its second call
  const second = given(mock.doStreamCalls[1]);
  assert.match(second, /Ann keeps bees in her garden/);
  assert.doesNotMatch(second, /Bob keeps bees/);

  const entries = await memory.search("bees", { maxSearchResults: 5 });
  assert.deepEqual(entries.map((e) => e.content), ["Ann keeps bees in her garden"]);
  assert.equal(entries[0].metadata.type, "semantic");
  assert.ok(entries[0].metadata.id && typeof entries[0].metadata.score === "number" && entries[0].metadata.created_at);
});

test("addMessages: a batch sent again is kept once, also when it comes back with the messages after it", async () => {
  // a client whose first send of a batch is kept by the API but whose answer is lost
  let lose = 0;
  const lossy = new MemoryClient({
    maxRetries: 0,
    fetch: async (input, init) => {
      const answer = await fetch(input, init);
      if (lose > 0 && String(input).endsWith("/events")) {
        lose -= 1;
        throw new TypeError("fetch failed: the connection was reset");
      }
      return answer;
    },
  });
  const memory = new KiviDBMemoryStore({ store: lossy.store("local", name), actorId: "cy", sessionId: "strands-cy" });
  const text = (role, words) => ({ role, content: [{ text: words }] });

  await memory.addMessages([text("user", "hi"), text("assistant", "hello")], { sequenceNumbers: [0, 1] });
  lose = 1;
  await assert.rejects(memory.addMessages([text("user", "ok"), text("assistant", "ok")], { sequenceNumbers: [2, 3] }), ApiConnectionError);
  // Strands sends the failed batch again with the next one
  await memory.addMessages([text("user", "ok"), text("assistant", "ok"), text("user", "bye")], { sequenceNumbers: [2, 3, 4] });
  // the same batch again (a retry of a batch that was acknowledged) starts a new run: kept
  await memory.addMessages([text("user", "hi"), text("assistant", "hello")], { sequenceNumbers: [0, 1] });
  // without sequence numbers each call is its own write
  await memory.addMessages([text("user", "plain")]);

  const kept = (await store.getSession("strands-cy")).messages.map((m) => m.content);
  assert.deepEqual(kept, ["hi", "hello", "ok", "ok", "bye", "hi", "hello", "plain"]);
});

test("messageEvent keeps the message as its item and its text blocks as content", () => {
  const message = {
    role: "user",
    content: [{ toolResult: { toolUseId: "t1", status: "success", content: [{ text: "42" }] } }, { text: "and then?" }],
  };
  assert.deepEqual(messageEvent(message), { role: "user", item: message, content: "and then?" });
  const silent = { role: "assistant", content: [{ toolUse: { toolUseId: "t1", name: "calc", input: { a: 1 } } }] };
  assert.deepEqual(messageEvent(silent), { role: "assistant", item: silent });
});

test("addMessages: a call of more than 100 messages whose second write fails is kept once when Strands sends it again", async () => {
  let writes = 0;
  let failAt = 2;
  const flaky = new MemoryClient({
    maxRetries: 0,
    fetch: async (input, init) => {
      if (String(input).endsWith("/events")) {
        writes += 1;
        if (writes === failAt) throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
      }
      return fetch(input, init);
    },
  });
  const memory = new KiviDBMemoryStore({ store: flaky.store("local", name), actorId: "dee", sessionId: "strands-dee" });
  const messages = Array.from({ length: 130 }, (_, i) => ({ role: i % 2 ? "assistant" : "user", content: [{ text: `message ${i}` }] }));
  const numbers = messages.map((_, i) => i);
  await assert.rejects(memory.addMessages(messages, { sequenceNumbers: numbers }), ApiConnectionError);
  failAt = 0;
  const more = [...messages, { role: "user", content: [{ text: "message 130" }] }];
  await memory.addMessages(more, { sequenceNumbers: [...numbers, 130] });
  const kept = (await store.getSession("strands-dee", { recent: 1000 })).messages.map((m) => m.content);
  assert.deepEqual(kept, more.map((m) => m.content[0].text));
});

test("a photo's bytes are left out and an over-long message is cut: the conversation is still kept", async () => {
  const memory = new KiviDBMemoryStore({ store, actorId: "eve", sessionId: "strands-eve" });
  const photo = {
    role: "user",
    content: [{ text: "What is in this photo?" }, { image: { format: "png", source: { bytes: "A".repeat(40_000) } } }],
  };
  const long = { role: "assistant", content: [{ text: "y".repeat(33_000) }] };
  await memory.addMessages([photo, long], { sequenceNumbers: [0, 1] });
  const [first, second] = (await store.getSession("strands-eve")).messages;
  assert.deepEqual(first.item.content[1], { image: { format: "png", source: {} } });
  assert.equal(first.content, "What is in this photo?");
  assert.ok(second.content.length <= 32_000);
  assert.match(second.content, /… \[\d+ characters cut\]$/);
  assert.equal(second.item, null); // too long as an item
});

test("the store refuses a missing actor; numbers that repeat within a batch are not trusted as keys", async () => {
  assert.throws(() => new KiviDBMemoryStore({ store, actorId: undefined }), TypeError);
  assert.throws(() => new KiviDBMemoryStore({ store, actorId: "" }), TypeError);
  const memory = new KiviDBMemoryStore({ store, actorId: "fay", sessionId: "strands-fay" });
  const say = (text) => ({ role: "user", content: [{ text }] });
  await memory.addMessages([say("a"), say("b")], { sequenceNumbers: [5, 5] });
  await memory.addMessages([], { sequenceNumbers: [] }); // nothing to keep, no call
  const kept = (await store.getSession("strands-fay")).messages.map((m) => m.content);
  assert.deepEqual(kept, ["a", "b"]);
});
