// `@kividb/memory/openai-agents` driven by the Agents SDK itself: a Runner turn of
// `@openai/agents-core` with the SDK's own test double (`ScriptedModel` from
// `@openai/agents-core/testing`, no network) keeps its history in a KiviDB session on the local
// stack, and the next turn reads it back exactly.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { Agent, Runner, tool } from "@openai/agents-core";
import { ScriptedModel, assistantMessage, functionCall } from "@openai/agents-core/testing";
import { z } from "zod";

import { MemoryClient } from "../dist/index.js";
import { KiviDBSession, itemEvent, messageItem } from "../dist/openai-agents.js";

const client = new MemoryClient();
const name = `ts-agents-${randomUUID().slice(0, 8)}`;
const store = client.store("local", name);

before(async () => {
  await client.putStore("local", name, { dimensions: 3 });
});

after(async () => {
  await client.deleteStore("local", name);
});

test("a Runner turn with a tool call is kept and read back exactly by the next turn", async () => {
  const weather = tool({
    name: "weather",
    description: "The weather in a city",
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `Sunny in ${city}`,
  });
  const model = new ScriptedModel([
    [functionCall("weather", { city: "Porto" }, { callId: "call_1", id: "fc_1" })],
    [assistantMessage("It is sunny in Porto.")],
    [assistantMessage("You asked about Porto.")],
  ]);
  const agent = new Agent({ name: "assistant", instructions: "Be brief.", model, tools: [weather] });
  const session = new KiviDBSession("agents-1", { store, actorId: "ann" });
  const runner = new Runner({ tracingDisabled: true });

  const first = await runner.run(agent, "What is the weather in Porto?", { session });
  assert.equal(first.finalOutput, "It is sunny in Porto.");
  const kept = await session.getItems();
  const types = kept.map((item) => item.type ?? item.role);
  assert.deepEqual(types, ["message", "function_call", "function_call_result", "message"]);
  assert.equal(kept[0].role, "user");
  assert.match(JSON.stringify(kept[2]), /Sunny in Porto/);

  const second = await runner.run(agent, "What did I ask?", { session });
  assert.equal(second.finalOutput, "You asked about Porto.");
  // the model of the second turn was given the first turn's items, as they were kept
  const given = model.calls[2].request.input;
  assert.deepEqual(given.slice(0, kept.length), kept);
  model.assertComplete();

  const view = await store.getSession("agents-1");
  assert.equal(view.actor_id, "ann");
  assert.equal(view.messages[0].content, "What is the weather in Porto?");
  assert.equal(view.messages[2].role, "tool");
  assert.equal(view.messages[2].content, "Sunny in Porto"); // what recall and extraction read
});

test("getItems with a limit, popItem and clearSession", async () => {
  const session = new KiviDBSession("agents-2", { store });
  assert.deepEqual(await session.getItems(), []);
  assert.equal(await session.popItem(), undefined);
  const items = [
    { role: "user", content: "one" },
    { role: "assistant", content: [{ type: "output_text", text: "two" }], status: "completed", type: "message" },
    { type: "reasoning", id: "rs_1", content: [], summary: [{ type: "summary_text", text: "thinking" }] },
    { role: "developer", content: "be terse" },
  ];
  await session.addItems(items);
  assert.deepEqual(await session.getItems(), items);
  assert.deepEqual(await session.getItems(2), items.slice(2));
  assert.deepEqual(await session.popItem(), items[3]);
  assert.deepEqual(await session.getItems(), items.slice(0, 3));
  await session.clearSession();
  assert.deepEqual(await session.getItems(), []);
  await session.clearSession(); // already forgotten
  assert.equal(await session.getSessionId(), "agents-2");
});

test("many items go in batches of 100 and come back in order", async () => {
  const session = new KiviDBSession("agents-3", { store, limit: 150 });
  const items = Array.from({ length: 230 }, (_, n) => ({ role: n % 2 ? "assistant" : "user", content: `item ${n}` }));
  await session.addItems(items);
  assert.deepEqual(await session.getItems(), items.slice(80)); // its own limit, 150
  assert.deepEqual(await session.getItems(1000), items);
});

test("items become events with their role and text, and come back as they were", () => {
  assert.deepEqual(itemEvent({ role: "developer", content: "x" }), {
    role: "system", item: { role: "developer", content: "x" }, content: "x",
  });
  const output = { type: "function_call_result", callId: "c", name: "t", status: "completed", output: { type: "text", text: "ok" } };
  assert.equal(itemEvent(output).role, "tool");
  assert.equal(itemEvent({ type: "function_call", callId: "c", name: "t", arguments: "{}" }).role, "assistant");
  assert.deepEqual(messageItem({ seq: 1, role: "user", content: "hi", created_at: "2026-01-01T00:00:00Z" }), {
    role: "user", content: "hi",
  });
});
