"""HTTP p50 against the core's in-process p50 at 10,000 x 384, interleaved, as ratios.

What ``bench.latency`` measures for its 10,000 x 384 case (the local stack with one worker,
memories seeded straight into Redis, bodies encoded beforehand; the core's
``Memories.search`` / ``relevant`` called in this process), measured in rounds that alternate
the two: each round takes, per operation, ``requests`` requests over HTTP and as many calls of
the core, in alternating blocks of ``BLOCK``, so that both sides of a ratio see the same load
on a shared machine. A ratio is a round's HTTP p50 over the same round's core p50; the figure
is the median of the rounds' ratios.

The HTTP side is timed twice, block by block: with the standard library's ``http.client`` on
one kept-alive connection (``PlainClient``: the figure the targets apply to) and with the
kept-alive httpx client ``bench.latency`` uses (reported beside it). The path is the server's
work between a request's bytes and its answer's; a client library's own work per request is
the caller's, and it differs by library more than the path does: on this project's machine
httpx 0.28 spends about 1.3 ms of Python on a request that ``http.client`` sends and reads in
about 0.1 ms (a 404 of an ASGI app that does nothing, over uvicorn: 1.6 ms against 0.33 ms).

Targets (issue 36, "the request path, measured as a ratio"): semantic search and recall over
HTTP at most 2x the core's p50 (the path costs at most as much as the core's work), keyword
search at most 3x. Recall's core is ``Memories.relevant`` (the memories of a recall), as in
``bench.latency``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import statistics
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the stack's functions run

import numpy as np
import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.memories.indexes import wait_for_exact
from agent_memory.memories.models import SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.registry import Stores
from bench.latency import (
    ACTOR,
    API_KEY,
    INDEX_CACHE_MB,
    INSTANCE,
    LIMIT,
    QUERIES,
    SEED,
    Case,
    Corpus,
    bodies,
    client,
    cycling,
    local_stack,
    memory_client,
    prepare_sessions,
    recall_request,
    seed,
)
from bench.measure import percentile, timed
from kividb_memory import NotFoundError
from tools.progress import Stage

OPS = ("search semantic", "search hybrid", "search keyword", "recall")
TARGETS = {"search semantic": 2.0, "search keyword": 3.0, "recall": 2.0}
"""HTTP p50 / core p50 at most this (issue 36); hybrid search is reported without one."""
CASE = Case(10_000, 384)
BLOCK = 25
"""Requests over HTTP, then calls of the core, in blocks of this many: each side runs warm (a
server that sleeps between single requests wakes up late on a loaded machine, which
``bench.latency``'s runs of 200 never measure), and both see the same minutes of load."""


@dataclass
class Ratios:
    """Per operation, each round's HTTP p50 and core p50 (ms)."""

    http: dict[str, list[float]] = field(default_factory=dict)
    """Through ``PlainClient`` (the standard library's ``http.client``)."""
    core: dict[str, list[float]] = field(default_factory=dict)
    httpx: dict[str, list[float]] = field(default_factory=dict)
    """The same requests through the kept-alive httpx client of ``bench.latency``."""
    load: list[float] = field(default_factory=list)
    """The machine's 1-minute load average before each round."""

    def ratios(self, op: str) -> list[float]:
        """Each round's HTTP p50 / core p50."""
        return [h / c for h, c in zip(self.http[op], self.core[op], strict=True)]

    def ratio(self, op: str) -> float:
        """The median over rounds of ``ratios``."""
        return statistics.median(self.ratios(op))

    def httpx_ratio(self, op: str) -> float | None:
        """The median over rounds of httpx's HTTP p50 / core p50 (None when not measured)."""
        if not self.httpx.get(op):
            return None
        pairs = zip(self.httpx[op], self.core[op], strict=True)
        return statistics.median(h / c for h, c in pairs)


class PlainClient:
    """POSTs to the local stack on one kept-alive ``http.client`` connection, with the API
    key; an answer other than 200 raises ``RuntimeError`` with its status and body. A
    connection the server closed is opened again once per request."""

    def __init__(self, base_url: str, api_key: str) -> None:
        parts = urlsplit(base_url)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._connection = http.client.HTTPConnection(self._host, self._port, timeout=300)

    def post(self, path: str, body: bytes) -> bytes:
        """The body of a 200 answer to ``POST path`` with ``body``."""
        for attempt in (1, 2):
            try:
                self._connection.request("POST", path, body=body, headers=self._headers)
                answer = self._connection.getresponse()
                data = answer.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._connection.close()
                if attempt == 2:
                    raise
        if answer.status != 200:
            raise RuntimeError(f"POST {path}: {answer.status} {data[:300]!r}")
        return data

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def _core_calls(memories: Memories, queries: list[Any]) -> dict[str, Callable[[], None]]:
    """Per operation: a no-argument call of the core for the next query, round and round."""
    asked = {
        mode: [
            SearchRequest.model_validate(
                {
                    "query": q.text,
                    "mode": mode,
                    "actor_id": ACTOR,
                    "limit": LIMIT,
                    "query_vector": None if mode == "keyword" else q.values,
                }
            )
            for q in queries
        ]
        for mode in ("semantic", "hybrid", "keyword")
    }
    calls: dict[str, Callable[[], None]] = {
        f"search {mode}": cycling(requests, memories.search) for mode, requests in asked.items()
    }
    recalls = [(q.text, recall_request(q.values)) for q in queries]
    calls["recall"] = cycling(recalls, lambda r: memories.relevant(ACTOR, *r))
    return calls


def measure_ratios(
    redis_url: str,
    rounds: int,
    requests: int,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> Ratios:
    """Seed the 10,000 x 384 case on ``redis_url``, start the local stack on it and measure
    ``rounds`` interleaved rounds of ``requests`` requests per operation and side."""
    corpus = Corpus(CASE.dims, SEED)
    queries = corpus.queries(np.random.default_rng([SEED, 1, CASE.size, CASE.dims]), QUERIES)
    text_client = redis.Redis.from_url(redis_url, decode_responses=True)
    binary = redis.Redis.from_url(redis_url)
    found = Ratios()
    with (
        local_stack(redis_url) as (url, _),
        client(url) as httpx_client,
        memory_client(url) as memory,
        contextlib.closing(PlainClient(url, API_KEY)) as plain,
    ):
        settings = {"dimensions": CASE.dims, "dedupe_threshold": 1.0, "redact_pii": False}
        with contextlib.suppress(NotFoundError):
            memory.delete_store(INSTANCE, CASE.store)
        memory.put_store(INSTANCE, CASE.store, **settings)
        stores = Stores(text_client, INSTANCE, FernetCipher(Fernet.generate_key()), SystemClock())
        config = stores.get(CASE.store)
        with progress(f"{CASE.label}: seed", CASE.size) as bar:
            seed(binary, config, corpus, CASE.size, bar)
        prepare_sessions(memory.store(INSTANCE, CASE.store), corpus)
        memories = Memories(
            StoreDatabase(text_client, binary, config, SystemClock()),
            NoEmbedder(CASE.dims),
            IndexCache(INDEX_CACHE_MB * 1024 * 1024),
            "bench",
        )
        core = _core_calls(memories, queries)
        prepared = {op: bodies(op, queries) for op in OPS}
        posts: dict[str, Callable[[], None]] = {}
        httpx_posts: dict[str, Callable[[], None]] = {}
        for op in OPS:

            def post(body: bytes, path: str = CASE.op_path(op)) -> None:
                plain.post(path, body)

            def httpx_post(body: bytes, path: str = CASE.op_path(op)) -> None:
                httpx_client.post(path, content=body).raise_for_status()

            posts[op] = cycling(prepared[op], post)
            httpx_posts[op] = cycling(prepared[op], httpx_post)
        with progress(f"{CASE.label}: warm up", len(OPS)) as bar:
            for op in OPS:  # the worker's index cache and the core's, the scripts
                for _ in range(20):
                    posts[op]()
                    httpx_posts[op]()
                    core[op]()
                bar.advance()
            wait_for_exact()
        with progress(f"{CASE.label}: HTTP / core", rounds * len(OPS) * requests) as bar:
            for _ in range(rounds):
                found.load.append(os.getloadavg()[0])
                for op in OPS:
                    http_ms: list[float] = []
                    httpx_ms: list[float] = []
                    core_ms: list[float] = []
                    for start in range(0, requests, BLOCK):
                        block = min(BLOCK, requests - start)
                        http_ms += timed(posts[op], block, bar)
                        core_ms += timed(core[op], block)
                        httpx_ms += timed(httpx_posts[op], block)
                    found.http.setdefault(op, []).append(percentile(http_ms, 50))
                    found.core.setdefault(op, []).append(percentile(core_ms, 50))
                    found.httpx.setdefault(op, []).append(percentile(httpx_ms, 50))
    return found


def ratio_rows(found: Ratios) -> list[str]:
    """The Markdown table of ``found``: per operation, the p50s, the ratio and its verdict."""
    from bench.measure import verdict

    rows = [
        "| 10,000 x 384 | HTTP p50 | core in-process p50 | HTTP minus core | HTTP / core "
        "(rounds: min - max) | target | | through httpx: p50, / core |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for op in OPS:
        http, core = statistics.median(found.http[op]), statistics.median(found.core[op])
        ratios = found.ratios(op)
        target = TARGETS.get(op)
        ratio = found.ratio(op)
        via_httpx = found.httpx_ratio(op)
        httpx_cell = (
            f"{statistics.median(found.httpx[op]):.2f} ms, {via_httpx:.2f}x"
            if via_httpx is not None
            else "(not measured)"
        )
        rows.append(
            f"| {op} | {http:.2f} ms | {core:.2f} ms | {http - core:.2f} ms | **{ratio:.2f}x** "
            f"({min(ratios):.2f} - {max(ratios):.2f}) | "
            + (f"≤ {target:g}x | {verdict(ratio <= target)} |" if target else "| |")
            + f" {httpx_cell} |"
        )
    return rows
