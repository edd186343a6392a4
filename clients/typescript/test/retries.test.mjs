// The client's retry rules (src/http.ts), against a loopback server that answers as scripted:
// which answers are sent again, how long the client waits, and that a write goes out again only
// with the same Idempotency-Key. (The API itself is exercised by client.test.mjs.)

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import { ApiConnectionError, MemoryClient, RateLimitedError, UnavailableError } from "../dist/index.js";

let server;
let base;
const seen = [];
let script = [];

before(async () => {
  server = createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      seen.push({ method: request.method, url: request.url, headers: request.headers, body, at: Date.now() });
      const next = script.shift() ?? { status: 200, body: { stores: [], unreachable: [] } };
      if (next.hang) return; // never answers
      if (next.cut) {
        // the answer's head and part of its body, then the connection is cut
        response.writeHead(200, { "content-type": "application/json", "content-length": "1000" });
        response.write('{"stores": [');
        setTimeout(() => response.socket.destroy(), 20);
        return;
      }
      response.writeHead(next.status, { "content-type": "application/json", ...(next.headers ?? {}) });
      response.end(JSON.stringify(next.body ?? {}));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.closeAllConnections() || server.close());

function reset(steps) {
  seen.length = 0;
  script = steps;
}

const unavailable = (after = "1") => ({
  status: 503,
  headers: { "retry-after": after },
  body: { error: "database_unavailable", message: "The database cannot be reached right now." },
});

test("a read is sent again after a 503, waiting its Retry-After", async () => {
  reset([unavailable("1")]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  const answer = await client.listStores();
  assert.deepEqual(answer, { stores: [], unreachable: [] });
  assert.equal(seen.length, 2);
  assert.ok(seen[1].at - seen[0].at >= 950);
});

test("a write is sent again with the same Idempotency-Key", async () => {
  reset([unavailable("0"), { status: 200, body: { session_id: "s", added: 1, message_count: 1 } }]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  await client.store("i", "s").addEvents("s", [{ role: "user", content: "x" }]);
  assert.equal(seen.length, 2);
  const keys = seen.map((r) => r.headers["idempotency-key"]);
  assert.ok(keys[0] && keys[0] === keys[1]);
  assert.equal(seen[0].body, seen[1].body);
});

test("a call that is not safe twice is not sent again after a 503", async () => {
  reset([unavailable("0")]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  await assert.rejects(client.createKey("read"), (error) => {
    assert.ok(error instanceof UnavailableError);
    assert.equal(error.retryAfter, 0);
    return true;
  });
  assert.equal(seen.length, 1);
});

test("a 429 is sent again; a Retry-After past maxRetryWaitMs is not waited for", async () => {
  const throttled = { status: 429, headers: { "retry-after": "0" }, body: { message: "Too Many Requests" } };
  reset([throttled]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  await client.listStores();
  assert.equal(seen.length, 2);
  reset([{ ...throttled, headers: { "retry-after": "3600" } }]);
  await assert.rejects(client.listStores(), (error) => {
    assert.ok(error instanceof RateLimitedError);
    assert.equal(error.retryAfter, 3600);
    return true;
  });
  assert.equal(seen.length, 1);
});

test("at most maxRetries retries, then the last error", async () => {
  reset([unavailable("0"), unavailable("0"), unavailable("0"), unavailable("0")]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test", maxRetries: 2 });
  await assert.rejects(client.listStores(), UnavailableError);
  assert.equal(seen.length, 3);
});

test("an attempt past timeoutMs is an ApiConnectionError, and the key goes only in the header", async () => {
  reset([{ hang: true }, { hang: true }]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_secret_key_value", timeoutMs: 200, maxRetries: 1 });
  await assert.rejects(client.listStores(), (error) => {
    assert.ok(error instanceof ApiConnectionError);
    assert.equal(error.aborted, false);
    assert.match(error.message, /no answer within 200 ms/);
    assert.ok(!`${error.message}${error.stack}`.includes("kvm_secret_key_value"));
    return true;
  });
  assert.equal(seen.length, 2);
  assert.equal(seen[0].headers.authorization, "Bearer kvm_secret_key_value");
  assert.ok(!seen[0].url.includes("kvm_secret"));
});

test("a server that cannot be reached is an ApiConnectionError naming no key", async () => {
  const client = new MemoryClient({ baseUrl: "http://127.0.0.1:1", apiKey: "kvm_secret_key_value", maxRetries: 0 });
  await assert.rejects(client.listStores(), (error) => {
    assert.ok(error instanceof ApiConnectionError);
    assert.ok(!error.message.includes("kvm_secret"));
    return true;
  });
});

test("a client needs a URL and a key", () => {
  const saved = { url: process.env.KIVIDB_API_URL, key: process.env.KIVIDB_API_KEY };
  delete process.env.KIVIDB_API_URL;
  delete process.env.KIVIDB_API_KEY;
  try {
    assert.throws(() => new MemoryClient(), /baseUrl/);
    assert.throws(() => new MemoryClient({ baseUrl: base }), /apiKey/);
  } finally {
    if (saved.url !== undefined) process.env.KIVIDB_API_URL = saved.url;
    if (saved.key !== undefined) process.env.KIVIDB_API_KEY = saved.key;
  }
});

test("a connection cut while the answer comes: a read is sent again, a create is not", async () => {
  reset([{ cut: true }]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  assert.deepEqual(await client.listStores(), { stores: [], unreachable: [] });
  assert.equal(seen.length, 2);

  reset([{ cut: true }]);
  await assert.rejects(client.createKey("read", { name: "once" }), (error) => {
    assert.ok(error instanceof ApiConnectionError, String(error));
    assert.match(error.message, /failed after it was sent/);
    assert.ok(!error.message.includes("kvm_test"));
    return true;
  });
  assert.equal(seen.length, 1); // it may have been created: never sent twice
});

test("a connection reset after the request went out is not a connection never made", async () => {
  // a fetch that sends, then fails as undici does when the socket closes (UND_ERR_SOCKET)
  reset([]);
  let calls = 0;
  const lossy = async (url, init) => {
    calls += 1;
    const answer = await fetch(url, init);
    await answer.text();
    throw new TypeError("fetch failed", { cause: { code: "UND_ERR_SOCKET" } });
  };
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test", fetch: lossy });
  await assert.rejects(client.createKey("read"), ApiConnectionError);
  assert.equal(calls, 1);
  // a connection refused is retried, whatever the call
  let refused = 0;
  const closed = async () => {
    refused += 1;
    throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
  };
  const down = new MemoryClient({ baseUrl: base, apiKey: "kvm_test", fetch: closed, maxRetries: 2 });
  await assert.rejects(down.createKey("read"), /could not reach the API \(ECONNREFUSED\)/);
  assert.equal(refused, 3);
});

test("a timeout while the body is read is an ApiConnectionError", async () => {
  reset([{ cut: true }]);
  const slow = async (url, init) => {
    const answer = await fetch(url, init);
    return new Response(new ReadableStream({ start() {} }), { status: 200, headers: answer.headers });
  };
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test", fetch: slow, timeoutMs: 200, maxRetries: 0 });
  await assert.rejects(client.listStores(), (error) => error instanceof ApiConnectionError && /within 200 ms/.test(error.message));
});

test("a lone surrogate is sent as U+FFFD, the body stays valid JSON", async () => {
  reset([{ status: 200, body: { session_id: "s", added: 1, message_count: 1 } }]);
  const client = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" });
  await client.store("i", "s").addEvents("s", [{ role: "user", content: "cut emoji \ud83d and \ude00 and \ud83d\ude00" }]);
  assert.equal(JSON.parse(seen[0].body).events[0].content, "cut emoji \ufffd and \ufffd and \ud83d\ude00");
});

test("ids are checked before any call, as a rejected promise", async () => {
  reset([]);
  const store = new MemoryClient({ baseUrl: base, apiKey: "kvm_test" }).store("i", "s");
  const pending = store.getSession("");
  assert.ok(pending instanceof Promise);
  await assert.rejects(pending, TypeError);
  await assert.rejects(store.getSession(".."), /cannot be "\.\."/);
  await assert.rejects(store.getMemory("."), TypeError);
  await assert.rejects(store.addEvents("s", [], { idempotencyKey: "not ascii ✓" }), TypeError);
  assert.equal(seen.length, 0);
});
