"""Faults under load: what callers see while the database or a model provider fails, and
whether every acknowledged write is there exactly once afterwards (docs/reliability.md).

Starts a ``redis-server`` of its own (appendonly, fsync at every write, so it can be killed and
started again on the same port with its data), a model provider of its own on loopback
(``FaultyProvider``: ``tools.scripted_model``'s answers, or a fault), and the local stack
(``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``, one worker process per client and two more, so that no
call waits for another's worker, as each has its own Lambda container in AWS). For each fault,
on two fresh stores, one with client vectors and one whose language and embedding models are
the provider (``summarize_after`` 1,000, so nothing is folded away; ``dedupe_threshold`` 1):

1. ``--agents`` agents per store (``bench.traffic.Agent``: append, recall, search, add memory,
   read session, and ``POST .../extract`` of each finished session) call without pause and never
   retry, for ``WARMUP`` s;
2. the fault, for ``--duration`` s (10): ``none`` (the baseline, measured in the same run),
   ``db-stop`` (SIGKILL, started again on the same port after the duration), ``db-stall``
   (``DEBUG SLEEP`` from another connection), ``client-kill`` (``CLIENT KILL TYPE normal`` every
   0.5 s), and provider faults on both of its routes: ``provider-timeout`` (reads the request,
   never answers), ``provider-429`` (``Retry-After: 1``), ``provider-429-bare`` (no
   ``Retry-After``), ``provider-trickle`` (a valid answer, one byte every 2 s), ``provider-garbage``
   (200, ``application/json``, not JSON) and ``provider-wrong-shape`` (200, JSON of another
   shape);
3. traffic goes on until every agent has had a 2xx answer to a call sent after the fault ended
   (the recovery time: the longest such wait), and ``SETTLE`` s more; then it stops, and
   ``bench.traffic.check_exactly_once`` reads everything back.

Reported per fault, summed over ``--runs`` runs: calls, answers by status, the longest answer,
answers slower than the 10 s function timeout, 500s (must be 0), 503s without ``Retry-After``,
calls without an answer within the 30 s client timeout, lost / duplicated / reordered messages
and memories (must be 0), writes kept without a 2xx answer, recovery time (median over runs),
whether the stack's process was the same throughout, and tracebacks in its log. Writes
``bench/results/faults.md`` and ``.png``.

    make bench-faults                               # every fault, 3 runs of 10 s faults
    python -m bench.faults --runs 1 --faults db-stop,provider-429
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, Literal

import httpx
import redis

from bench.traffic import (
    CLIENT_TIMEOUT,
    FUNCTION_TIMEOUT,
    Agent,
    Answer,
    Check,
    Ledger,
    check_exactly_once,
    httpx_transport,
    statuses,
)
from kividb_memory import MemoryClient
from local.bootstrap import _parent_death_signal, free_port
from local.launch import running_stack
from tools.progress import Progress
from tools.scripted_model import ScriptedModel

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "bench" / "results"
API_KEY = "kvm_bench_faults_0123456789abcdefghijklmnop"
WARMUP = 2.0
SETTLE = 3.0
RECOVER_WITHIN = 60.0
"""Seconds after a fault's end within which every agent must have had a 2xx answer again."""

# ------------------------------------------------------------------------------------------
# A database that can be killed, stalled and have its clients cut
# ------------------------------------------------------------------------------------------


class Database:
    """A ``redis-server`` child on a fixed loopback ``port``, its data in ``data_dir``.

    Appendonly with ``appendfsync always``: every write is on disk before its reply, so a
    SIGKILL loses nothing that was acknowledged and ``start`` after ``kill`` brings it all back
    (on the same port, so the stack's URL stays valid). ``DEBUG`` is allowed from loopback
    (``enable-debug-command local``, Redis 7) for ``stall``. The child gets SIGTERM if this
    process dies (Linux). ``FileNotFoundError`` without a ``redis-server`` on the PATH.
    """

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Start the server (again) and wait until it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.data_dir),
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--enable-debug-command",
                "local",
                "--logfile",
                "redis.log",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_parent_death_signal(),
        )
        client = self.admin(timeout=0.5)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    return
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    def admin(self, timeout: float = 5.0) -> redis.Redis:
        """A client of its own (not the stack's), for the faults and for reading the server."""
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
        )

    def kill(self) -> None:
        """SIGKILL: the server dies at once, every connection with it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; nothing when it is not running."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stall(self, seconds: float) -> None:
        """``DEBUG SLEEP seconds`` on a connection of its own: the server answers no one until
        it returns (this call blocks as long)."""
        self.admin(timeout=seconds + 10).execute_command(  # type: ignore[no-untyped-call]
            "DEBUG", "SLEEP", f"{seconds:g}"
        )

    def kill_clients(self) -> int:
        """``CLIENT KILL TYPE normal`` (every normal connection but this one's); how many."""
        return int(self.admin().client_kill_filter(_type="normal", skipme=True))


# ------------------------------------------------------------------------------------------
# A model provider that fails on demand
# ------------------------------------------------------------------------------------------

Mode = Literal["ok", "timeout", "429", "429-bare", "trickle", "garbage", "wrong-shape"]


class FaultyProvider(ThreadingHTTPServer):
    """OpenAI's chat-completions and embeddings routes on loopback (``url`` is the ``/v1``
    base), answered by ``tools.scripted_model`` while ``mode`` is ``"ok"``, else:

    - ``timeout``: reads the request and sends nothing, until the client hangs up or
      ``hold_seconds`` pass (then closes the connection);
    - ``429``: ``429 Too Many Requests`` with ``Retry-After: 1`` and OpenAI's error body;
      ``429-bare``: the same without ``Retry-After``;
    - ``trickle``: the real answer, its headers at once and then one byte of the body every
      ``trickle_seconds``, until the client hangs up or ``hold_seconds`` pass (then closes the
      connection mid-body);
    - ``garbage``: 200 ``application/json`` whose body is not JSON;
    - ``wrong-shape``: 200 with JSON of another shape (``{"result": "ok", "data": "none"}``).

    A mode applies to the requests that arrive while it is set. ``counts`` counts requests by
    ``mode path``.
    """

    daemon_threads = True

    def __init__(self, *, trickle_seconds: float = 2.0, hold_seconds: float = 40.0) -> None:
        super().__init__(("127.0.0.1", 0), _FaultyHandler)
        self.model = ScriptedModel()
        self.mode: Mode = "ok"
        self.trickle_seconds = trickle_seconds
        self.hold_seconds = hold_seconds
        self.counts: Counter[str] = Counter()
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self._lock = threading.Lock()

    def start(self) -> None:
        """Serve from a daemon thread; ``stop()`` ends it."""
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1


class _FaultyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes (tools/scripted_model.py)
    server: FaultyProvider

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        mode = self.server.mode
        self.server.count(f"{mode} {self.path}")
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if self.path not in ("/v1/chat/completions", "/v1/embeddings"):
            self._send(404, b'{"error": {"message": "no such route"}}')
        elif mode == "timeout":
            self._hold()
        elif mode in ("429", "429-bare"):
            error = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'  # noqa: E501
            self._send(429, error, {"Retry-After": "1"} if mode == "429" else {})
        elif mode == "garbage":
            self._send(200, b"<html><body>upstream overloaded</body></html>")
        elif mode == "wrong-shape":
            self._send(200, b'{"result": "ok", "data": "none", "choices": {}}')
        else:
            model = self.server.model
            chat = self.path == "/v1/chat/completions"
            payload = json.dumps(model.chat(body) if chat else model.embeddings(body)).encode()
            if mode == "trickle":
                self._trickle(payload)
            else:
                self._send(200, payload)

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client hung up
            self.close_connection = True

    def _hung_up(self, wait: float) -> bool:
        """Whether the client closed the connection within ``wait`` seconds."""
        readable, _, _ = select.select([self.connection], [], [], wait)
        if not readable:
            return False
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK) == b"")
        except OSError:
            return True

    def _hold(self) -> None:
        deadline = time.monotonic() + self.server.hold_seconds
        while time.monotonic() < deadline and not self._hung_up(0.2):
            pass
        self.close_connection = True

    def _trickle(self, payload: bytes) -> None:
        deadline = time.monotonic() + self.server.hold_seconds
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.flush()
            for index in range(len(payload)):
                if time.monotonic() > deadline or self._hung_up(self.server.trickle_seconds):
                    break
                self.wfile.write(payload[index : index + 1])
                self.wfile.flush()
        except OSError:
            pass
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


# ------------------------------------------------------------------------------------------
# The world: database, provider, stack
# ------------------------------------------------------------------------------------------


@dataclass
class World:
    """The running pieces: the stack's ``url`` and ``process``, its ``log`` file, the
    ``database`` and the ``provider``."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    database: Database
    provider: FaultyProvider

    def client(self, timeout: float = CLIENT_TIMEOUT) -> httpx.Client:
        """Raw httpx, for the agents' ``bench.traffic.httpx_transport`` (see bench/traffic.py
        for why the agents' calls are not the Python client's)."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=timeout
        )

    def memory(self, timeout: float = CLIENT_TIMEOUT) -> MemoryClient:
        """The Python client, without retries (each call is one request), for everything but
        the agents' traffic: making the stores, the check."""
        return MemoryClient(self.url, API_KEY, timeout=timeout, max_retries=0)


@contextmanager
def world(folder: Path, *, workers: int) -> Iterator[World]:
    """Start the database, the provider and the local stack (``workers`` processes) under
    ``folder``; stop them in the reverse order."""
    database = Database(folder / "redis")
    database.start()
    provider = FaultyProvider()
    provider.start()
    log = folder / "stack.log"
    env = {
        "REDIS_URL": database.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(folder / "local"),
        "KIVIDB_WORKERS": str(workers),
        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
    }
    try:
        with running_stack(env, log=log, timeout=60) as (url, process):
            yield World(url, process, log, database, provider)
    finally:
        provider.stop()
        database.stop()


def make_stores(w: World, tag: str) -> tuple[str, str]:
    """Two new stores: ``(client-vector store, model store)`` paths."""
    base = "/instances/local/agent-memory"
    vectors, models = f"{tag}-vectors", f"{tag}-models"
    common: dict[str, Any] = {"summarize_after": 1000, "dedupe_threshold": 1.0}
    url = w.provider.url
    with w.memory() as client:
        client.put_store("local", vectors, dimensions=8, **common)
        client.put_store(
            "local",
            models,
            llm_provider="custom",
            llm_model="scripted",
            llm_base_url=url,
            embed_provider="custom",
            embed_model="scripted",
            embed_base_url=url,
            dimensions=384,
            extraction_delay_seconds=30,
            consolidate_after_memories=0,  # faults of extraction, not consolidation
            **common,
        )
    return f"{base}/{vectors}", f"{base}/{models}"


# ------------------------------------------------------------------------------------------
# Faults
# ------------------------------------------------------------------------------------------

Inject = Callable[[World, float], str]


def _none(w: World, seconds: float) -> str:
    time.sleep(seconds)
    return "no fault"


def _db_stop(w: World, seconds: float) -> str:
    w.database.kill()
    time.sleep(seconds)
    w.database.start()
    return f"redis-server SIGKILLed, started again on port {w.database.port} after {seconds:g} s"


def _db_stall(w: World, seconds: float) -> str:
    w.database.stall(seconds)
    return f"DEBUG SLEEP {seconds:g}"


def _client_kill(w: World, seconds: float) -> str:
    killed = rounds = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        killed += w.database.kill_clients()
        rounds += 1
        time.sleep(0.5)
    return f"CLIENT KILL TYPE normal x{rounds}: {killed} connections cut"


def _provider(mode: Mode) -> Inject:
    def inject(w: World, seconds: float) -> str:
        w.provider.mode = mode
        try:
            time.sleep(seconds)
        finally:
            w.provider.mode = "ok"
        return f"provider mode {mode} for {seconds:g} s"

    return inject


FAULTS: dict[str, tuple[Inject, str]] = {
    "none": (_none, "no fault: the same traffic, the baseline"),
    "db-stop": (_db_stop, "database killed (SIGKILL), started again on the same port"),
    "db-stall": (_db_stall, "database stalled: DEBUG SLEEP from another connection"),
    "client-kill": (_client_kill, "CLIENT KILL TYPE normal every 0.5 s"),
    "provider-timeout": (_provider("timeout"), "provider reads the request, never answers"),
    "provider-429": (_provider("429"), "provider answers 429 with Retry-After: 1"),
    "provider-429-bare": (_provider("429-bare"), "provider answers 429 without Retry-After"),
    "provider-trickle": (_provider("trickle"), "provider sends its answer 1 byte every 2 s"),
    "provider-garbage": (_provider("garbage"), "provider answers 200 with a body not JSON"),
    "provider-wrong-shape": (_provider("wrong-shape"), "provider answers 200, JSON, wrong shape"),
}


@dataclass
class FaultRun:
    """One fault under traffic: its ``name``, ``note`` (what was done), ``begin`` / ``end``
    (monotonic), every ``answers``, the exactly-once ``check``, ``recovery`` (seconds from the
    fault's end until every agent had a 2xx answer to a call sent after it; None: not within
    ``RECOVER_WITHIN``), whether the stack process ``survived`` (same process, still running)
    and the ``tracebacks`` its log gained."""

    name: str
    note: str
    begin: float
    end: float
    answers: list[Answer]
    check: Check
    recovery: float | None
    survived: bool
    tracebacks: int
    provider_calls: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return len(self.answers)

    def count(self, status: int) -> int:
        return sum(1 for a in self.answers if a.status == status)

    def missing_retry_after(self, code: str) -> int:
        """503 answers with error ``code`` that carry no ``Retry-After``."""
        return sum(
            1 for a in self.answers if a.status == 503 and a.code == code and not a.retry_after
        )

    @property
    def unanswered(self) -> int:
        return sum(1 for a in self.answers if a.status is None)

    @property
    def max_seconds(self) -> float:
        return max((a.seconds for a in self.answers), default=0.0)

    @property
    def over_function_timeout(self) -> int:
        return sum(1 for a in self.answers if a.seconds > FUNCTION_TIMEOUT)

    @property
    def server_errors(self) -> int:
        """Answers 500 and other 5xx than 502 and 503 (504 included): each is a bug."""
        return sum(
            1
            for a in self.answers
            if a.status is not None and a.status >= 500 and a.status not in (502, 503)
        )

    def rate(self) -> float:
        """Calls answered per second over the traffic's whole time."""
        if not self.answers:
            return 0.0
        first = min(a.start for a in self.answers)
        last = max(a.end for a in self.answers)
        return len(self.answers) / max(last - first, 1e-9)


def _recovered(agents: list[Agent], end: float) -> float | None:
    waits = []
    for agent in agents:
        after = [a for a in list(agent.ledger.answers) if a.start >= end and a.ok]
        if not after:
            return None
        waits.append(min(a.end for a in after) - end)
    return max(waits)


def run_fault(
    w: World,
    name: str,
    *,
    duration: float,
    agents_per_store: int = 2,
    warmup: float = WARMUP,
    settle: float = SETTLE,
    tag: str | None = None,
) -> FaultRun:
    """Run fault ``name`` (a key of ``FAULTS``) for ``duration`` s under traffic on two new
    stores, then check (see the module docstring)."""
    inject, _ = FAULTS[name]
    tag = tag or f"{name}-{time.monotonic_ns()}"
    vectors, models = make_stores(w, tag)
    agents: list[Agent] = []
    clients: list[httpx.Client] = []
    for n in range(agents_per_store):
        for store, dims in ((vectors, 8), (models, None)):
            http = w.client()
            clients.append(http)
            kind = "v" if dims else "m"
            agents.append(
                Agent(
                    httpx_transport(http),
                    store,
                    f"{tag}-{kind}{n}",
                    dimensions=dims,
                    extract=dims is None,
                    seed=n,
                )
            )
    stop = threading.Event()

    def loop(agent: Agent) -> None:
        while not stop.is_set():
            agent.step()

    log_start = w.log.stat().st_size
    pid = w.process.pid
    provider_before = Counter(w.provider.counts)
    threads = [threading.Thread(target=loop, args=(a,), daemon=True) for a in agents]
    for thread in threads:
        thread.start()
    try:
        time.sleep(warmup)
        begin = time.monotonic()
        note = inject(w, duration)
        end = time.monotonic()
        deadline = end + RECOVER_WITHIN
        recovery = _recovered(agents, end)
        while recovery is None and time.monotonic() < deadline:
            time.sleep(0.1)
            recovery = _recovered(agents, end)
        time.sleep(settle)
    finally:
        stop.set()
        for thread in threads:
            thread.join(CLIENT_TIMEOUT + 5)
    survived = w.process.poll() is None and w.process.pid == pid
    with w.log.open("rb") as handle:
        handle.seek(log_start)
        tracebacks = handle.read().count(b"Traceback (most recent call last)")
    check = Check()
    with w.memory() as client:
        for store in (vectors, models):
            ledger = Ledger(store)
            for agent in agents:
                if agent.store == store:
                    ledger.extend(agent.ledger)
            check.add(check_exactly_once(client, ledger))
    for http in clients:
        http.close()
    answers = [a for agent in agents for a in agent.ledger.answers]
    calls = dict(Counter(w.provider.counts) - provider_before)
    return FaultRun(name, note, begin, end, answers, check, recovery, survived, tracebacks, calls)


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------


def _commit() -> str:
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "layers", "functions", "local", "template.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return head + (" (with uncommitted changes in layers/, functions/ or local/)" if dirty else "")


def _fmt_statuses(runs: list[FaultRun]) -> str:
    total: Counter[str] = Counter()
    for run in runs:
        total += statuses(run.answers)
    return ", ".join(f"{k}: {v:,}" for k, v in sorted(total.items()))


def write_results(by_fault: dict[str, list[FaultRun]], args: argparse.Namespace) -> str:
    base = by_fault.get("none")
    base_rate = statistics.median(r.rate() for r in base) if base else None
    base_max = statistics.median(r.max_seconds for r in base) if base else None
    lines = [
        "# Faults under load",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {_commit()}, on this "
        f"project's machine ({os.cpu_count()} cores). {args.runs} run(s) per fault; each fault "
        f"{args.duration:g} s under traffic from {2 * args.agents} agents without pause "
        f"({args.agents} on a client-vector store, {args.agents} on a store whose models are a "
        f"loopback provider), local stack with {args.workers} worker processes, own "
        "redis-server (appendonly, fsync always). Client timeout "
        f"{CLIENT_TIMEOUT:g} s (API Gateway's maximum); function timeout {FUNCTION_TIMEOUT:g} s. "
        "Counts are summed over the runs; the longest answer is the maximum, recovery the "
        "median (min - max). Ratios are to the `none` row, the same traffic without a fault "
        "in the same run.",
        "",
        "| fault | calls | calls/s (x none) | answers | longest answer (x none) "
        "| > 10 s | 500s | database 503 without Retry-After | provider 503 without Retry-After "
        "| no answer in 30 s | recovery s | stack kept running |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in by_fault.items():
        rate = statistics.median(r.rate() for r in runs)
        longest = max(r.max_seconds for r in runs)
        waits = [r.recovery for r in runs]
        if any(w is None for w in waits):
            recovery = f"not within {RECOVER_WITHIN:g} s in {sum(w is None for w in waits)} run(s)"
        else:
            known = [w for w in waits if w is not None]
            recovery = f"{statistics.median(known):.2f} ({min(known):.2f} - {max(known):.2f})"
        rate_ratio = f" ({rate / base_rate:.2f}x)" if base_rate else ""
        max_ratio = f" ({longest / base_max:.0f}x)" if base_max else ""
        lines.append(
            f"| {name} | {sum(r.requests for r in runs):,} | {rate:.0f}{rate_ratio} | "
            f"{_fmt_statuses(runs)} | {longest:.2f} s{max_ratio} | "
            f"{sum(r.over_function_timeout for r in runs)} | "
            f"{sum(r.server_errors for r in runs)} | "
            f"{sum(r.missing_retry_after('database_unavailable') for r in runs)} | "
            f"{sum(r.missing_retry_after('provider_unavailable') for r in runs)} | "
            f"{sum(r.unanswered for r in runs)} | "
            f"{recovery} | {'yes' if all(r.survived for r in runs) else 'NO'} |"
        )
    lines += [
        "",
        "Exactly once, read back after each fault (every session's messages, every actor's "
        "memories):",
        "",
        "| fault | messages acknowledged | lost | duplicated | reordered sessions | "
        "kept without a 2xx | memories acknowledged | lost / kept but not listed | duplicated | "
        "kept without a 2xx | unacknowledged, found by search, not listed | extracted "
        "(duplicated) | tracebacks in the log |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in by_fault.items():
        c = Check()
        for run in runs:
            c.add(run.check)
        lines.append(
            f"| {name} | {c.messages_acknowledged:,} | {c.messages_lost} | "
            f"{c.messages_duplicated + c.messages_unknown} | {c.sessions_out_of_order} | "
            f"{c.messages_kept_unacknowledged} | {c.memories_acknowledged:,} | {c.memories_lost} "
            f"/ {c.memories_unlisted} | {c.memories_duplicated} | "
            f"{c.memories_kept_unacknowledged} | "
            f"{c.memories_found_not_listed} | {c.extracted} ({c.extracted_duplicated}) | "
            f"{sum(r.tracebacks for r in runs)} |"
        )
    lines += ["", "What each fault did (last run) and the provider calls it drew:", ""]
    for name, runs in by_fault.items():
        calls = ", ".join(f"{k}: {v}" for k, v in sorted(runs[-1].provider_calls.items()))
        lines.append(f"- `{name}`: {FAULTS[name][1]}; {runs[-1].note}. Provider: {calls or '-'}.")
    problems = [p for runs in by_fault.values() for r in runs for p in r.check.problems]
    if problems:
        lines += ["", "Problems found by the check:", ""] + [f"- {p}" for p in problems[:40]]
    lines += [
        "",
        f"Command: `make bench-faults` (`python -m bench.faults --runs {args.runs} "
        f"--duration {args.duration:g} --agents {args.agents}`).",
        "",
        "![faults](faults.png)",
        "",
    ]
    return "\n".join(lines)


COLOURS = {
    "2xx": "#55a868",
    "503": "#dd8452",
    "502": "#8172b3",
    "4xx": "#4c72b0",
    "500": "#c44e52",
    "none": "black",
}


def _kind(answer: Answer) -> str:
    if answer.status is None:
        return "none"
    if answer.ok:
        return "2xx"
    if answer.status in (502, 503):
        return str(answer.status)
    return "4xx" if answer.status < 500 else "500"


def plot(by_fault: dict[str, list[FaultRun]], path: Path) -> None:
    """One panel per fault (its last run): each answer's latency against the time it was sent,
    relative to the fault's start, coloured by status; the fault's window shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(by_fault)
    cols = 2
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(12, 2.6 * rows), squeeze=False, sharey=True)
    for ax, name in zip(axes.flat, names, strict=False):
        run = by_fault[name][-1]
        for kind, colour in COLOURS.items():
            picked = [a for a in run.answers if _kind(a) == kind]
            if picked:
                label = kind if kind != "none" else "no answer"
                ax.scatter(
                    [a.start - run.begin for a in picked],
                    [max(a.seconds, 1e-4) * 1000 for a in picked],
                    s=4,
                    color=colour,
                    label=label,
                )
        ax.axvspan(0, run.end - run.begin, color="#eeeeee", zorder=0)
        ax.axhline(FUNCTION_TIMEOUT * 1000, color="#c44e52", linewidth=0.6, linestyle=":")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    handles, labels = [], []
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="upper right", fontsize=8, markerscale=3)
    fig.supxlabel(
        "seconds since the fault began (grey: the fault; dotted: 10 s function timeout)", fontsize=9
    )
    fig.supylabel("answer latency, ms (log)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.faults")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each fault")
    parser.add_argument("--agents", type=int, default=2, help="agents per store")
    parser.add_argument("--workers", type=int, default=0, help="default: 2 per store + 2")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated names")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where faults.md and .png go")
    args = parser.parse_args(argv)
    args.workers = args.workers or 2 * args.agents + 2
    names = [n.strip() for n in args.faults.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    by_fault: dict[str, list[FaultRun]] = {n: [] for n in names}
    with TemporaryDirectory() as folder, world(Path(folder), workers=args.workers) as w:
        progress = Progress("bench faults")
        for run in range(args.runs):
            for name in progress.each(f"run {run + 1}/{args.runs}", names, "fault"):
                result = run_fault(w, name, duration=args.duration, agents_per_store=args.agents)
                by_fault[name].append(result)
                slowest = max(result.answers, key=lambda a: a.seconds, default=None)
                which = f"{slowest.route}, {slowest.status}" if slowest else "-"
                progress.say(
                    f"run {run + 1} {name}: {result.requests} calls, "
                    f"{dict(statuses(result.answers))}, longest {result.max_seconds:.2f} s"
                    f" ({which}), "
                    f"recovery {result.recovery}, must-be-zero {result.check.failures}"
                )
    args.out.mkdir(parents=True, exist_ok=True)
    text = write_results(by_fault, args)
    (args.out / "faults.md").write_text(text, encoding="utf-8")
    plot(by_fault, args.out / "faults.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
