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
next answer). Every request is recorded (``model_servers.Recorded``: path, lower-case headers,
parsed body); a path other than ``/v1/rerank`` answers 404.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_memory.memories.models import MemoryView
from tests.support.model_servers import LoopbackJsonServer
from tools.scripted_model import overlap

Shape = Literal["cohere", "voyage", "jina"]


@dataclass
class _Scripted:
    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class RerankServer(LoopbackJsonServer):
    """See the module docstring."""

    def __init__(self, shape: Shape) -> None:
        super().__init__()
        self.shape = shape
        self._queue: list[_Scripted] = []
        self.delay = 0.0
        """Seconds every answer that is not scripted waits (a slow reranker)."""

    def fail(self, status: int, headers: dict[str, str] | None = None, delay: float = 0.0) -> None:
        """Answer the next request with ``status`` and a provider-shaped error body."""
        body = {"message": "scripted failure sk-should-never-be-quoted"}
        with self._lock:
            self._queue.append(_Scripted(status, body, delay, headers or {}))

    def garbage(self, body: Any, delay: float = 0.0) -> None:
        """Answer the next request 200 with ``body`` as its JSON."""
        with self._lock:
            self._queue.append(_Scripted(200, body, delay))

    def _answer(self, path: str, body: Any) -> tuple[int, dict[str, str], bytes, float, str | None]:
        if path != "/v1/rerank":
            return 404, {}, b'{"message": "not found"}', 0.0, None
        with self._lock:
            scripted = self._queue.pop(0) if self._queue else None
        if scripted is not None:
            payload = json.dumps(scripted.body).encode()
            return scripted.status, scripted.headers, payload, scripted.delay, None
        documents = body["documents"]
        top = body.get("top_k" if self.shape == "voyage" else "top_n") or len(documents)
        scored = sorted(
            ((i, overlap(body["query"], d)) for i, d in enumerate(documents)),
            key=lambda p: (-p[1], p[0]),
        )[:top]
        results = [{"index": i, "relevance_score": s} for i, s in scored]
        if self.shape == "voyage":
            answer = {
                "object": "list",
                "data": results,
                "model": body["model"],
                "usage": {"total_tokens": 10},
            }
        elif self.shape == "jina":
            answer = {"model": body["model"], "usage": {"total_tokens": 10}, "results": results}
        else:
            meta = {"billed_units": {"search_units": 1}}
            answer = {"id": "r-1", "results": results, "meta": meta}
        return 200, {}, json.dumps(answer).encode(), self.delay, None


def views(*texts: str) -> list[MemoryView]:
    """Search results of one actor holding ``texts``, best first (scores 1.0, 0.9, ...): the
    fused candidates a rerank stage starts from."""
    from datetime import UTC, datetime

    now = datetime(2026, 1, 1, tzinfo=UTC)
    fields = {
        "type": "semantic",
        "actor_id": "alice",
        "topics": [],
        "metadata": {},
        "importance": None,
        "confidence": None,
        "created_at": now,
        "updated_at": now,
        "expires_at": now,
        "source": None,
        "valid_from": now,
    }
    return [
        MemoryView(id=f"mem_{i:032x}", text=t, score=1.0 - i / 10, **fields)
        for i, t in enumerate(texts)
    ]
