// `importChat` and `parseChatExport` of `@kividb/memory` on the ChatGPT and Claude exports that
// tests/e2e/test_typescript_client.py builds from real LoCoMo conversations (their folder in
// `KIVIDB_CHAT_EXPORTS`): each file read into the very sessions the Python client reads from it
// (`expected.json`, its parse), imported into the store `KIVIDB_STORE` and read back, and each
// malformed file refused with the Python client's words, nothing written.

import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { ChatExportError, importChat, MemoryClient, parseChatExport } from "../dist/index.js";

const folder = process.env.KIVIDB_CHAT_EXPORTS;
const read = (name) => readFileSync(join(folder, name), "utf8");
const expected = JSON.parse(read("expected.json"));
const store = new MemoryClient().store("local", process.env.KIVIDB_STORE);

const plain = (conversations) =>
  conversations.map((c) => ({
    session_id: c.sessionId,
    title: c.title,
    created_at: c.createdAt.toISOString(),
    messages: c.messages.map((m) => ({ role: m.role, content: m.content, created_at: m.createdAt.toISOString(), name: m.name ?? null, item: m.item ?? null })),
  }));

for (const source of ["chatgpt", "claude"]) {
  test(`a ${source} export reads into the sessions the Python client reads, and imports`, async () => {
    const conversations = parseChatExport(read(`${source}.json`), source);
    assert.deepEqual(plain(conversations), expected[source]);
    const extract = source === "chatgpt";
    const seen = [];
    const done = await importChat(store, conversations, { actorId: "ts-user", extract, onProgress: (_c, n, total) => seen.push(`${n}/${total}`) });
    const total = conversations.reduce((n, c) => n + c.messages.length, 0);
    assert.deepEqual(done, { sessions: conversations.length, messages: total, messagesAdded: total, empty: [] });
    assert.deepEqual(seen, conversations.map((_c, i) => `${i + 1}/${conversations.length}`));
    for (const conversation of conversations) {
      const view = await store.getSession(conversation.sessionId, { recent: 1000 });
      assert.equal(view.actor_id, "ts-user");
      assert.deepEqual(view.messages.map((m) => m.content), conversation.messages.map((m) => m.content));
      assert.equal(new Date(view.messages[0].created_at).getTime(), conversation.messages[0].createdAt.getTime());
      assert.equal(view.extraction.unread, extract ? conversation.messages.length : 0);
    }
    const again = await importChat(store, conversations, { actorId: "ts-user", extract });
    assert.equal(again.messagesAdded, 0);
  });
}

test("each malformed export is refused naming its conversation as the Python client does, nothing written", async () => {
  const before = (await store.listSessions({ limit: 100 })).sessions.length;
  const files = readdirSync(folder).filter((f) => f.startsWith("malformed-"));
  assert.ok(files.length >= 9, files.join());
  for (const file of files) {
    const { source, error } = JSON.parse(read(file.replace("malformed-", "error-")));
    let thrown;
    try {
      await importChat(store, parseChatExport(read(file), source), { actorId: "ts-user" });
    } catch (caught) {
      thrown = caught;
    }
    assert.ok(thrown instanceof ChatExportError, `${file}: ${thrown}`);
    assert.equal(thrown.message, error, file);
  }
  assert.throws(() => parseChatExport('{"conversations": []}', "claude"), /is a JSON array of conversations, not dict/);
  assert.throws(() => parseChatExport("[{", "claude"), /is not JSON/);
  assert.equal((await store.listSessions({ limit: 100 })).sessions.length, before);
});
