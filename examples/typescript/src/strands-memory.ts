/**
 * A Strands agent (TypeScript) with a KiviDB store as its long-term memory: the manager's
 * injection puts the user's memories in front of the model, and its extraction hands the
 * conversation to the store's session.
 *
 * Against the local stack (`make run`, then in another shell, in examples/typescript/):
 *
 *     npm ci && npx tsc
 *     KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
 *     KIVIDB_STORE=examples node dist/strands-memory.js
 *
 * The model is Strands' `VercelModel` over the AI SDK's test double (`MockLanguageModelV3` from
 * `ai/test`), which answers from what its prompt holds, so it runs offline; give the agent a
 * real model (Bedrock by default) for a real one. The store has no embedding model here, so the
 * memory is added with a vector of its own and found by keyword.
 */

import { Agent, InvocationTrigger, MemoryManager } from "@strands-agents/sdk";
import { VercelModel } from "@strands-agents/sdk/models/vercel";
import { MockLanguageModelV3, convertArrayToReadableStream } from "ai/test";
import { MemoryClient } from "@kividb/memory";
import { KiviDBMemoryStore } from "@kividb/memory/strands";

const name = process.env.KIVIDB_STORE ?? "examples";
const client = new MemoryClient(); // KIVIDB_API_URL, KIVIDB_API_KEY
const dimensions = (await client.putStore("local", name)).dimensions;
const store = client.store("local", name);
await store.forgetActor("ann");
await store.deleteSession("strands-ann").catch(() => undefined); // a fresh start
const vector = Array.from({ length: dimensions }, (_, i) => (i === 0 ? 1 : 0));
await store.addMemory("Ann keeps bees in her garden", { actorId: "ann", vector });

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};
// Answers from the memories the manager put in its prompt.
const mock = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    const text = JSON.stringify(prompt).includes("keeps bees") ? "You keep bees." : "I do not know.";
    return {
      stream: convertArrayToReadableStream([
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: text },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage },
      ]),
    };
  },
});

const memory = new KiviDBMemoryStore({
  store, actorId: "ann", searchMode: "keyword", extraction: { trigger: new InvocationTrigger() },
});
const manager = new MemoryManager({ stores: [memory], injection: true });
const agent = new Agent({ model: new VercelModel({ provider: mock }), memoryManager: manager, printer: false });
console.log(String(await agent.invoke("What do I keep in my garden? bees?")));
await manager.flush(); // the turn's messages reach the session
console.log(`the session keeps ${(await store.getSession("strands-ann")).messages.length} messages`);
