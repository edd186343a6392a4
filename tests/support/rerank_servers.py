"""A loopback reranker for tests: real HTTP, each provider's wire shape, scripted failures.

``RerankServer("cohere")`` answers ``POST {url}/rerank`` as Cohere's Rerank v2 does
(``{"id", "results": [{"index", "relevance_score"}], "meta"}``), ``"voyage"`` as Voyage's
(``{"object": "list", "data": [...], "model", "usage"}``, the count asked as ``top_k``) and
``"jina"`` as Jina's (``{"model", "usage", "results": [...]}``). ``url`` is
``http://127.0.0.1:PORT/v1``. Its relevance is a real one, so that a test can tell its order
from the fused order: the share of the query's words (lower-cased runs of letters and digits)
found in a document, with ``boost`` words counting double.

Scripted answers are taken in order before that (``fail``: a status with an error body;
``garbage``: a 200 whose JSON body is the given object; ``delay``: seconds to wait before the
next answer). Every request is recorded (path, lower-case headers, parsed body).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Shape = Literal["cohere", "voyage", "jina"]
_WORDS = re.compile(r"[a-z0-9]+")


def overlap(query: str, document: str) -> float:
    """The share of the query's distinct words found in ``document`` (0 to 1)."""
    wanted = set(_WORDS.findall(query.lower()))
    found = set(_WORDS.findall(document.lower()))
    return len(wanted & found) / len(wanted) if wanted else 0.0


@dataclass
class RerankRecord:
    """One request: path, lower-case headers, parsed JSON body."""

    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class _Scripted:
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class RerankServer:
    """See the module docstring."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.requests: list[RerankRecord] = []
        self.url = ""
        self._queue: list[_Scripted] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self.delay = 0.0
        """Seconds every answer that is not scripted waits (a slow reranker)."""

    def fail(self, status: int, headers: dict[str, str] | None = None, delay: float = 0.0) -> None:
        """Answer the next request with ``status`` and a provider-shaped error body."""
        body = {"message": "scripted failure sk-should-never-be-quoted"}
        self._queue.append(_Scripted(status, body, delay, headers or {}))

    def garbage(self, body: Any, delay: float = 0.0) -> None:
        """Answer the next request 200 with ``body`` as its JSON."""
        self._queue.append(_Scripted(200, body, delay))

    def _answer(self, body: Any) -> tuple[int, dict[str, str], Any, float]:
        with self._lock:
            scripted = self._queue.pop(0) if self._queue else None
        if scripted is not None:
            return scripted.status, scripted.headers, scripted.body, scripted.delay
        documents = body["documents"]
        top = body.get("top_k" if self.shape == "voyage" else "top_n") or len(documents)
        scored = sorted(
            ((i, overlap(body["query"], d)) for i, d in enumerate(documents)),
            key=lambda p: (-p[1], p[0]),
        )[:top]
        results = [{"index": i, "relevance_score": s} for i, s in scored]
        if self.shape == "voyage":
            answer = {"object": "list", "data": results, "model": body["model"],
                      "usage": {"total_tokens": 10}}  # fmt: skip
        elif self.shape == "jina":
            answer = {"model": body["model"], "usage": {"total_tokens": 10}, "results": results}
        else:
            meta = {"billed_units": {"search_units": 1}}
            answer = {"id": "r-1", "results": results, "meta": meta}
        return 200, {}, answer, self.delay

    def __enter__(self) -> RerankServer:
        self._server = _Server(self)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        scripted = self.server.scripted
        headers = {k.lower(): v for k, v in self.headers.items()}
        with scripted._lock:
            scripted.requests.append(RerankRecord(self.path, headers, body))
        if not self.path.endswith("/rerank"):
            status, extra, answer, delay = 404, {}, {"message": "not found"}, 0.0
        else:
            status, extra, answer, delay = scripted._answer(body)
        if delay:
            time.sleep(delay)
        payload = json.dumps(answer).encode()
        try:
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a time-out test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scripted: RerankServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripted = scripted
