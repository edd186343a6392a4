// What the framework tests share: a store on the local stack that embeds with the scripted
// provider on loopback (`KIVIDB_PROVIDER_URL`, tools/scripted_model.py), made before the file's
// tests and deleted after, and the token usage a scripted model reports.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before } from "node:test";

import { MemoryClient } from "../dist/index.js";

/** A new store named `<prefix>-<random>` for this test file: `{ client, name, store }`. */
export function scriptedStore(prefix) {
  const client = new MemoryClient();
  const name = `${prefix}-${randomUUID().slice(0, 8)}`;
  const provider = process.env.KIVIDB_PROVIDER_URL;
  before(async () => {
    assert.ok(provider, "KIVIDB_PROVIDER_URL: the scripted provider's /v1 URL");
    await client.putStore("local", name, {
      embed_provider: "custom", embed_model: "scripted", embed_base_url: provider, dimensions: 384,
    });
  });
  after(async () => {
    await client.deleteStore("local", name);
  });
  return { client, name, store: client.store("local", name) };
}

/** A model call's token usage (the AI SDK's `LanguageModelV3Usage` and `V4Usage` shape). */
export const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};
