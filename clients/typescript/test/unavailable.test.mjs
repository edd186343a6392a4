// A stopped database, as the client sees it: run by tests/e2e/test_typescript_client.py with a
// stack on a redis-server of its own, which it kills before this file starts and starts again
// about two seconds later (KIVIDB_STORE names a store made before the kill).

import assert from "node:assert/strict";
import { test } from "node:test";

import { MemoryClient, UnavailableError } from "../dist/index.js";

const name = process.env.KIVIDB_STORE;

test("503 database_unavailable with Retry-After, then retried until the database is back, kept once", async () => {
  assert.ok(name, "KIVIDB_STORE");
  const once = new MemoryClient({ maxRetries: 0 }).store("local", name);
  await assert.rejects(once.recall("s", { query: "anything" }), (error) => {
    assert.ok(error instanceof UnavailableError, String(error));
    assert.equal(error.status, 503);
    assert.equal(error.code, "database_unavailable");
    assert.ok(error.retryAfter >= 1, `Retry-After: ${error.retryAfter}`);
    assert.ok(!String(error.message).includes(process.env.KIVIDB_API_KEY));
    return true;
  });

  // the default client retries 503 by Retry-After; a write goes with one idempotency key
  const patient = new MemoryClient({ maxRetries: 10 }).store("local", name);
  const added = await patient.addEvents("s", [{ role: "user", content: "kept while the database was down" }]);
  assert.equal(added.message_count, 1);
  const session = await patient.getSession("s");
  assert.deepEqual(session.messages.map((m) => m.content), ["kept while the database was down"]);
});
