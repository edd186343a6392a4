/**
 * A Vercel AI SDK call with memory: the middleware puts recall's `context` in front of the model
 * call and keeps the turn; the model can also call the memory tools.
 *
 * Against the local stack (`make run`, then in another shell, in examples/typescript/):
 *
 *     npm ci && npx tsc
 *     KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
 *     KIVIDB_STORE=examples node dist/ai-sdk-memory.js
 *
 * The model is the AI SDK's own test double (`MockLanguageModelV4` from `ai/test`), which answers
 * from what its prompt holds, so it runs offline; put a provider's model in its place (for
 * example `openai("gpt-4.1")` from `@ai-sdk/openai`) for a real one. The store is created if it
 * is missing.
 */

import { generateText, stepCountIs, wrapLanguageModel } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { MemoryClient } from "@kividb/memory";
import { kividbMemory, kividbTools } from "@kividb/memory/ai-sdk";

const name = process.env.KIVIDB_STORE ?? "examples";
const client = new MemoryClient(); // KIVIDB_API_URL, KIVIDB_API_KEY
await client.putStore("local", name);
const store = client.store("local", name);
await store.deleteSession("example-ai").catch(() => undefined); // a fresh start

const usage = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};
// Answers "You are Ann." when its prompt (the context included) says so, else a greeting.
const mock = new MockLanguageModelV4({
  doGenerate: async ({ prompt }) => {
    const known = JSON.stringify(prompt).includes("I am Ann");
    const asked = JSON.stringify(prompt.at(-1)).includes("Who am I");
    const text = asked ? (known ? "You are Ann." : "I do not know.") : "Nice to meet you, Ann.";
    return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
  },
});

const model = wrapLanguageModel({ model: mock, middleware: kividbMemory({ store, sessionId: "example-ai", actorId: "ann" }) });
const tools = kividbTools({ store, actorId: "ann", sessionId: "example-ai", searchMode: "keyword" });
await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Hi, I am Ann." });
const { text } = await generateText({ model, tools, stopWhen: stepCountIs(3), prompt: "Who am I?" });
console.log(text);
console.log(`the session keeps ${(await store.getSession("example-ai")).messages.length} messages`);
