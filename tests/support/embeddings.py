"""A fake embeddings provider on loopback that speaks OpenAI's ``/v1/embeddings``, scripted."""

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DIMS = 8

Reply = tuple[int, dict[str, str], bytes]
Script = Callable[["FakeProvider", dict[str, Any]], Reply]


def vector_for(text: str, dimensions: int) -> list[float]:
    """The fake provider's embedding of ``text``: float32 values from a hash, as Python floats."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    values = np.random.default_rng(seed).uniform(-1.0, 1.0, dimensions).astype(np.float32)
    return [float(v) for v in values]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeProvider:
    url: str = ""
    dimensions: int = DIMS
    requests: list[Seen] = field(default_factory=list)
    script: list[Script] = field(default_factory=list)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        dims = body.get("dimensions", self.dimensions)
        return {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": vector_for(text, dims)}
                for i, text in enumerate(body["input"])
            ],
            "model": body["model"],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }


def ok(change: Callable[[dict[str, Any]], Any] | None = None, *, replace: bool = False) -> Script:
    """A 200 with the standard answer, changed in place by ``change``, or with ``replace``
    swapped for what ``change`` returns (a JSON value, or raw text when a string)."""

    def reply(fake: FakeProvider, body: dict[str, Any]) -> Reply:
        answer: Any = fake.answer(body)
        if change is not None:
            changed = change(answer)
            answer = changed if replace else answer
        payload = answer.encode() if isinstance(answer, str) else json.dumps(answer).encode()
        return 200, {}, payload

    return reply


def fail(
    status: int,
    message: str | None = None,
    headers: dict[str, str] | None = None,
    code: str | None = None,
) -> Script:
    def reply(fake: FakeProvider, body: dict[str, Any]) -> Reply:
        error = {"error": {"message": message, "type": "test", "code": code}} if message else {}
        return status, dict(headers or {}), json.dumps(error).encode()

    return reply


def slow(seconds: float) -> Script:
    def reply(fake: FakeProvider, body: dict[str, Any]) -> Reply:
        time.sleep(seconds)
        return ok()(fake, body)

    return reply


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "FakeServer"

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        fake.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        headers: dict[str, str]
        if self.path != "/v1/embeddings":
            status, headers, payload = 404, {}, b'{"error": {"message": "no such route"}}'
        else:
            script = fake.script.pop(0) if fake.script else ok()
            status, headers, payload = script(fake, body)
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeProvider) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.fake = fake


@contextmanager
def serving(provider: FakeProvider) -> Iterator[FakeProvider]:
    """``provider`` served on a loopback port (its ``url`` set) while the block runs."""
    server = FakeServer(provider)
    provider.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
