// `@kividb/memory/anthropic` driven by the Anthropic SDK's own tool runner
// (`client.beta.messages.toolRunner`) against a loopback server that speaks the Messages API: a
// scripted conversation in which "Claude" uses all six commands of the memory tool, hostile paths
// included (`..`, absolute paths outside /memories, odd unicode), each answered by the adapter
// over a KiviDB store's keyed memories; the tool results the runner sends back are what the test
// reads, as the model would.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";

import { KiviDBMemoryTool, kividbMemoryTool, memoryKey } from "../dist/anthropic.js";
import { scriptedStore } from "./support.mjs";

const { store } = scriptedStore("ts-anthropic");

/** A Messages API on loopback that answers each request with the next scripted assistant turn
 * and keeps the requests it got. */
function messagesServer(turns) {
  const requests = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      requests.push({ url: req.url, headers: req.headers, body: JSON.parse(body) });
      const content = turns.shift() ?? [{ type: "text", text: "Done." }];
      const stop = content.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn";
      res.writeHead(200, { "content-type": "application/json", "request-id": `req_${requests.length}` });
      res.end(JSON.stringify({
        id: `msg_${requests.length}`, type: "message", role: "assistant", model: "claude-scripted",
        content, stop_reason: stop, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 5 },
      }));
    });
  });
  return { server, requests };
}

let n = 0;
const use = (input) => ({ type: "tool_use", id: `toolu_${++n}`, name: "memory", input });

const SCRIPT = [
  [use({ command: "view", path: "/memories" })],
  [use({ command: "create", path: "/memories/notes/ann.md", file_text: "Ann lives in Porto\nAnn likes tea" })],
  [use({ command: "str_replace", path: "/memories/notes/ann.md", old_str: "likes tea", new_str: "likes green tea" })],
  [use({ command: "insert", path: "/memories/notes/ann.md", insert_line: 1, insert_text: "Ann has a cat\n" })],
  // the runner runs one turn's tool calls at once, so a view that must see a create comes after it
  [use({ command: "create", path: "/memories/todo.txt", file_text: "call Ann" })],
  [use({ command: "view", path: "/memories" })],
  [use({ command: "rename", old_path: "/memories/notes", new_path: "/memories/people" })],
  [use({ command: "delete", path: "/memories/todo.txt" })],
  // hostile paths: each refused, nothing written
  [use({ command: "view", path: "/memories/../../etc/passwd" })],
  [use({ command: "create", path: "/etc/passwd", file_text: "root" })],
  [use({ command: "create", path: "/memories/people/\u202Eevil.md", file_text: "x" })],
  [use({ command: "create", path: "/memories/\uFF0E\uFF0E/x.md", file_text: "x" })],
  [use({ command: "create", path: "/memories/a\u0000b.md", file_text: "x" })],
  [use({ command: "rename", old_path: "/memories/people", new_path: "/memories/../people" })],
  [use({ command: "str_replace", path: "/memories/people/ann.md", old_str: "Ann", new_str: "Bob" })],
  [use({ command: "view", path: "/memories/people/ann.md", view_range: [2, -1] })],
];

test("Claude's tool runner uses all six commands on the store, and hostile paths are refused", async () => {
  const namespace = [`ann-${randomUUID().slice(0, 6)}`, "claude-memory"];
  // another actor's file under a namespace beside it: never in Ann's tree
  await store.putKeyedMemory([namespace[0], "claude-memory", "other"], "secret.md", { content: "x" });
  const { server, requests } = messagesServer(SCRIPT.map((turn) => [...turn]));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const client = new Anthropic({ apiKey: "sk-test", baseURL: `http://127.0.0.1:${server.address().port}`, maxRetries: 0 });
    const final = await client.beta.messages.toolRunner({
      model: "claude-scripted",
      max_tokens: 1024,
      messages: [{ role: "user", content: "Remember what I tell you about Ann." }],
      tools: [kividbMemoryTool({ store, namespace })],
      max_iterations: 40,
    });
    assert.equal(final.content[0].text, "Done.");
    assert.deepEqual(requests[0].body.tools, [{ type: "memory_20250818", name: "memory" }]);

    // what the runner sent back for each tool_use, in order
    const results = requests.slice(1).flatMap((r) => r.body.messages.at(-1).content.filter((b) => b.type === "tool_result"));
    const text = (r) => (typeof r.content === "string" ? r.content : r.content.map((b) => b.text).join(""));
    const [view0, created, replaced, inserted, todo, listing, renamed, deleted, up, outside, bidi, fullwidth, nul, renameUp, twice, last] = results;
    assert.equal(results.length, 16);
    assert.match(text(view0), /^Here're the files and directories up to 2 levels deep in \/memories/);
    assert.equal(text(view0).split("\n").length, 2, text(view0)); // the root alone: Ann has no files yet
    assert.equal(text(created), "File created successfully at: /memories/notes/ann.md");
    assert.match(text(replaced), /has been edited[\s\S]*\t?Ann likes green tea/);
    assert.equal(text(inserted), "The file /memories/notes/ann.md has been edited.");
    assert.equal(text(todo), "File created successfully at: /memories/todo.txt");
    // sizes in bytes: ann.md is "Ann lives in Porto\nAnn has a cat\nAnn likes green tea" (52), todo 8
    assert.match(text(listing), /\n60B\t\/memories\n52B\t\/memories\/notes\/\n52B\t\/memories\/notes\/ann.md\n8B\t\/memories\/todo.txt$/);
    assert.doesNotMatch(text(listing), /secret/);
    assert.equal(text(renamed), "Successfully renamed /memories/notes to /memories/people");
    assert.equal(text(deleted), "Successfully deleted /memories/todo.txt");
    for (const refused of [up, outside, bidi, fullwidth, nul, renameUp, twice]) assert.equal(refused.is_error, true, text(refused));
    assert.match(text(up), /would escape \/memories directory/);
    assert.match(text(outside), /Path must start with \/memories, got: \/etc\/passwd/);
    assert.match(text(bidi), /may not hold/);
    assert.match(text(fullwidth), /would escape \/memories directory/);
    assert.match(text(nul), /may not hold/);
    assert.match(text(renameUp), /would escape/);
    assert.match(text(twice), /Multiple occurrences of old_str `Ann` in lines: 1, 2, 3/);
    assert.equal(text(last), "Here's the content of /memories/people/ann.md with line numbers:\n     2\tAnn has a cat\n     3\tAnn likes green tea");

    // the store holds exactly Ann's one file, as any client reads it
    const kept = (await store.searchKeyedMemories(namespace, { limit: 100 })).items.filter((i) => i.namespace.length === 2);
    assert.deepEqual(kept.map((i) => [i.key, i.value.content]), [["people/ann.md", "Ann lives in Porto\nAnn has a cat\nAnn likes green tea"]]);
  } finally {
    server.close();
  }
});

test("paths map to keys as the SDK's reference resolves them, and odd ones are refused", () => {
  assert.equal(memoryKey("/memories"), "");
  assert.equal(memoryKey("/memories/"), "");
  assert.equal(memoryKey("/memories/a/./b//c.md"), "a/b/c.md");
  assert.equal(memoryKey("/memories/a/../b.md"), "b.md"); // stays inside: allowed, as the reference allows it
  assert.equal(memoryKey("/memories/cafe\u0301.md"), "caf\u00e9.md"); // one file for both forms
  assert.equal(memoryKey("/memories/日本語/ノート.md"), "日本語/ノート.md");
  assert.equal(memoryKey("/memories/%2e%2e/x"), "%2e%2e/x"); // no URL decoding: a name like any other
  for (const bad of ["/memories/..", "/memories/a/../../b", "/memoriesX/a", "memories/a", "/tmp/a", "", "/memories/a\\b",
    "/memories/\uFF0E\uFF0E", "/memories/a\uFF0Fb", "/memories/\u2066x", "/memories/\uFEFFx", "/memories/\uD800x", "/memories/a\nb"]) {
    assert.throws(() => memoryKey(bad), Error, JSON.stringify(bad));
  }
  assert.throws(() => new KiviDBMemoryTool({ store, namespace: [] }), TypeError);
  assert.throws(() => new KiviDBMemoryTool({ store, namespace: ["a.b"] }), TypeError);
});

test("commands on files and directories that are not there, or are the other kind, answer as the reference does", async () => {
  const tool = new KiviDBMemoryTool({ store, namespace: [`cy-${randomUUID().slice(0, 6)}`] });
  await assert.rejects(tool.view({ command: "view", path: "/memories/none.md" }), /does not exist/);
  await assert.rejects(tool.delete({ command: "delete", path: "/memories/none.md" }), /does not exist/);
  await assert.rejects(tool.delete({ command: "delete", path: "/memories" }), /Cannot delete the \/memories directory itself/);
  await tool.create({ command: "create", path: "/memories/d/f.md", file_text: "one\ntwo" });
  await assert.rejects(tool.create({ command: "create", path: "/memories/d/f.md", file_text: "x" }), /already exists/);
  await assert.rejects(tool.create({ command: "create", path: "/memories/d", file_text: "x" }), /already exists/);
  await assert.rejects(tool.create({ command: "create", path: "/memories/d/f.md/g", file_text: "x" }), /is a file/);
  await assert.rejects(tool.str_replace({ command: "str_replace", path: "/memories/d", old_str: "a", new_str: "b" }), /is not a file/);
  await assert.rejects(tool.str_replace({ command: "str_replace", path: "/memories/d/f.md", old_str: "three", new_str: "b" }), /did not appear verbatim/);
  await assert.rejects(tool.insert({ command: "insert", path: "/memories/d/f.md", insert_line: 3, insert_text: "x" }), /Invalid `insert_line` parameter: 3/);
  await assert.rejects(tool.rename({ command: "rename", old_path: "/memories/d", new_path: "/memories/d/e" }), /into itself/);
  await assert.rejects(tool.rename({ command: "rename", old_path: "/memories/x", new_path: "/memories/y" }), /does not exist/);
  await tool.create({ command: "create", path: "/memories/e.md", file_text: "" });
  await assert.rejects(tool.rename({ command: "rename", old_path: "/memories/d/f.md", new_path: "/memories/e.md" }), /already exists/);
  assert.equal(await tool.delete({ command: "delete", path: "/memories/d" }), "Successfully deleted /memories/d");
  assert.match(await tool.view({ command: "view", path: "/memories" }), /\n0B\t\/memories\n0B\t\/memories\/e.md$/);
});
