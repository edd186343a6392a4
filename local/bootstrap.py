"""Start or reach the database and make the local organization, instance and API key.

Order of preference (DESIGN section 6): ``REDIS_URL``; else a ``redis-server`` child process keeping
its data under ``.local/redis``; else an embedded in-process server (fakeredis over TCP, in memory
only). ``REDIS_URL`` may name a Redis or Valkey Cluster (any node of it; see
``agent_memory.database.client.cluster_mode``). :func:`start_redis_cluster` starts one on loopback
for the tests and benchmarks.
"""

from __future__ import annotations

import ctypes
import os
import random
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
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import (
    check_cluster_option,
    check_url,
    redis_client,
    split_cluster_option,
)
from agent_memory.providers.secrets import load_key_file

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
    """Wait until the server at ``url`` answers PING: its database 0, with our ``cluster``
    option taken off the URL (a cluster refuses SELECT, and redis-py knows no such option);
    whether the URL's database can be used is for the stack's first use of it to say.
    ``ValidationFailed`` (before any connection) for a URL of which no client can be made."""
    check_url(url)
    plain, _ = split_cluster_option(url)
    pool = redis.ConnectionPool.from_url(plain, socket_connect_timeout=0.5)
    pool.connection_kwargs["db"] = 0
    client = redis.Redis(connection_pool=pool)
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
    process = _spawn_redis(binary, port, data_dir, ["--save", "30 1" if persist else ""])
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


CLUSTER_BUS_OFFSET = 10_000
"""A cluster node also listens on its port + 10000 (the cluster bus)."""
CLUSTER_PORTS = (20_000, 45_000)
"""Node ports are drawn from this range, so that port and bus port stay below 55000."""


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def low_free_port() -> int:
    """A free loopback port below 55000 (in ``CLUSTER_PORTS``), the machine's rule for servers
    of our own; :func:`free_port` asks the kernel, which may answer a higher one."""
    while True:
        port = random.randrange(*CLUSTER_PORTS)
        if _port_free(port):
            return port


def cluster_ports(count: int) -> list[int]:
    """``count`` loopback ports in ``CLUSTER_PORTS`` that are free, and whose bus port (+10000)
    is free too."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(*CLUSTER_PORTS)
        taken = {p for c in chosen for p in (c, c + CLUSTER_BUS_OFFSET)}
        if port in taken or port + CLUSTER_BUS_OFFSET in taken:
            continue
        if _port_free(port) and _port_free(port + CLUSTER_BUS_OFFSET):
            chosen.append(port)
    return chosen


@dataclass
class Cluster:
    """A Redis Cluster of ``redis-server`` children on loopback (:func:`start_redis_cluster`).

    ``url`` names its first primary (clients find the others); ``ports`` holds every node's,
    primaries first; ``processes`` each node's process by port. ``kill(port)`` stops one node
    at once (SIGKILL), as a crash would; ``stop()`` stops every node still running (SIGTERM,
    then SIGKILL after 10 s), by pid."""

    url: str
    ports: list[int]
    processes: dict[int, subprocess.Popen[bytes]]
    data_dir: Path

    def kill(self, port: int) -> None:
        process = self.processes[port]
        if process.poll() is None:
            process.kill()
            process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def node(self, port: int) -> redis.Redis:
        """A plain client of one node (for ``CLUSTER`` and ``INFO`` commands)."""
        return redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=5)


def _cluster_node(
    binary: str, port: int, data_dir: Path, node_timeout_ms: int, extra: list[str]
) -> subprocess.Popen[bytes]:
    node_dir = data_dir / str(port)
    node_dir.mkdir(parents=True, exist_ok=True)
    options = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        str(node_timeout_ms),
        "--save",
        "",
        *extra,
    ]
    return _spawn_redis(binary, port, node_dir, options)


def _spawn_redis(
    binary: str, port: int, data_dir: Path, options: list[str]
) -> subprocess.Popen[bytes]:
    """``redis-server`` on loopback ``port`` with its files in ``data_dir``, no AOF, its log in
    ``redis.log`` there, ``options`` after; in a session of its own (see ``start_redis_server``)
    and stopped with its parent on Linux."""
    return subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data_dir),
            "--appendonly",
            "no",
            "--logfile",
            "redis.log",
            *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_parent_death_signal(),
    )


def wait_for_cluster(cluster: Cluster, timeout: float = 30.0) -> None:
    """Until every running node says ``cluster_state:ok`` with all 16384 slots assigned and
    knows every node, and every replica's link to its primary is up. ``TimeoutError``."""
    running = [p for p in cluster.ports if cluster.processes[p].poll() is None]
    deadline = time.monotonic() + timeout
    while True:
        try:
            ready = True
            for port in running:
                node = cluster.node(port)
                info = node.cluster("INFO")
                if (
                    info.get("cluster_state") != "ok"
                    or int(info.get("cluster_slots_assigned", 0)) != 16384
                    or int(info.get("cluster_known_nodes", 0)) < len(running)
                ):
                    ready = False
                    break
                replication = node.info("replication")
                if replication.get("role") == "slave" and (
                    replication.get("master_link_status") != "up"
                ):
                    ready = False
                    break
            if ready:
                return
        except redis.RedisError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster on ports {cluster.ports} did not become ready")
        time.sleep(0.1)


def start_redis_cluster(
    data_dir: Path,
    *,
    primaries: int = 3,
    replicas: int = 0,
    node_timeout_ms: int = 2000,
    extra_args: tuple[str, ...] = (),
) -> Cluster:
    """A Redis Cluster of ``primaries`` primaries, each with ``replicas`` replicas, as
    ``redis-server`` children on loopback ports below 55000 (:func:`cluster_ports`), made with
    ``redis-cli --cluster create`` and ready (:func:`wait_for_cluster`) when returned.

    Nothing is saved (``--save ""``); node files live in ``data_dir/<port>``. A replica takes
    over from its primary ``node_timeout_ms`` after the primary stops answering. The nodes run
    in sessions of their own and get SIGTERM if this process dies (as ``start_redis_server``).
    ``FileNotFoundError`` without ``redis-server`` or ``redis-cli`` on the PATH."""
    binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if binary is None or cli is None:
        raise FileNotFoundError("redis-server" if binary is None else "redis-cli")
    ports = cluster_ports(primaries * (1 + replicas))
    processes = {
        p: _cluster_node(binary, p, data_dir, node_timeout_ms, [*extra_args]) for p in ports
    }
    cluster = Cluster(f"redis://127.0.0.1:{ports[0]}/0", ports, processes, data_dir)
    try:
        for port in ports:
            _wait_for(f"redis://127.0.0.1:{port}/0")
        subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in ports),
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )
        wait_for_cluster(cluster)
        # redis-cli assigns replicas as it likes: list the primaries first.
        roles = {p: cluster.node(p).info("replication")["role"] for p in ports}
        cluster.ports = sorted(ports, key=lambda p: roles[p] != "master")
        cluster.url = f"redis://127.0.0.1:{cluster.ports[0]}/0"
    except BaseException:
        cluster.stop()
        raise
    return cluster


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
    check_cluster_option(url)  # else a cluster told cluster=0 answers MOVED, as if unreachable
    control = ControlPlane(redis_client(url), SystemClock())
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
