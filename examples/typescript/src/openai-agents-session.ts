/**
 * An OpenAI Agents SDK (JavaScript) agent whose conversation is a KiviDB session.
 *
 * Against the local stack (`make run`, then in another shell, in examples/typescript/):
 *
 *     npm ci && npx tsc
 *     KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
 *     KIVIDB_STORE=examples node dist/openai-agents-session.js
 *
 * The model is the SDK's own `ScriptedModel` (`@openai/agents-core/testing`), so it runs offline;
 * give the agent a real model name (and OPENAI_API_KEY, with `@openai/agents`) for a real agent.
 * The store is created if it is missing.
 */

import { Agent, Runner } from "@openai/agents-core";
import { ScriptedModel, assistantMessage } from "@openai/agents-core/testing";
import { MemoryClient } from "@kividb/memory";
import { KiviDBSession } from "@kividb/memory/openai-agents";

const name = process.env.KIVIDB_STORE ?? "examples";
const client = new MemoryClient(); // KIVIDB_API_URL, KIVIDB_API_KEY
await client.putStore("local", name);
const session = new KiviDBSession("example-chat", { store: client.store("local", name), actorId: "ann" });
await session.clearSession();

const model = new ScriptedModel([[assistantMessage("Nice to meet you, Ann.")], [assistantMessage("You are Ann.")]]);
const agent = new Agent({ name: "assistant", model });
const runner = new Runner({ tracingDisabled: true }); // offline: no traces sent to OpenAI
await runner.run(agent, "Hi, I am Ann.", { session });
const result = await runner.run(agent, "Who am I?", { session });
console.log(result.finalOutput);
console.log(`the session keeps ${(await session.getItems()).length} items`);
