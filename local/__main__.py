"""``python -m local``: the local stack (what ``make run`` starts).

Environment: ``PORT`` (default 3000), ``REDIS_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_LOCAL_DIR``
(default ``.local``), ``KIVIDB_WORKERS`` (worker processes, default 2), ``KIVIDB_LAZY_INIT``
(``1``: import a function on its first request instead of at worker start), ``KIVIDB_SNAPSTART``
(``0``: skip the SnapStart hooks a worker otherwise runs after its imports,
``agent_memory.edge.snapstart``).

Background work: the launcher process runs the local scheduler loop (``local/scheduler.py``), a
daemon thread that invokes the template's ``BackgroundFunction`` when a session's extraction is
due, as EventBridge Scheduler does in AWS. The functions run with ``KIVIDB_SCHEDULER=local``.

Stopping: SIGINT (Ctrl-C, which a terminal sends to the whole foreground process group) and
SIGTERM (``kill``, ``local.launch.stop``) do the same, in this order: the workers stop accepting
requests and finish the ones in progress while the scheduler loop polls no more; the launcher
waits for the workers and for a background run in progress (up to 5 s); then it stops the
redis-server child, which runs in a session of its own so that Ctrl-C does not stop it first
(it saves its data on SIGTERM). The last line printed says so, and the exit status is 0. Further
signals during those steps are ignored (each step is bounded). A server that stops without a
signal (a worker that cannot start) exits 1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
# As template.yaml sets for every function; it must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import redis
import uvicorn
from uvicorn.supervisors import Multiprocess

from agent_memory.database.client import is_cluster, primaries, redis_client
from agent_memory.database.urls import mask_url, url_secrets
from agent_memory.edge.settings import parse_flag
from agent_memory.errors import AgentMemoryError
from local.bootstrap import (
    INSTANCE_ID,
    Database,
    bootstrap,
    secret_key,
    start_database,
)
from local.scheduler import (
    PERIODIC_SECONDS,
    PeriodicLoop,
    SchedulerLoop,
    describe,
    start_scheduler_loop,
)
from local.server import PARAMETERS_ENV, SCHEDULER_ENV
from local.template import HttpApi, read_http_api

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PRIVATE_ENDPOINTS = "KIVIDB_ALLOW_PRIVATE_ENDPOINTS"
ACCESS_LOG = "KIVIDB_ACCESS_LOG"


class Shutdown:
    """SIGINT and SIGTERM, handled alike. :meth:`note` keeps the first signal's name and tells
    the scheduler loop to poll no more (both safe in a signal handler); :meth:`quiet` makes later
    signals only noted, while the launcher stops what it started."""

    def __init__(self) -> None:
        self.signal_name: str | None = None
        self.loop: SchedulerLoop | None = None

    def note(self, signum: int) -> None:
        """Keep the first signal's name and tell the loop to stop, once. A later signal only
        returns: it may arrive while this handler is inside the loop's ``Event.set()``,
        holding its lock, and a second ``set()`` in the nested handler would wait for that
        lock for ever (make passes a group's SIGTERM on to its children, so two come at once).
        """
        if self.signal_name is not None:
            return
        self._name(signum)
        if self.loop is not None:
            self.loop.request_stop()

    def interrupt(self, signum: int, frame: FrameType | None) -> None:
        """Before the server runs: stop where we are (``KeyboardInterrupt``, caught by main)."""
        self.note(signum)
        raise KeyboardInterrupt

    def forward(self) -> None:
        """Note each stop signal, then pass it to the handler installed now (uvicorn's)."""
        for signum in STOP_SIGNALS:
            previous = signal.getsignal(signum)

            def handler(sig: int, frame: FrameType | None, previous: object = previous) -> None:
                self.note(sig)
                if callable(previous):
                    previous(sig, frame)

            signal.signal(signum, handler)

    def quiet(self) -> None:
        # Only the name: the launcher may be inside the loop's stop() (holding its Event's lock).
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda sig, frame: self._name(sig))

    def _name(self, signum: int) -> None:
        if self.signal_name is None:
            self.signal_name = signal.Signals(signum).name


class _Server(uvicorn.Server):
    """uvicorn's server (one worker, in this process) that also tells ``shutdown`` of a stop
    signal. uvicorn raises the signal again once it has stopped; ``shutdown``'s handlers, in
    place by then, only note it."""

    def __init__(self, config: uvicorn.Config, shutdown: Shutdown) -> None:
        super().__init__(config)
        self.stopping = shutdown

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopping.note(sig)
        super().handle_exit(sig, frame)


def _open_database(local_dir: Path) -> tuple[Database, str, str]:
    """The stack's database, and the API key of organization ``local`` with where it came
    from; exits (status 2) saying why when the database cannot be reached or used."""
    try:
        database = start_database(local_dir)
        api_key, origin = bootstrap(database.url, local_dir, os.environ.get("KIVIDB_API_KEY"))
    except (redis.RedisError, AgentMemoryError) as exc:
        url = os.environ.get("REDIS_URL", "")
        if isinstance(exc, AgentMemoryError):  # reached, but refused (a URL option, say)
            what, reason = "cannot use", exc.message
        else:
            verb = "reach" if isinstance(exc, redis.ConnectionError) else "use"
            what, reason = f"cannot {verb}", describe(exc, url_secrets(url))
        print(
            f"local stack: {what} the database at REDIS_URL={mask_url(url)}: {reason}",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    return database, api_key, origin


def _function_environment(database: Database, local_dir: Path) -> HttpApi:
    """Set the functions' environment in this process (the background function runs here,
    and the workers inherit it and set the same again in ``local.server.create_app``); the
    template's HTTP API with the parameters chosen."""
    # Provider API keys are encrypted with the key file .local/secret.key here (made on the
    # first start); AWS uses KMS (KIVIDB_KMS_KEY_ID, which stays unset locally).
    secret_key(local_dir)
    os.environ["KIVIDB_SECRET_KEY_FILE"] = str(local_dir / "secret.key")
    os.environ.pop("KIVIDB_SECRET_KEY", None)
    parameters = {
        "ControlRedisUrl": database.url,
        "SubnetIds": "",
        "SecurityGroupIds": "",
        "LogRetentionDays": "30",
        "LogLevel": os.environ.get("LOG_LEVEL", "WARN"),
    }
    os.environ[PARAMETERS_ENV] = json.dumps(parameters)
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    api = read_http_api(ROOT / "template.yaml", parameters)
    os.environ.update(api.environment)
    os.environ[SCHEDULER_ENV] = "local"
    return api


def endpoints_line() -> str:
    """The banner's word on custom endpoints, as ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS`` is read by
    the functions too (``parse_flag``)."""
    if parse_flag(PRIVATE_ENDPOINTS, os.environ.get(PRIVATE_ENDPOINTS)):
        return (
            "custom model endpoints and webhook URLs may be http:// and private "
            "(KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1)"
        )
    return (
        "custom model endpoints and webhook URLs must be public https:// "
        "(KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 allows loopback servers)"
    )


def _banner(
    port: int, workers: int, database: Database, api_key: str, origin: str, scheduler: str
) -> str:
    """What the stack prints once it is set up."""
    base = f"http://127.0.0.1:{port}"
    endpoints = endpoints_line()
    return (
        f"KiviDB agent memory, local stack\n"
        f"  API:       {base}  (routes from template.yaml, {workers} worker processes)\n"
        f"  database:  {mask_url(database.url)}  ({database.description}"
        f"{cluster_note(database.url)})\n"
        f"  instance:  {INSTANCE_ID}  (organization local)\n"
        f"  API key:   {api_key}  ({origin})\n"
        f"  scheduler: {scheduler}\n"
        f"  endpoints: {endpoints}\n"
        f"  console:   {base}/console  (sign in with the API key above)\n"
        f"  try:       curl -H 'Authorization: Bearer {api_key}' {base}/agent-memory"
    )


KEEP_ALIVE_SECONDS = 75
"""How long an idle kept-alive connection stays open. uvicorn's default, 5 s, is httpx's own
idle expiry (``keepalive_expiry``, 5 s): the server closed connections just as clients reused
them, and a request sent on one got "Server disconnected without sending a response" (seen in
a stress run of the e2e suite at a load of 8). A server must keep idle connections longer than
its clients do; 75 s is more than the common clients' defaults (httpx 5 s, Node's fetch 4 s)
and AWS's load balancers' 60 s idle timeout."""


def _serve(port: int, workers: int, sock: socket.socket, shutdown: Shutdown) -> None:
    """Serve the API on ``sock`` until a stop signal (or a worker that cannot start)."""
    config = uvicorn.Config(
        "local.server:create_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        workers=workers,
        http="httptools",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        access_log=parse_flag(ACCESS_LOG, os.environ.get(ACCESS_LOG)),
        log_level="warning",
    )
    if workers > 1:
        supervisor = Multiprocess(config, sockets=[sock])  # installs its signal handlers
        shutdown.forward()
        supervisor.run()
    else:
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda sig, frame: shutdown.note(sig))
        _Server(config, shutdown).run(sockets=[sock])


def _start_loops(
    database: Database, api: HttpApi
) -> tuple[SchedulerLoop | None, list[PeriodicLoop], str]:
    """Start the scheduler loop (when the template has a background function) and a loop for
    each scheduled function; returns them and the banner's line about them."""
    loop = None
    scheduler = "none (the template has no BackgroundFunction)"
    if api.background is not None:
        loop = start_scheduler_loop(database.url, api.background)
        scheduler = f"local loop in this process, invokes {api.background.logical_id}"
    periodic = [PeriodicLoop(function).start() for function in api.scheduled]
    if periodic:
        names = ", ".join(p.function.logical_id for p in periodic)
        scheduler += f"; every {PERIODIC_SECONDS} s: {names}"
    return loop, periodic, scheduler


def _check_flags() -> None:
    """Exit 2, saying why, when a boolean setting has a value its one parser refuses
    (``parse_flag``, as the functions read it): before anything starts."""
    for flag in (PRIVATE_ENDPOINTS, ACCESS_LOG):
        try:
            parse_flag(flag, os.environ.get(flag))
        except ValueError as exc:
            print(f"local stack: {exc}.", file=sys.stderr)
            raise SystemExit(2) from None


def main() -> None:
    """Start the database, set up organization ``local``, print the banner, serve the API
    and the scheduler loop, and on a stop signal stop them in order (docs: README)."""
    port = int(os.environ.get("PORT", "3000"))
    workers = int(os.environ.get("KIVIDB_WORKERS", "2"))
    local_dir = Path(os.environ.get("KIVIDB_LOCAL_DIR", ROOT / ".local")).resolve()
    _check_flags()
    try:  # before anything starts: a second stack on a taken port must not touch the data
        sock = listen(port)
    except OSError as exc:
        print(
            f"local stack: cannot listen on 127.0.0.1:{port} ({exc.strerror}); is another "
            "stack running? Stop it, or choose another port with PORT=...",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    shutdown = Shutdown()
    for signum in STOP_SIGNALS:
        signal.signal(signum, shutdown.interrupt)
    database: Database | None = None
    loop = None
    periodic: list[PeriodicLoop] = []
    serving = served = False
    try:
        database, api_key, origin = _open_database(local_dir)
        api = _function_environment(database, local_dir)
        loop, periodic, scheduler = _start_loops(database, api)
        shutdown.loop = loop
        print(_banner(port, workers, database, api_key, origin, scheduler), flush=True)
        serving = True
        _serve(port, workers, sock, shutdown)
        served = True
    except KeyboardInterrupt:  # a stop signal before the server ran (Shutdown.interrupt)
        pass
    finally:
        shutdown.quiet()
        sock.close()  # the workers have stopped: nothing may queue on the port any more
        for each in periodic:
            each.stop()
        if loop is not None:
            loop.stop()
        if database is not None:
            database.stop()
        stopped = ["API stopped"] if serving else []
        if loop is not None:
            stopped.append("scheduler stopped")
        if database is not None:
            stopped.append(database.stopped)
        cause = f" on {shutdown.signal_name}" if shutdown.signal_name else ""
        if stopped:  # nothing had started: the error said it all
            print(f"local stack: stopped{cause}: {', '.join(stopped)}", flush=True)
    if served and shutdown.signal_name is None:
        raise SystemExit(1)  # the server stopped by itself (a worker could not start)


def cluster_note(url: str) -> str:
    """``", a Redis Cluster of N primaries"`` for the banner when ``url`` is a cluster (as the
    stack's database client found it: ``database.client.cluster_mode``), else nothing."""
    client = redis_client(url)
    if not is_cluster(client):
        return ""
    return f", a Redis Cluster of {primaries(client)} primaries"


def listen(port: int) -> socket.socket:
    """The listening socket, made with IPPROTO_TCP so that asyncio sets TCP_NODELAY on every
    accepted connection. uvicorn's own multi-worker socket omits the protocol, and then Nagle's
    algorithm and delayed ACKs add about 40 ms to every request on a kept-alive connection.

    It listens at once, before the database and the workers start: a request made as soon as
    the banner shows waits in the backlog until a worker takes it, instead of being refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


if __name__ == "__main__":
    main()
