/**
 * The README's TypeScript example: a turn kept in a session, and what an agent reads before its
 * next model call.
 *
 * Against the local stack (`make run`, then in another shell, in examples/typescript/):
 *
 *     npm ci && npx tsc
 *     KIVIDB_API_URL=http://127.0.0.1:3000 KIVIDB_API_KEY=<the key make run printed> \
 *     KIVIDB_STORE=examples node dist/quickstart.js
 */

import { MemoryClient } from "@kividb/memory";

const name = process.env.KIVIDB_STORE ?? "quickstart";

const client = new MemoryClient(); // KIVIDB_API_URL, KIVIDB_API_KEY
await client.putStore("local", name);
const store = client.store("local", name);
await store.addEvents("chat-ts", [{ role: "user", content: "I live in Porto" }], { actorId: "ann" });
console.log((await store.recall("chat-ts", { actorId: "ann" })).context);
