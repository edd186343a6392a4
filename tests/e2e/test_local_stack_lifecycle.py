"""`python -m local` (what `make run` starts) as a terminal sees it: Ctrl-C and SIGTERM stop it in
order and quietly, and a database that stops under it costs one line per failed poll."""

from __future__ import annotations

import http.client
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

from local.bootstrap import free_port, start_redis_cluster, start_redis_server
from local.launch import ROOT, running_stack

API_KEY = "kvm_e2e_lifecycle_key_0123456789abcdefghijkl"


def _database_url(log: Path) -> str:
    found = re.search(r"database:\s+(redis://\S+)", log.read_text())
    assert found, log.read_text()
    return found.group(1)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_for_line(log: Path, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if text in line:
                return line
        time.sleep(0.1)
    raise AssertionError(f"no line with {text!r} after {timeout} s:\n{log.read_text()[-3000:]}")


@pytest.mark.parametrize(
    ("workers", "signum", "to_group"),
    [("2", signal.SIGINT, True), ("1", signal.SIGTERM, False)],
    ids=["ctrl-c-to-the-process-group-2-workers", "sigterm-to-the-launcher-1-worker"],
)
def test_a_stop_signal_stops_api_scheduler_then_redis_child_quietly(
    tmp_path: Path, workers: str, signum: signal.Signals, to_group: bool
) -> None:
    local_dir, log = tmp_path / "local", tmp_path / "stack.log"
    env = {
        "REDIS_URL": None,  # its own redis-server child
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(local_dir),
        "KIVIDB_WORKERS": workers,
    }
    with running_stack(env, log=log, timeout=120, new_session=True) as (url, process):
        headers = {"Authorization": f"Bearer {API_KEY}"}
        assert httpx.get(f"{url}/agent-memory", headers=headers, timeout=30).status_code == 200
        database = redis.Redis.from_url(_database_url(log))
        redis_pid = int(database.info("server")["process_id"])
        assert redis_pid != process.pid and not _gone(redis_pid)
        if to_group:
            os.killpg(process.pid, signum)  # what a terminal's Ctrl-C does
        else:
            process.send_signal(signum)  # what `kill` and local.launch.stop do
        status = process.wait(timeout=40)
    output = log.read_text()
    assert status == 0, output
    assert "Traceback" not in output and "Error" not in output, output
    assert output.rstrip("\n").splitlines()[-1] == (
        f"local stack: stopped on {signum.name}: API stopped, scheduler stopped, "
        f"redis-server child stopped (data saved in {local_dir / 'redis'})"
    )
    assert _gone(redis_pid)
    with pytest.raises(redis.ConnectionError):
        database.ping()
    assert (local_dir / "redis" / "dump.rdb").is_file()  # it saved on its way out
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/agent-memory", timeout=2)


def test_a_stopped_database_costs_one_line_per_failed_poll_and_recovery_one_line(
    tmp_path: Path,
) -> None:
    port = free_port()
    data = tmp_path / f"redis-{uuid.uuid4().hex[:6]}"
    database = start_redis_server(data, persist=False, port=port)
    log = tmp_path / "stack.log"
    env = {
        "REDIS_URL": database.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
        "KIVIDB_WORKERS": "2",
    }
    again = None
    try:
        with running_stack(env, log=log, timeout=120, new_session=True) as (_, process):
            banner = len(log.read_text().splitlines())
            database.stop()
            time.sleep(4.0)
            down = log.read_text().splitlines()[banner:]
            # One line per failed poll, 0.5, 1, 2 s apart: at most 4 in 4 s, never a traceback.
            assert 2 <= len(down) <= 4, down
            assert all(line.startswith("local scheduler: ") for line in down), down
            assert f"ConnectionError: Error 111 connecting to 127.0.0.1:{port}" in down[-1]
            again = start_redis_server(data, persist=False, port=port)
            recovered = _wait_for_line(log, "answers again", timeout=35)  # the 30 s cap at most
            assert recovered.startswith("local scheduler: the database answers again after ")
            os.killpg(process.pid, signal.SIGINT)
            status = process.wait(timeout=40)
        output = log.read_text()
        assert status == 0, output
        assert "Traceback" not in output, output
        assert output.rstrip("\n").splitlines()[-1] == (
            "local stack: stopped on SIGINT: API stopped, scheduler stopped, "
            "the REDIS_URL database left running"
        )
        assert redis.Redis.from_url(again.url).ping()  # not ours to stop
    finally:
        database.stop()
        if again is not None:
            again.stop()


@pytest.mark.parametrize(
    ("given", "printed"),
    [
        ("redis://app:s3cr%40t-pass@127.0.0.1:{port}/0", "redis://app:***@127.0.0.1:{port}/0"),
        ("redis://127.0.0.1:{port}/0?password=s3cr%40t-pass", "redis://127.0.0.1:{port}/0?***"),
    ],
)
def test_an_unreachable_redis_url_is_one_line_without_its_password(
    tmp_path: Path, given: str, printed: str
) -> None:
    port = free_port()  # nothing listens there
    env = {
        **os.environ,
        "REDIS_URL": given.format(port=port),
        "PORT": str(free_port()),
        "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "local"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"local stack: cannot reach the database at REDIS_URL={printed.format(port=port)}: "
        f"ConnectionError: Error 111 connecting to 127.0.0.1:{port}. Connection refused"
    ]
    assert not (tmp_path / "local" / "api_key").exists()  # nothing was bootstrapped


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    started = start_redis_cluster(tmp_path_factory.mktemp("lifecycle-cluster") / "cluster")
    try:
        yield started
    finally:
        started.stop()


@pytest.mark.parametrize("option", ["", "?cluster=1"], ids=["detected", "said-by-the-url"])
def test_a_cluster_redis_url_serves_and_the_banner_says_it_is_one(
    tmp_path: Path, cluster, option: str
) -> None:
    log = tmp_path / "stack.log"
    env = {
        "REDIS_URL": cluster.url + option,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
    }
    with running_stack(env, log=log, timeout=120) as (url, _):
        answer = httpx.get(f"{url}/agent-memory", headers={"Authorization": f"Bearer {API_KEY}"})
        assert answer.status_code == 200, answer.text
        banner = _wait_for_line(log, "database:", 10)
        assert banner.endswith("(REDIS_URL, a Redis Cluster of 3 primaries)"), banner
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize(
    ("suffix", "reason"),
    [
        ("/2", "a cluster has only database 0: register it with a URL without a database number."),
        ("?cluster=0", "the URL says cluster=0: remove the option"),
    ],
    ids=["a-database-number", "told-it-is-no-cluster"],
)
def test_a_cluster_url_it_cannot_use_is_one_line_saying_why(
    tmp_path: Path, cluster, suffix: str, reason: str
) -> None:
    env = {
        **os.environ,
        "REDIS_URL": cluster.url + suffix,
        "PORT": str(free_port()),
        "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "local"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"local stack: cannot use the database at REDIS_URL={cluster.url}")
    assert reason in lines[0]


def test_a_single_node_said_to_be_a_cluster_is_one_line_saying_why(tmp_path: Path) -> None:
    database = start_redis_server(tmp_path / "redis", persist=False)
    try:
        env = {
            **os.environ,
            "REDIS_URL": database.url + "?cluster=1",
            "PORT": str(free_port()),
            "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
        }
        done = subprocess.run(
            [sys.executable, "-m", "local"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        database.stop()
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "the database is not a cluster node" in lines[0], done.stderr


def test_an_idle_kept_alive_connection_stays_open_longer_than_clients_keep_theirs(stack):
    """httpx keeps an idle connection 5 s; a server closing its side after the same 5 s raced
    clients reusing it ("Server disconnected without sending a response", once in a stress
    run). A request sent on a connection idle for 6 s is answered on it."""
    host, port = stack.url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        for wait in (0, 6):
            time.sleep(wait)
            connection.request("GET", "/agent-memory", headers=headers)
            answer = connection.getresponse()  # RemoteDisconnected had the server closed it
            answer.read()
            assert answer.status == 200
    finally:
        connection.close()
