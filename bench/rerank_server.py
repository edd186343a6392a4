"""A loopback reranker for the retrieval benchmark: Cohere's Rerank v2 shape at ``POST
{url}/rerank``, every answer after a fixed delay, relevance by word overlap.

No cross-encoder can be installed here (their weights come from a model hub), so this stands in
for one to time the rerank stage of a search (``bench.retrieval``'s "hybrid + rerank" row: the
stack's HTTP call, the provider client, the stage) with a provider that takes ``delay``
seconds, as a hosted reranker does (Cohere's rerank-v3.5 answers 50 documents in about 0.1 to
0.3 s). Its order (the share of the query's lower-cased words each document holds) is not a
model's: the row's hit@10 says what word overlap does, nothing about a cross-encoder.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tools.scripted_model import overlap


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: RerankServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        time.sleep(self.server.delay)
        documents = body.get("documents") or []
        top = body.get("top_n") or len(documents)
        scored = sorted(
            ((i, overlap(body.get("query", ""), d)) for i, d in enumerate(documents)),
            key=lambda p: (-p[1], p[0]),
        )[:top]
        answer: dict[str, Any] = {
            "id": "bench",
            "results": [{"index": i, "relevance_score": s} for i, s in scored],
            "meta": {"billed_units": {"search_units": 1}},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class RerankServer(ThreadingHTTPServer):
    """The server on a free loopback port; ``url`` is the base URL a store's
    ``rerank_base_url`` takes (``custom`` provider), ``delay`` the seconds before each answer."""

    daemon_threads = True

    def __init__(self, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.delay = delay
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> threading.Thread:
        """Serve from a daemon thread; ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        return thread
