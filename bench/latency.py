"""Long-term memory latency through the local stack, warm and cold (DESIGN section 7).

Starts its own ``redis-server`` and the local stack with one worker process
(``KIVIDB_WORKERS=1``, so every request reaches the same warm worker and its index cache), and
for one actor holding 1,000, 10,000 and 100,000 memories of 1,536 dimensions (and 10,000 of
384, the size DESIGN's search targets name) measures, vectors supplied so no provider time
counts:

- warm: search (semantic, hybrid, keyword; limit 10) and recall (hybrid memories plus working
  memory), ``--requests`` requests per operation in each of ``--runs`` runs after a few
  warm-up requests, from one kept-alive client: p50 and p99 (medians over the runs);
- adding a memory with its vector (p50, p99), each add followed at once by a search for it,
  which must find it ("searchable as soon as the answer arrives");
- cold: the first recall and the first semantic search in a fresh stack process (restarted
  for every sample; its worker has run the functions' INIT, their imports, at start, as
  provisioned concurrency does), the first recall in a fresh process that imports the functions
  on that request (``KIVIDB_LAZY_INIT=1``, an on-demand cold start), and the first recall on the
  actor in a process that already served another actor (the cache load alone);
- baselines in the same run: a plain exact NumPy scan (float32 matrix @ query, argpartition
  top 10) over the same vectors, and the core's search called in-process (no HTTP);
- correctness: for 20 queries per size, the ids of the semantic search over HTTP against the
  exact scan's top 10 (identical lists, and recall@10);
- peak resident memory (VmHWM) of the stack's processes, and Redis's peak memory.

The memories are written to Redis directly (the same keys and records ``Memories.add``
writes), since adding 100,000 through HTTP one by one would take too long. Vectors are
clustered (200 random centres, each memory a centre plus noise) and texts are a few words of a
fixed Zipf-distributed vocabulary, so neither the vector nor the keyword side is trivially easy.
Writes ``bench/results/latency.md`` and ``.png``.

    python -m bench.latency                          # 1,000, 10,000, 100,000 (+ 10,000 x 384)
    python -m bench.latency --sizes 1000,10000 --no-384
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# One BLAS thread, as the stack's functions run (template.yaml, local/__main__.py), so that the
# in-process baselines compute the same way; before numpy is first imported. The stack inherits
# this environment: OPENBLAS_NUM_THREADS=2 python -m bench.latency measures both with two.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import httpx
import numpy as np
import redis
from cryptography.fernet import Fernet
from numpy.typing import NDArray

from agent_memory.clock import SystemClock, to_ms
from agent_memory.database.keys import actor_bucket, actor_tag
from agent_memory.memories.indexes import wait_for_exact
from agent_memory.memories.models import RecallRequest, SearchRequest
from agent_memory.memories.reads import unit
from agent_memory.memories.records import MemoryRecord, encode_memory
from agent_memory.memories.service import Memories
from agent_memory.memories.store_level import queue_store_level
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import Stores
from bench.measure import peak_rss_mb, percentile, timed
from kividb_memory import MemoryClient, NotFoundError, StoreClient
from local.bootstrap import start_redis_server
from local.launch import running_stack
from tools.progress import Progress, Stage

RESULTS = ROOT / "bench" / "results"
LAZY_COLD = "first recall, fresh process, functions imported by it (on-demand cold start)"
CODE = ["layers", "functions", "local", "template.yaml"]
"""What the measured stack runs (checked for uncommitted changes)."""
API_KEY = "kvm_bench_0123456789abcdefghijklmnopqrstuv"
INSTANCE = "local"
ACTOR = "user-bench"
OTHER_ACTOR = "user-other"
SESSION = "bench-session"
OTHER_SESSION = "other-session"
LIMIT = 10
SEED = 20261130
CLUSTERS = 200
NOISE = 1.0
"""Norm of the noise added to a unit centre: a memory's cosine with its centre is about 0.7."""
VOCABULARY = 5000
CHECK_QUERIES = 20
QUERIES = 50
INDEX_CACHE_MB = 256
MODES = ("semantic", "hybrid", "keyword")
OPS = ("search semantic", "search hybrid", "search keyword", "recall")
TURN = [
    {"role": "user", "content": "Can you remind me what we decided about the staging cache?"},
    {"role": "assistant", "content": "You moved it to eu-west-1 last week, on a Friday."},
]


# --- targets (DESIGN section 7) ----------------------------------------------------------------


def targets(size: int, dims: int) -> dict[str, tuple[str, float]]:
    """Targets that apply to one case: measure name -> (statistic, milliseconds)."""
    found: dict[str, tuple[str, float]] = {}
    if dims == 1536 and size == 10_000:
        found["recall p50"] = ("p50", 10.0)
        found["recall p99"] = ("p99", 30.0)
        found["first recall, fresh process"] = ("median", 300.0)
    if dims == 1536 and size == 100_000:
        found["recall p50"] = ("p50", 40.0)
    if dims == 384 and size == 10_000:
        found["search semantic p50"] = ("p50", 5.0)
        found["search hybrid p50"] = ("p50", 6.0)
        found["search keyword p50"] = ("p50", 3.0)
        found["add memory p50"] = ("p50", 3.0)
    return found


PATH_BUDGET_MS = 1.5
"""Warm search over HTTP at most the core's in-process time plus this, at 10,000 x 384."""
SCAN_RATIO = 2.0
"""Warm core recall at most this many times an exact NumPy scan, at 10,000 x 1,536."""


# --- helpers -----------------------------------------------------------------------------------


@contextmanager
def local_stack(
    redis_url: str, *, lazy_init: bool = False, snapstart: bool = True, timeout: float = 60.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m local`` with one worker on a free port (see ``local.launch``); with
    ``lazy_init`` its functions are imported by their first request (``KIVIDB_LAZY_INIT``);
    without ``snapstart`` it skips the SnapStart hooks after its imports (``KIVIDB_SNAPSTART``);
    ``timeout``: seconds it may take to start."""
    with TemporaryDirectory() as local_dir:
        env: dict[str, str | None] = {
            "KIVIDB_SNAPSTART": None if snapstart else "0",
            "KIVIDB_LAZY_INIT": "1" if lazy_init else None,
            "REDIS_URL": redis_url,
            "KIVIDB_API_KEY": API_KEY,
            "KIVIDB_LOCAL_DIR": local_dir,
            "KIVIDB_WORKERS": "1",
            "KIVIDB_INDEX_CACHE_MB": str(INDEX_CACHE_MB),
        }
        with running_stack(env, timeout=timeout) as running:
            yield running


def memory_client(url: str) -> MemoryClient:
    """The Python client, for everything but the timed requests."""
    return MemoryClient(url, API_KEY, timeout=300, max_retries=0)


def client(url: str) -> httpx.Client:
    """Plain httpx for the timed requests only: they send bodies encoded beforehand, so that a
    figure is the API's time and not also the Python client's model work on a 1,536-float
    vector."""
    return httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
        timeout=300,
    )


# --- data --------------------------------------------------------------------------------------


def recall_request(values: list[float]) -> RecallRequest:
    """What the core's recall reads besides the query text: its vector and ``LIMIT``."""
    return RecallRequest(session_id="bench", query_vector=values, limit=LIMIT)


@dataclass
class Query:
    text: str
    vector: NDArray[np.float32]
    """As the server will hold it: the unit-length float32 of the values sent."""
    values: list[float]


class Corpus:
    """Deterministic clustered vectors and Zipf-worded texts for one dimension count."""

    def __init__(self, dims: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.dims = dims
        syllables = "ka lo mi ren tos vu zel pra dun fi gor sha ti bel nox qua ri sol tem wy"
        parts = syllables.split()
        words = sorted({a + b + c for a in parts for b in parts for c in ["", *parts]})
        picked = rng.choice(len(words), VOCABULARY + CLUSTERS * 3, replace=False)
        self.vocabulary = [words[i] for i in picked[:VOCABULARY]]
        self.topic_words = [words[i] for i in picked[VOCABULARY:]]
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** 1.05
        self.zipf = weights / weights.sum()
        centres = rng.standard_normal((CLUSTERS, dims))
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)

    def vectors(self, rng: np.random.Generator, clusters: NDArray[np.int64]) -> NDArray[np.float32]:
        """Unit float32 rows, normalised as ``memories.reads.unit`` does (in float64)."""
        noise = rng.standard_normal((clusters.size, self.dims)) * (NOISE / np.sqrt(self.dims))
        wide = self.centres[clusters] + noise
        wide /= np.max(np.abs(wide), axis=1, keepdims=True)
        wide /= np.linalg.norm(wide, axis=1, keepdims=True)
        rows: NDArray[np.float32] = wide.astype(np.float32)
        return rows

    def texts(self, rng: np.random.Generator, clusters: NDArray[np.int64]) -> list[str]:
        lengths = rng.integers(6, 15, size=clusters.size)
        words = rng.choice(VOCABULARY, size=int(lengths.sum()), p=self.zipf)
        topics = rng.integers(0, 3, size=(clusters.size, 2))
        texts, at = [], 0
        for i, cluster in enumerate(clusters):
            own = [self.topic_words[int(cluster) * 3 + int(t)] for t in topics[i]]
            rest = [self.vocabulary[int(w)] for w in words[at : at + lengths[i]]]
            at += int(lengths[i])
            texts.append(" ".join([*own[:1], *rest[:3], *own[1:], *rest[3:]]).capitalize() + ".")
        return texts

    def queries(self, rng: np.random.Generator, count: int) -> list[Query]:
        clusters = rng.integers(0, CLUSTERS, size=count)
        vectors = self.vectors(rng, clusters)
        made = []
        for cluster, row in zip(clusters, vectors, strict=True):
            topic = self.topic_words[int(cluster) * 3 + int(rng.integers(0, 3))]
            extra = [self.vocabulary[int(w)] for w in rng.choice(VOCABULARY, 2, p=self.zipf)]
            values = [float(x) for x in row]
            text = " ".join([topic, *extra])
            made.append(Query(text, unit(np.asarray(values, dtype=np.float32)), values))
        return made


@dataclass
class Seeded:
    ids: list[str]
    matrix: NDArray[np.float32]


def seed(binary: redis.Redis, config: StoreConfig, corpus: Corpus, size: int, bar: Stage) -> Seeded:
    """Write ``size`` memories of ``ACTOR`` straight to Redis, with the keys and records that
    ``Memories.add`` writes (the actor's memories, with their vectors; the store-level entries of
    ``memories.store_level.queue_store_level``), then set the actor's generation to 1 with an empty
    change log, so that any cache loads the actor in full."""
    rng = np.random.default_rng([SEED, size, corpus.dims])
    keys = config.keys()
    bucket = actor_bucket(ACTOR)
    actor = keys.actor(bucket)
    ttl_ms = config.memory_ttl_seconds * 1000
    now_ms = to_ms(SystemClock().now())
    ids: list[str] = []
    matrix = np.empty((size, corpus.dims), dtype=np.float32)
    chunk = 2000
    for start in range(0, size, chunk):
        count = min(chunk, size - start)
        clusters = rng.integers(0, CLUSTERS, size=count)
        vectors = corpus.vectors(rng, clusters)
        texts = corpus.texts(rng, clusters)
        matrix[start : start + count] = vectors
        records: dict[Any, Any] = {}
        rows: list[tuple[str, str, int, int]] = []
        for i in range(count):
            memory_id = "mem_" + actor_tag(bucket) + rng.bytes(8).hex()
            created_ms = now_ms - (size - start - i) * 1000
            record = MemoryRecord(
                id=memory_id,
                text=texts[i],
                type="semantic",
                actor_id=ACTOR,
                created_at=created_ms,
                updated_at=created_ms,
                expires_at=created_ms + ttl_ms,
            )
            ids.append(memory_id)
            records[memory_id] = encode_memory(record, vectors[i].tobytes())
            rows.append((memory_id, bucket, created_ms, created_ms + ttl_ms))
        pipe = binary.pipeline(transaction=False)
        queue_store_level(pipe, keys, rows)
        pipe.hset(actor.memories, mapping=records)
        pipe.execute()
        bar.advance(count)
    binary.hset(actor.meta, "gen", 1)
    return Seeded(ids, matrix)


def exact_top(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.intp]:
    """The baseline: a plain exact float32 scan and the 10 best rows, best first."""
    scores = matrix @ query
    top = np.argpartition(-scores, LIMIT - 1)[:LIMIT]
    return top[np.argsort(-scores[top], kind="stable")]


# --- one case ----------------------------------------------------------------------------------


@dataclass
class Case:
    size: int
    dims: int

    @property
    def label(self) -> str:
        return f"{self.size:,} x {self.dims:,}"

    @property
    def store(self) -> str:
        return f"latency-{self.size}-{self.dims}"

    @property
    def path(self) -> str:
        return f"/instances/{INSTANCE}/agent-memory/{self.store}"

    @property
    def large(self) -> bool:
        return self.size >= 100_000

    def op_path(self, op: str) -> str:
        return self.path + ("/recall" if op == "recall" else "/memories/search")


@dataclass
class Result:
    case: Case
    warm: dict[str, list[list[float]]] = field(default_factory=dict)
    """operation -> one list of latencies (ms) per run."""
    core: dict[str, list[float]] = field(default_factory=dict)
    numpy: list[float] = field(default_factory=list)
    cold: dict[str, list[float]] = field(default_factory=dict)
    add: list[float] = field(default_factory=list)
    after_add: list[float] = field(default_factory=list)
    found_after_add: int = 0
    identical: int = 0
    recall_at_10: float = 0.0
    mismatches: list[str] = field(default_factory=list)
    checked: int = 0
    rss_mb: float = 0.0
    rss_now_mb: float = 0.0
    cold_rss_mb: float = 0.0
    core_load_ms: float = 0.0
    core_index_mb: float = 0.0
    seed_s: float = 0.0
    load: list[float] = field(default_factory=list)
    """1-minute load average of the machine at the start and the end of the case."""

    def p(self, op: str, stat: str) -> float:
        runs = self.warm.get(op) or []
        if not runs:
            return float("nan")
        pct = 50.0 if stat == "p50" else 99.0
        return statistics.median(percentile(r, pct) for r in runs)


def bodies(op: str, queries: list[Query]) -> list[bytes]:
    made = []
    for q in queries:
        if op == "recall":
            body: dict[str, Any] = {
                "session_id": SESSION,
                "actor_id": ACTOR,
                "query": q.text,
                "query_vector": q.values,
                "limit": LIMIT,
            }
        else:
            mode = op.removeprefix("search ")
            body = {"query": q.text, "mode": mode, "actor_id": ACTOR, "limit": LIMIT}
            if mode != "keyword":
                body["query_vector"] = q.values
        made.append(json.dumps(body).encode())
    return made


def cycling(items: list[Any], call: Callable[[Any], object]) -> Callable[[], None]:
    """A no-argument call that applies ``call`` to the next of ``items``, round and round."""
    position = [0]

    def each() -> None:
        call(items[position[0] % len(items)])
        position[0] += 1

    return each


def run_case(
    case: Case,
    redis_url: str,
    args: argparse.Namespace,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> Result:
    result = Result(case)
    result.load.append(os.getloadavg()[0])
    corpus = Corpus(case.dims, SEED)
    queries = corpus.queries(np.random.default_rng([SEED, 1, case.size, case.dims]), QUERIES)
    text_client = redis.Redis.from_url(redis_url, decode_responses=True)
    binary = redis.Redis.from_url(redis_url)
    with (
        local_stack(redis_url) as (url, process),
        client(url) as http,
        memory_client(url) as memory,
    ):
        settings = {"dimensions": case.dims, "dedupe_threshold": 1.0, "redact_pii": False}
        with contextlib.suppress(NotFoundError):
            memory.delete_store(INSTANCE, case.store)
        memory.put_store(INSTANCE, case.store, **settings)
        store = memory.store(INSTANCE, case.store)
        stores = Stores(text_client, INSTANCE, FernetCipher(Fernet.generate_key()), SystemClock())
        config = stores.get(case.store)
        started = time.perf_counter()
        with progress(f"{case.label}: seed", case.size) as bar:
            seeded = seed(binary, config, corpus, case.size, bar)
        result.seed_s = time.perf_counter() - started
        other = prepare_sessions(store, corpus)
        check(store, case, corpus, seeded, result, progress)
        measure_warm(http, case, queries, args, result, progress)
        measure_adds(http, store, case, corpus, args, result, progress)
        result.rss_mb = peak_rss_mb(process.pid)
        result.rss_now_mb = peak_rss_mb(process.pid, "VmRSS")
    measure_baselines(text_client, binary, config, seeded, queries, args, result, progress)
    del seeded
    measure_cold(redis_url, case, queries, other, args, result, progress)
    result.load.append(os.getloadavg()[0])
    return result


def prepare_sessions(store: StoreClient, corpus: Corpus) -> Query:
    """A session of the measured actor, and another actor with a session and one memory
    (served first in the "after another actor's" cold measure); returns that memory's query."""
    for session, actor in ((SESSION, ACTOR), (OTHER_SESSION, OTHER_ACTOR)):
        store.add_events(session, TURN * 2, actor_id=actor)
    other = corpus.queries(np.random.default_rng([SEED, 2]), 1)[0]
    store.add_memory(other.text, actor_id=OTHER_ACTOR, vector=other.values)
    return other


def check(
    store: StoreClient,
    case: Case,
    corpus: Corpus,
    seeded: Seeded,
    result: Result,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> None:
    """Semantic top 10 over HTTP against the exact scan (this also loads the worker's index)."""
    checks = corpus.queries(np.random.default_rng([SEED, 3, case.size]), CHECK_QUERIES)
    hits = 0
    with progress(f"{case.label}: check", len(checks)) as bar:
        for q in checks:
            answer = store.search(
                q.text, mode="semantic", actor_id=ACTOR, limit=LIMIT, query_vector=q.values
            )
            got = [m.id for m in answer.memories]
            top = exact_top(seeded.matrix, q.vector)
            want = [seeded.ids[i] for i in top]
            shared = len(set(got) & set(want))
            hits += shared
            if got == want:
                result.identical += 1
            else:
                scores = seeded.matrix[top] @ q.vector
                gap = float(np.min(-np.diff(scores)))
                order = "same set, other order" if set(got) == set(want) else "other set"
                result.mismatches.append(
                    f"{shared}/{LIMIT} shared ({order}); smallest score gap in the exact top "
                    f"{LIMIT}: {gap:.2e}"
                )
            bar.advance()
    result.checked = len(checks)
    result.recall_at_10 = hits / (LIMIT * len(checks))


def measure_warm(
    http: httpx.Client,
    case: Case,
    queries: list[Query],
    args: argparse.Namespace,
    result: Result,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> None:
    runs = args.large_runs if case.large else args.runs
    prepared = {op: bodies(op, queries) for op in OPS}
    with progress(f"{case.label}: warm", runs * len(OPS) * args.requests) as bar:
        for _ in range(runs):
            for op in OPS:
                path = case.op_path(op)

                def post(body: bytes, path: str = path) -> None:
                    http.post(path, content=body).raise_for_status()

                for body in prepared[op][:3]:
                    post(body)
                latencies = timed(cycling(prepared[op], post), args.requests, bar)
                result.warm.setdefault(op, []).append(latencies)


def measure_adds(
    http: httpx.Client,
    store: StoreClient,
    case: Case,
    corpus: Corpus,
    args: argparse.Namespace,
    result: Result,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> None:
    """Add memories with their vectors, each followed at once by a search that must find it;
    then delete them again, so the cold measures see exactly ``size`` memories."""
    adds = max(20, args.adds // 2) if case.large else args.adds
    added = []
    with progress(f"{case.label}: add", adds) as bar:
        for q in corpus.queries(np.random.default_rng([SEED, 4, case.size]), adds):
            body = json.dumps({"text": q.text, "actor_id": ACTOR, "vector": q.values}).encode()
            started = time.perf_counter()
            answer = http.post(f"{case.path}/memories", content=body)
            result.add.append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            memory_id = answer.json()["id"]
            added.append(memory_id)
            find = json.dumps(
                {
                    "query": q.text,
                    "mode": "semantic",
                    "actor_id": ACTOR,
                    "limit": 1,
                    "query_vector": q.values,
                }
            ).encode()
            started = time.perf_counter()
            answer = http.post(f"{case.path}/memories/search", content=find)
            result.after_add.append((time.perf_counter() - started) * 1000)
            answer.raise_for_status()
            result.found_after_add += [m["id"] for m in answer.json()["memories"]] == [memory_id]
            bar.advance()
    for memory_id in added:
        store.delete_memory(memory_id)


def measure_baselines(
    text_client: redis.Redis,
    binary: redis.Redis,
    config: StoreConfig,
    seeded: Seeded,
    queries: list[Query],
    args: argparse.Namespace,
    result: Result,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> None:
    """In this process: the exact NumPy scan, and the core's search without HTTP."""
    case = result.case
    count = 50 if case.large else max(50, args.requests)
    vectors = [q.vector for q in queries]
    for vector in vectors[:5]:
        exact_top(seeded.matrix, vector)
    result.numpy = timed(cycling(vectors, lambda v: exact_top(seeded.matrix, v)), count)
    cache = IndexCache(INDEX_CACHE_MB * 1024 * 1024)
    memories = Memories(
        StoreDatabase(text_client, binary, config, SystemClock()),
        NoEmbedder(case.dims),
        cache,
        "bench",
    )
    asked: dict[str, list[SearchRequest]] = {
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
        for mode in MODES
    }
    started = time.perf_counter()
    memories.search(asked["semantic"][0])
    result.core_load_ms = (time.perf_counter() - started) * 1000
    memories.search(asked["semantic"][0])  # one loaded from its kept form reads its vectors
    wait_for_exact()
    result.core_index_mb = cache.nbytes / 2**20
    count = 30 if case.large else max(50, args.requests // 2)
    with progress(f"{case.label}: core", count * (len(MODES) + 1)) as bar:
        for mode in MODES:
            result.core[f"search {mode}"] = timed(cycling(asked[mode], memories.search), count, bar)
        recalls = [(q.text, recall_request(q.values)) for q in queries]
        result.core["recall"] = timed(
            cycling(recalls, lambda r: memories.relevant(ACTOR, *r)), count, bar
        )


def measure_cold(
    redis_url: str,
    case: Case,
    queries: list[Query],
    other: Query,
    args: argparse.Namespace,
    result: Result,
    progress: Callable[[str, int], AbstractContextManager[Stage]],
) -> None:
    """A fresh stack process for every sample: its first request, or its first request on the
    actor after one on another actor (modules and connections warm, the actor's cache cold)."""
    samples = args.large_cold if case.large else args.cold
    recall, search = bodies("recall", queries[:1])[0], bodies("search semantic", queries[:1])[0]
    other_recall = json.dumps(
        {
            "session_id": OTHER_SESSION,
            "actor_id": OTHER_ACTOR,
            "query": other.text,
            "query_vector": other.values,
        }
    ).encode()
    plans: list[tuple[str, bytes | None, str, bytes, bool]] = [
        ("first recall, fresh process", None, "recall", recall, False),
        ("first semantic search, fresh process", None, "search semantic", search, False),
        ("first recall on the actor, after another actor's", other_recall, "recall", recall, False),
        (LAZY_COLD, None, "recall", recall, True),
    ]
    with progress(f"{case.label}: cold", samples * len(plans)) as bar:
        for _ in range(samples):
            for name, before, op, body, lazy in plans:
                with (
                    local_stack(redis_url, lazy_init=lazy) as (url, process),
                    client(url) as http,
                ):
                    if before is not None:
                        http.post(case.op_path("recall"), content=before).raise_for_status()
                    started = time.perf_counter()
                    http.post(case.op_path(op), content=body).raise_for_status()
                    result.cold.setdefault(name, []).append((time.perf_counter() - started) * 1000)
                    result.cold_rss_mb = max(result.cold_rss_mb, peak_rss_mb(process.pid))
                bar.advance()


# --- report ------------------------------------------------------------------------------------


def verdict(value: float, limit: float) -> str:
    return "**pass**" if value <= limit else "**FAIL**"


def _target_rows(r: Result) -> list[str]:
    """The table rows of the DESIGN targets of one case."""
    rows = []
    for name, (stat, limit) in targets(r.case.size, r.case.dims).items():
        if name.startswith("first"):
            value = statistics.median(r.cold[name])
        elif name.startswith("add"):
            value = statistics.median(r.add)
        else:
            value = r.p(name.rsplit(" ", 1)[0], stat)
        rows.append(
            f"| {r.case.label} | {name} | {value:.1f} ms | ≤ {limit:g} ms | "
            f"{verdict(value, limit)} |"
        )
    if r.case.size == 10_000 and r.case.dims == 384:
        for mode in MODES:  # issue "Cold containers and the request path"
            http, core = r.p(f"search {mode}", "p50"), percentile(r.core[f"search {mode}"], 50)
            rows.append(
                f"| {r.case.label} | search {mode} p50 over HTTP minus the core's in-process "
                f"p50 ({http:.2f} - {core:.2f} ms) | {http - core:.2f} ms | ≤ {PATH_BUDGET_MS:g} "
                f"ms | {verdict(http - core, PATH_BUDGET_MS)} |"
            )
    if r.case.size == 10_000 and r.case.dims == 1536:
        core, scan = percentile(r.core["recall"], 50), percentile(r.numpy, 50)
        rows.append(
            f"| {r.case.label} | core recall p50 in-process / exact NumPy scan p50 ({core:.2f} / "
            f"{scan:.2f} ms) | {core / scan:.2f}x | ≤ {SCAN_RATIO:g}x | "
            f"{verdict(core / scan, SCAN_RATIO)} |"
        )
    if r.case.size == 100_000 and r.case.dims == 1536:
        rows.append(
            f"| {r.case.label} | the actor's index (`IndexCache.nbytes`) | "
            f"{r.core_index_mb:.0f} MB | ≤ {INDEX_CACHE_MB} MB cache bound | "
            f"{verdict(r.core_index_mb, INDEX_CACHE_MB)} |"
        )
    return rows


def write_results(
    results: list[Result],
    args: argparse.Namespace,
    commit: str,
    elapsed: float,
    redis_mb: float,
    command: list[str],
    tree: str,
) -> str:
    blas = (
        f"`OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}` for the stack and for "
        "this process's baselines"
    )
    lines = [
        "# Long-term memory latency through the local stack",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on this project's machine "
        f"({os.cpu_count()} cores) at commit `{commit}` ({tree}). Local stack with **one worker "
        "process** (`KIVIDB_WORKERS=1`), so every "
        "request reaches the same warm worker and its index cache "
        f"(`KIVIDB_INDEX_CACHE_MB={INDEX_CACHE_MB}`); {blas}; real redis-server on loopback; one "
        "kept-alive httpx client; vectors supplied, so no provider time is counted. One actor "
        f"per case; limit {LIMIT}. Warm: {args.runs} runs ({args.large_runs} at 100,000) of "
        f"{args.requests} "
        "requests per operation after 3 warm-up requests, queries cycling over 50; p50 and p99 "
        "are medians over the runs. Baselines in the same run and process as the client: a "
        "plain exact NumPy scan (float32 `matrix @ query`, `argpartition` top 10) over the same "
        "vectors, and the core's `Memories.search` / `relevant` called in-process (no HTTP). "
        "Data: memories written straight to Redis as `Memories.add` writes them; vectors in "
        f"{CLUSTERS} clusters (cosine with the centre ~0.7), texts of 8-16 words from a "
        f"{VOCABULARY:,}-word Zipf vocabulary; store with `dedupe_threshold` 1.0, "
        f"`redact_pii` false. Total run time {elapsed / 60:.1f} min.",
        "",
    ]
    checks = [row for r in results for row in _target_rows(r)]
    lines += [
        "## DESIGN section 7 targets",
        "",
        "| memories x dims | measure | measured | target | |",
        "|---|---|---|---|---|",
        *checks,
        "",
        "The search and add targets are stated for 384 dimensions (hence the 10,000 x 384 "
        "case); recall and cold targets for 1,536. Note the cache never evicts its only entry, "
        "so one actor over the bound stays cached; the bound decides what else can stay.",
        "",
    ]
    for r in results:
        numpy_p50 = statistics.median(r.numpy)
        t = targets(r.case.size, r.case.dims)
        lines += [
            f"## {r.case.label} (one actor)",
            "",
            "| operation | p50 | p99 | target | | core in-process p50 | HTTP p50 / NumPy scan "
            "p50 |",
            "|---|---|---|---|---|---|---|",
        ]
        for op in OPS:
            p50, p99 = r.p(op, "p50"), r.p(op, "p99")
            target, mark = "", ""
            for stat, value in (("p50", p50), ("p99", p99)):
                if f"{op} {stat}" in t:
                    limit = t[f"{op} {stat}"][1]
                    target += f"{stat} ≤ {limit:g} ms "
                    mark += verdict(value, limit) + " "
            core = statistics.median(r.core[op])
            lines.append(
                f"| {op} | {p50:.2f} ms | {p99:.2f} ms | {target.strip()} | {mark.strip()} | "
                f"{core:.2f} ms | {p50 / numpy_p50:.1f}x |"
            )
        add50 = statistics.median(r.add)
        add_target = t.get("add memory p50")
        lines += [
            f"| add a memory with its vector | {add50:.2f} ms | {percentile(r.add, 99):.2f} ms | "
            + (
                f"p50 ≤ {add_target[1]:g} ms | {verdict(add50, add_target[1])}"
                if add_target
                else "| "
            )
            + " | | |",
            f"| semantic search right after an add (catch-up) | "
            f"{statistics.median(r.after_add):.2f} ms | {percentile(r.after_add, 99):.2f} ms | "
            "| | | |",
            f"| baseline: exact NumPy scan, in-process | {numpy_p50:.2f} ms | "
            f"{percentile(r.numpy, 99):.2f} ms | | | | 1.0x |",
            "",
            "| cold (fresh stack process per sample) | samples | median | max | target |",
            "|---|---|---|---|---|",
        ]
        for name, values in r.cold.items():
            cold_target = t.get(name)
            wanted = ""
            if cold_target:
                wanted = (
                    f"≤ {cold_target[1]:g} ms {verdict(statistics.median(values), cold_target[1])}"
                )
            lines.append(
                f"| {name} | {len(values)} | {statistics.median(values):.0f} ms | "
                f"{max(values):.0f} ms | {wanted} |"
            )
        lines += [
            f"| core in-process: first search (loads the actor's index) | 1 | "
            f"{r.core_load_ms:.0f} ms | | |",
            "",
            f"- correctness: semantic top 10 over HTTP identical to the exact scan's for "
            f"**{r.identical}/{r.checked}** queries; recall@10 **{r.recall_at_10:.3f}**.",
            "- added memories found by the very next search: "
            f"**{r.found_after_add}/{len(r.add)}**.",
            f"- peak resident memory of the stack (VmHWM of the launcher and its children) "
            f"after the warm phase: **{r.rss_mb:.0f} MB** (resident then: {r.rss_now_mb:.0f} MB); "
            "largest after one cold request: "
            f"{r.cold_rss_mb:.0f} MB. The core's index for this actor counts "
            f"{r.core_index_mb:.0f} MB (`IndexCache.nbytes`) against the {INDEX_CACHE_MB} MB "
            "cache bound.",
            f"- seeding {r.case.size:,} memories straight into Redis took {r.seed_s:.1f} s; "
            f"machine load average (1 min) {r.load[0]:.1f} at the start of this case, "
            f"{r.load[-1]:.1f} at its end (2 cores, shared with other work).",
        ]
        if r.mismatches:
            lines += ["- differences from the exact scan:", *(f"  - {m}" for m in r.mismatches)]
        lines.append("")
    lines += [
        f"Redis peak memory over the whole run (all cases' data): {redis_mb:.0f} MB.",
        "",
        f"Command: `{' '.join(['.venv/bin/python -m bench.latency', *command])}`",
        "",
        "![latency](latency.png)",
        "",
    ]
    return "\n".join(lines)


def plot(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), width_ratios=[3, 2])
    wide = sorted((r for r in results if r.case.dims == 1536), key=lambda r: r.case.size)
    colours = dict(zip(OPS, ["#4c72b0", "#dd8452", "#55a868", "#8172b3"], strict=True))
    if wide:
        sizes = [r.case.size for r in wide]
        for op in OPS:
            left.plot(
                sizes, [r.p(op, "p50") for r in wide], "o-", color=colours[op], label=f"{op} p50"
            )
            left.plot(
                sizes,
                [r.p(op, "p99") for r in wide],
                "o--",
                color=colours[op],
                alpha=0.6,
                label=f"{op} p99",
            )
        left.plot(
            sizes,
            [statistics.median(r.numpy) for r in wide],
            "s-",
            color="#999999",
            label="exact NumPy scan p50",
        )
        cold = [
            (r.case.size, statistics.median(r.cold["first recall, fresh process"])) for r in wide
        ]
        left.plot(*zip(*cold, strict=True), "x:", color="black", label="first recall (cold)")
        marks = [
            (10_000, 10.0, "recall p50 target"),
            (10_000, 30.0, "recall p99 target"),
            (100_000, 40.0, "recall p50 target"),
            (10_000, 300.0, "cold recall target"),
        ]
        for x, y, _ in marks:
            left.plot([x], [y], marker="_", markersize=28, mew=3, color="#c44e52")
        left.plot(
            [],
            [],
            marker="_",
            markersize=14,
            mew=3,
            ls="",
            color="#c44e52",
            label="targets (DESIGN 7)",
        )
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xticks(sizes, [f"{s:,}" for s in sizes])
        left.set_xlabel("memories of one actor (1,536 dimensions)")
        left.set_ylabel("milliseconds")
        left.set_title("Warm p50 / p99 through the local stack")
        left.legend(fontsize=7, ncol=2)
        left.grid(True, which="both", alpha=0.3)
    narrow = [r for r in results if r.case.dims == 384]
    if narrow:
        r = narrow[0]
        names = [*OPS, "add"]
        p50 = [*(r.p(op, "p50") for op in OPS), statistics.median(r.add)]
        p99 = [*(r.p(op, "p99") for op in OPS), percentile(r.add, 99)]
        xs = np.arange(len(names))
        right.bar(xs - 0.2, p50, 0.4, label="p50", color="#4c72b0")
        right.bar(xs + 0.2, p99, 0.4, label="p99", color="#a1c9f4")
        t = targets(r.case.size, r.case.dims)
        for i, name in enumerate(names):
            key = f"{name if name != 'add' else 'add memory'} p50"
            if key in t:
                right.plot(
                    [i - 0.2], [t[key][1]], marker="_", markersize=24, mew=3, color="#c44e52"
                )
        right.set_yscale("log")
        right.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        right.yaxis.set_minor_formatter(FormatStrFormatter("%g"))
        right.set_xticks(xs, [n.replace("search ", "") for n in names])
        right.set_title(f"{r.case.label} (red: p50 targets)")
        right.set_ylabel("milliseconds")
        right.legend(fontsize=8)
        right.grid(True, axis="y", which="both", alpha=0.3)
    else:
        right.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--oneline"], capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency")
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[1000, 10_000, 100_000],
        help="memories of the one actor, comma-separated (1,536 dimensions each)",
    )
    parser.add_argument(
        "--no-384",
        dest="with_384",
        action="store_false",
        help="skip the 10,000 x 384 case (DESIGN's search targets)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large-runs", type=int, default=1, help="runs at 100,000 and over")
    parser.add_argument("--requests", type=int, default=200, help="per operation and run")
    parser.add_argument("--adds", type=int, default=100)
    parser.add_argument("--cold", type=int, default=5, help="cold samples per measure")
    parser.add_argument("--large-cold", type=int, default=2, help="cold samples at 100,000+")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where latency.md/.png go")
    args = parser.parse_args(argv)
    cases = [Case(size, 1536) for size in sorted(args.sizes)]
    if args.with_384:
        cases.insert(sum(1 for c in cases if c.size <= 10_000), Case(10_000, 384))
    commit = head()
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--", *CODE],
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    changed = [line[3:] for line in changed if line.strip()]
    tree = "code as committed" if not changed else "uncommitted changes in " + ", ".join(changed)
    started = time.monotonic()

    def progress(desc: str, total: int) -> AbstractContextManager[Stage]:
        return Progress("bench latency").stage(desc, total, "op")

    results = []
    with TemporaryDirectory() as data:
        database = start_redis_server(Path(data), persist=False)
        try:
            for case in Progress("bench latency").each("cases", cases, "case"):
                results.append(run_case(case, database.url, args, progress))
            info = redis.Redis.from_url(database.url).info("memory")
            redis_mb = int(info["used_memory_peak"]) / 2**20
        finally:
            database.stop()
    elapsed = time.monotonic() - started
    if head() != commit:
        tree += f"; **HEAD moved during the run, to `{head()}`: the cases may mix code versions**"
    args.out.mkdir(parents=True, exist_ok=True)
    command = list(sys.argv[1:] if argv is None else argv)
    text = write_results(results, args, commit, elapsed, redis_mb, command, tree)
    (args.out / "latency.md").write_text(text, encoding="utf-8")
    plot(results, args.out / "latency.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
