// `@kividb/memory/ai-sdk` driven by the Vercel AI SDK itself: `generateText` and `streamText`
// of `ai` with its own test double (`MockLanguageModelV4` from `ai/test`), wrapped by the
// middleware, and calling the memory tools, against the local stack. The store embeds with the
// scripted provider on loopback (`KIVIDB_PROVIDER_URL`, tools/scripted_model.py).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { generateText, jsonSchema, stepCountIs, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV4, convertArrayToReadableStream } from "ai/test";

import { NotFoundError } from "../dist/index.js";
import { kividbMemory, kividbTools, promptTurn } from "../dist/ai-sdk.js";
import { scriptedStore, usage } from "./support.mjs";

const { client, store } = scriptedStore("ts-ai");
const answer = (content) => ({
  content, finishReason: { unified: content.some((p) => p.type === "tool-call") ? "tool-calls" : "stop", raw: "stop" },
  usage, warnings: [],
});
const text = (words) => answer([{ type: "text", text: words }]);
const call = (toolName, input) => answer([{ type: "tool-call", toolCallId: `call_${randomUUID().slice(0, 6)}`, toolName, input: JSON.stringify(input) }]);
const systemOf = (prompt) => prompt.filter((m) => m.role === "system").map((m) => m.content);

test("the middleware puts recall's context in front and keeps the turn; the next call recalls it", async () => {
  await store.addMemory("Ann's favourite city is Porto", { actorId: "ann" });
  const mock = new MockLanguageModelV4({ doGenerate: [text("Porto, you told me."), text("You asked about your favourite city.")] });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-1", actorId: "ann" }) });

  const first = await generateText({ model, system: "Be brief.", prompt: "What is my favourite city?" });
  assert.equal(first.text, "Porto, you told me.");
  const prompt = mock.doGenerateCalls[0].prompt;
  // the app's system message first, then the context, then the conversation
  assert.deepEqual(prompt.map((m) => m.role), ["system", "system", "user"]);
  assert.equal(prompt[0].content, "Be brief.");
  assert.match(prompt[1].content, /Long-term memories about the user/);
  assert.match(prompt[1].content, /favourite city is Porto/);

  const kept = (await store.getSession("ai-1")).messages;
  assert.deepEqual(kept.map((m) => [m.role, m.content]), [
    ["user", "What is my favourite city?"],
    ["assistant", "Porto, you told me."],
  ]);

  await generateText({ model, prompt: "What did I ask you?" });
  const context = systemOf(mock.doGenerateCalls[1].prompt)[0];
  assert.match(context, /What is my favourite city\?/); // the session's recent messages
  assert.equal((await store.getSession("ai-1")).messages.length, 4);
});

test("a tool loop of generateText keeps each step once, in order, and its later step gets the turn's first context", async () => {
  const mock = new MockLanguageModelV4({
    doGenerate: [call("remember", { text: "Ann is allergic to peanuts" }), text("Noted: no peanuts.")],
  });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-2", actorId: "ann" }) });
  const result = await generateText({
    model,
    tools: kividbTools({ store, actorId: "ann", sessionId: "ai-2" }),
    stopWhen: stepCountIs(3),
    prompt: "Remember that I am allergic to peanuts.",
  });
  assert.equal(result.text, "Noted: no peanuts.");
  assert.equal(result.steps.length, 2);
  const [step] = result.steps[0].toolResults;
  assert.equal(step.toolName, "remember");
  assert.equal(step.output.duplicate, false);

  // the memory the tool kept is the actor's, and found again
  const found = await store.search("peanuts", { actorId: "ann", mode: "keyword" });
  assert.deepEqual(found.memories.map((m) => m.text), ["Ann is allergic to peanuts"]);
  assert.equal(found.memories[0].id, step.output.id);

  // one turn: the user's message, the call, its result, the answer; nothing twice
  const kept = (await store.getSession("ai-2")).messages;
  assert.deepEqual(kept.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(kept[1].item.content[0].type, "tool-call");
  assert.equal(kept[1].item.content[0].toolName, "remember");
  assert.deepEqual(kept[1].item.content[0].input, { text: "Ann is allergic to peanuts" });
  assert.match(kept[2].content, /"duplicate":false/);
  assert.equal(kept[3].content, "Noted: no peanuts.");
  // the second step's context is the first's: it does not repeat the turn its prompt holds
  const [one, two] = mock.doGenerateCalls.map((c) => systemOf(c.prompt).join("\n"));
  assert.equal(two, one);
  assert.doesNotMatch(two, /Remember that/);
});

test("searchMemories and recall as tools the model calls", async () => {
  await store.addMemory("Ann plays the cello on Sundays", { actorId: "ann" });
  await store.addMemory("Bob plays the cello too", { actorId: "bob" });
  const mock = new MockLanguageModelV4({
    doGenerate: [call("searchMemories", { query: "cello", limit: 5 }), call("recall", { query: "cello" }), text("The cello.")],
  });
  const tools = kividbTools({ store, actorId: "ann", sessionId: "ai-3", searchMode: "keyword" });
  assert.deepEqual(Object.keys(tools).sort(), ["recall", "remember", "searchMemories"]);
  const result = await generateText({ model: mock, tools, stopWhen: stepCountIs(4), prompt: "What do I play?" });
  assert.equal(result.text, "The cello.");
  const searched = result.steps[0].toolResults[0].output;
  assert.deepEqual(searched.map((m) => m.text), ["Ann plays the cello on Sundays"]); // never Bob's
  assert.ok(searched[0].id && searched[0].type && typeof searched[0].score === "number");
  const recalled = result.steps[1].toolResults[0].output;
  assert.match(recalled, /Ann plays the cello on Sundays/);
  assert.doesNotMatch(recalled, /Bob/);
  // the model saw the tools with their zod schemas as JSON Schema
  const offered = Object.fromEntries(mock.doGenerateCalls[0].tools.map((t) => [t.name, t.inputSchema]));
  assert.deepEqual(offered.searchMemories.required, ["query"]);
  assert.deepEqual(offered.remember.required, ["text"]);
  // without a session there is no recall tool
  assert.deepEqual(Object.keys(kividbTools({ store, actorId: "ann" })).sort(), ["remember", "searchMemories"]);
});

test("a tool's API error reaches the model as the tool's error, and nothing is kept", async () => {
  const mock = new MockLanguageModelV4({ doGenerate: [call("remember", { text: "x", type: "no-such-type" }), text("Could not.")] });
  const result = await generateText({ model: mock, tools: kividbTools({ store, actorId: "ann" }), stopWhen: stepCountIs(3), prompt: "Keep x" });
  const [failed] = result.steps[0].content.filter((p) => p.type === "tool-error");
  assert.match(String(failed.error.message), /not one of this store's types/);
  assert.equal(failed.error.status, 422);
  const all = await store.listMemories({ actorId: "ann" });
  assert.ok(!all.memories.some((m) => m.text === "x"));
});

test("streamText: the context goes in front and the streamed answer is kept when the stream ends", async () => {
  const mock = new MockLanguageModelV4({
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: "Green " },
        { type: "text-delta", id: "t1", delta: "tea." },
        { type: "text-end", id: "t1" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
      ]),
    }),
  });
  await store.addMemory("Ann drinks green tea every morning", { actorId: "ann" });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-4", actorId: "ann" }) });
  const result = streamText({ model, prompt: "What do I drink every morning?" });
  assert.equal(await result.text, "Green tea.");
  assert.match(systemOf(mock.doStreamCalls[0].prompt)[0], /green tea every morning/);
  const kept = (await store.getSession("ai-4")).messages;
  assert.deepEqual(kept.map((m) => [m.role, m.content]), [
    ["user", "What do I drink every morning?"],
    ["assistant", "Green tea."],
  ]);
});

test("errors: thrown from the model call by default, given to onError when one is set", async () => {
  const gone = client.store("local", `missing-${randomUUID().slice(0, 6)}`);
  const mock = new MockLanguageModelV4({ doGenerate: [text("Hi."), text("Hi again.")] });
  const strict = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store: gone, sessionId: "s" }) });
  await assert.rejects(generateText({ model: strict, prompt: "Hello" }), (error) => error instanceof NotFoundError && error.code === "store_not_found");
  assert.equal(mock.doGenerateCalls.length, 0); // recall failed before the model was called

  const seen = [];
  const lenient = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store: gone, sessionId: "s", onError: (e) => seen.push(e) }) });
  const result = await generateText({ model: lenient, prompt: "Hello" });
  assert.equal(result.text, "Hi.");
  assert.deepEqual(seen.map((e) => e.code), ["store_not_found", "store_not_found"]); // recall, then the turn
  assert.ok(!seen.some((e) => String(e.message).includes(process.env.KIVIDB_API_KEY)));
});

test("addTurns: false only reads; files are kept without their bytes", async () => {
  const mock = new MockLanguageModelV4({ doGenerate: [text("A cat.")] });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-5", addTurns: false }) });
  await generateText({ model, prompt: "Hi" });
  await assert.rejects(store.getSession("ai-5"), NotFoundError);

  const events = promptTurn([
    { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "file", mediaType: "image/png", data: { type: "data", data: new Uint8Array([1, 2, 3]) } }] },
  ]);
  assert.deepEqual(events, [{
    role: "user", content: "What is this?",
    item: { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "file", mediaType: "image/png", data: { type: "data" } }] },
  }]);
});

test("a turn that stops at a tool call is kept as far as it went, and the next call goes on from there", async () => {
  const mock = new MockLanguageModelV4({ doGenerate: [call("searchMemories", { query: "tea" }), text("Green tea.")] });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-6", actorId: "ann" }) });
  const tools = kividbTools({ store, actorId: "ann", searchMode: "keyword" });
  const first = await generateText({ model, tools, prompt: "What do I drink?" }); // stepCountIs(1)
  assert.equal(first.steps.length, 1);
  let kept = (await store.getSession("ai-6")).messages;
  assert.deepEqual(kept.map((m) => m.role), ["user", "assistant"]);
  assert.equal(kept[1].item.content[0].toolName, "searchMemories");
  // the app goes on with the tool's result (as a chat app running its own tools would)
  await generateText({ model, tools, messages: [{ role: "user", content: "What do I drink?" }, ...first.response.messages] });
  kept = (await store.getSession("ai-6")).messages;
  assert.deepEqual(kept.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(kept[3].content, "Green tea.");
});

test("long texts: the query is cut at 8,000 characters, a tool result over 32,000 is kept cut with a marker", async () => {
  const long = "tea ".repeat(3000); // 12,000 characters
  const mock = new MockLanguageModelV4({ doGenerate: [text("Noted.")] });
  const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "ai-7", actorId: "ann" }) });
  // recall refuses a query over 8,000 characters (422): the call goes through because the
  // middleware asks with the message's first 8,000
  assert.equal((await generateText({ model, prompt: long })).text, "Noted.");
  assert.equal((await store.getSession("ai-7")).messages[0].content, long); // kept whole: 32,000 is the limit

  const huge = new MockLanguageModelV4({ doGenerate: [call("dump", {}), text("Done.")] });
  const dumping = wrapLanguageModel({ model: huge, middleware: kividbMemory({ store, sessionId: "ai-8", actorId: "ann" }) });
  const dump = { description: "dump", inputSchema: jsonSchema({ type: "object", properties: {} }), execute: async () => "x".repeat(40_000) };
  await generateText({ model: dumping, tools: { dump }, stopWhen: stepCountIs(2), prompt: "Dump it." });
  const kept = (await store.getSession("ai-8")).messages;
  assert.deepEqual(kept.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(kept[2].item, null); // too long as an item: left out
  assert.ok(kept[2].content.length <= 32_000);
  assert.match(kept[2].content, /… \[\d+ characters cut\]$/);
});

test("a stream that fails midway keeps nothing; text with a lone surrogate is kept well-formed", async () => {
  const failing = new MockLanguageModelV4({
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t1" },
        { type: "text-delta", id: "t1", delta: "The answer is" },
        { type: "error", error: new Error("the provider dropped the stream") },
        { type: "finish", finishReason: { unified: "error", raw: "error" }, usage },
      ]),
    }),
  });
  const model = wrapLanguageModel({ model: failing, middleware: kividbMemory({ store, sessionId: "ai-9", actorId: "ann" }) });
  const result = streamText({ model, prompt: "Tell me", onError: () => {} });
  await result.consumeStream();
  await assert.rejects(store.getSession("ai-9"), NotFoundError);

  const plain = new MockLanguageModelV4({ doGenerate: [text("ok \ud83d")] });
  const cutEmoji = wrapLanguageModel({ model: plain, middleware: kividbMemory({ store, sessionId: "ai-10" }) });
  await generateText({ model: cutEmoji, prompt: "half an emoji: \ud83d" });
  const kept = (await store.getSession("ai-10")).messages.map((m) => m.content);
  assert.deepEqual(kept, ["half an emoji: \ufffd", "ok \ufffd"]);
});

test("an actor or session that is not a non-empty string is refused before any call", () => {
  assert.throws(() => kividbTools({ store, actorId: undefined }), TypeError);
  assert.throws(() => kividbTools({ store, actorId: "" }), TypeError);
  assert.throws(() => kividbMemory({ store, sessionId: undefined }), TypeError);
  assert.throws(() => kividbMemory({ store, sessionId: "s", actorId: "" }), TypeError);
});
