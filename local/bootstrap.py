"""Start or reach the database and make the local organization, instance and API key.

Order of preference (DESIGN section 6): ``REDIS_URL``; else a ``redis-server`` child process
keeping its data under ``.local/redis``; else an embedded in-process server (fakeredis over TCP,
in memory only).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

from agent_memory.clock import SystemClock
from agent_memory.control import ControlPlane
from agent_memory.secrets import load_key_file

ORG_ID = "local"
INSTANCE_ID = "local"


@dataclass
class Database:
    """The stack's database: its ``url``, a ``description`` for the banner, ``stop`` (which
    leaves a ``REDIS_URL`` server alone) and ``stopped``, what ``stop`` did, for the last line
    of a shutdown."""

    url: str
    description: str
    stop: Callable[[], None]
    stopped: str = "database left running"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(url: str, timeout: float = 10.0) -> None:
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_PR_SET_PDEATHSIG = 1  # prctl(2), linux/prctl.h


def _parent_death_signal() -> Callable[[], None] | None:
    """On Linux, a ``preexec_fn`` that makes the child receive SIGTERM when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``, see prctl(2)), so that a launcher killed with SIGKILL does not
    leave its redis-server running; elsewhere ``None``. prctl binds the signal to the thread
    that forks: call from a thread that lives as long as the child should (the main thread)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def set_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl: do not outlive it
            os._exit(1)

    return set_signal


def start_redis_server(
    data_dir: Path, *, persist: bool = True, port: int | None = None
) -> Database:
    """A ``redis-server`` child on loopback ``port`` (a free one by default); with
    ``persist``, it saves to ``data_dir/dump.rdb`` (and loads it on the next start).

    The child runs in a session (and process group) of its own, so a terminal's Ctrl-C, which
    reaches the whole foreground process group, does not stop the database before the API and
    the scheduler that use it: ``stop`` does, last (SIGTERM: redis-server saves, then exits;
    SIGKILL if it has not exited after 30 s). On Linux it also gets SIGTERM if its parent dies
    without stopping it. ``FileNotFoundError`` when there is no ``redis-server`` on the PATH.
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise FileNotFoundError("redis-server")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--save",
            "30 1" if persist else "",
            "--appendonly",
            "no",
            "--logfile",
            "redis.log",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_parent_death_signal(),
    )
    url = f"redis://127.0.0.1:{port}/0"

    def stop() -> None:
        if process.poll() is None:
            process.terminate()  # SIGTERM: redis-server saves, then exits
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    try:
        _wait_for(url)
    except Exception:
        stop()
        raise
    return Database(
        url,
        f"redis-server child process (data in {data_dir})",
        stop,
        f"redis-server child stopped (data saved in {data_dir})"
        if persist
        else "redis-server child stopped",
    )


def start_embedded() -> Database:
    """An in-process Redis-protocol server (fakeredis), in memory: data is lost on exit."""
    from fakeredis import TcpFakeServer

    port = free_port()
    server = TcpFakeServer(("127.0.0.1", port), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="embedded-redis")
    thread.start()
    url = f"redis://127.0.0.1:{port}/0"
    _wait_for(url)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return Database(
        url,
        "embedded in-process server (fakeredis; in memory, lost on exit)",
        stop,
        "embedded server stopped (its data is gone)",
    )


def start_database(local_dir: Path) -> Database:
    url = os.environ.get("REDIS_URL")
    if url:
        _wait_for(url)
        return Database(url, "REDIS_URL", lambda: None, "the REDIS_URL database left running")
    try:
        return start_redis_server(local_dir / "redis")
    except FileNotFoundError:
        return start_embedded()


def bootstrap(url: str, local_dir: Path, api_key: str | None) -> tuple[str, str]:
    """Organization ``local``, instance ``local`` at ``url``, and an API key.

    The key is ``api_key`` when given, else the one kept in ``local_dir/api_key``, else a new
    one (written there, mode 0600). Returns ``(api_key, where it came from)``.
    """
    control = ControlPlane(redis.Redis.from_url(url, decode_responses=True), SystemClock())
    control.create_organization(ORG_ID, "Local development")
    control.register_instance(ORG_ID, INSTANCE_ID, url)
    key_file = local_dir / "api_key"
    if api_key:
        origin = "KIVIDB_API_KEY"
    elif key_file.exists():
        api_key, origin = key_file.read_text().strip(), f"kept in {key_file}"
    else:
        _, api_key = control.issue_api_key(ORG_ID)
        local_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(api_key + "\n")
        origin = f"generated, kept in {key_file}"
    control.register_api_key(ORG_ID, api_key)
    return api_key, origin


def secret_key(local_dir: Path) -> str:
    """The Fernet key that encrypts provider API keys locally (``local_dir/secret.key``)."""
    return load_key_file(local_dir / "secret.key", create=True).decode("ascii")
