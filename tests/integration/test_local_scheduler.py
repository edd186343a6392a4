"""The local stack's scheduler loop while its database is stopped and started again: one line
per failed poll with a doubling wait, one line on recovery, and no secret in any of them."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest
import redis

from agent_memory.background.scheduler import ExtractionTarget, LocalScheduler
from agent_memory.clock import SystemClock
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.errors import DatabaseUnavailable
from local.bootstrap import Database, free_port, start_redis_server
from local.scheduler import SchedulerLoop, describe, start_scheduler_loop
from local.template import Function

TARGET = ExtractionTarget("db-1", "support", "chat:42@web")


class Lines:
    """What the loop logs, each line with the monotonic time it was logged at."""

    def __init__(self) -> None:
        self.items: list[tuple[float, str]] = []

    def __call__(self, line: str) -> None:
        self.items.append((time.monotonic(), line))

    def texts(self) -> list[str]:
        return [line for _, line in self.items]

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.texts():
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in {timeout} s: {self.texts()}")


def _server(tmp_path: Path, port: int) -> Database:
    return start_redis_server(tmp_path / f"redis-{uuid.uuid4().hex[:6]}", persist=False, port=port)


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def keys() -> LocalScheduleKeys:
    return LocalScheduleKeys(namespace=f"test-{uuid.uuid4().hex[:8]}")


def test_a_stopped_database_is_one_line_per_failure_with_a_doubling_wait_then_one_on_recovery(
    tmp_path: Path, keys: LocalScheduleKeys
) -> None:
    port = free_port()
    database = _server(tmp_path, port)
    lines, calls = Lines(), []
    client = redis.Redis.from_url(database.url, decode_responses=True, socket_timeout=5)
    loop = SchedulerLoop(LocalScheduler(client, SystemClock(), keys=keys), calls.append, log=lines)
    loop.start()
    try:
        time.sleep(0.3)
        assert lines.texts() == []  # polls that succeed say nothing
        database.stop()
        assert _refused(port)
        stopped_at = time.monotonic()
        time.sleep(4.0)
        down = lines.texts()
        # Waits of 0.5, 1, 2, 4 s: failures at about 0, 0.5, 1.5 and 3.5 s, never sooner; the
        # loop used to print a 65-line traceback every 100 ms.
        assert 2 <= len(down) <= 4, down
        assert "cannot take due extractions from the database: ConnectionError: " in down[0]
        assert f"Error 111 connecting to 127.0.0.1:{port}" in down[-1]
        assert "next try in 0.5 s (the wait doubles up to 30 s while this lasts)" in down[0]
        assert "still cannot reach the database (failure 2, " in down[1]
        assert down[1].endswith("; next try in 1.0 s")
        assert all("\n" not in line and "Traceback" not in line for line in down)
        times = [at - stopped_at for at, _ in lines.items]
        assert all(later - earlier >= 0.45 for earlier, later in pairwise(times))

        again = _server(tmp_path, port)  # the same address, as a restarted server has
        try:
            recovered = lines.wait_for("answers again", timeout=35)  # at most the 30 s cap
            failed = len(lines.texts()) - 1
            assert recovered.startswith("local scheduler: the database answers again after ")
            assert recovered.endswith(f"({failed} failed polls); polling every 0.1 s")
            # Polling is back to every 100 ms: an entry due now is invoked within a second.
            LocalScheduler(
                redis.Redis.from_url(again.url, decode_responses=True), SystemClock(), keys=keys
            ).arm(TARGET, datetime.now(UTC))
            deadline = time.monotonic() + 5
            while not calls and time.monotonic() < deadline:
                time.sleep(0.02)
            assert calls == [TARGET.event()]
            assert lines.texts()[-1] == recovered  # nothing more was printed
        finally:
            loop.stop()
            again.stop()
    finally:
        loop.stop()
        database.stop()
    assert loop._thread is not None and not loop._thread.is_alive()


def test_the_wait_between_failed_polls_doubles_up_to_its_cap(keys: LocalScheduleKeys) -> None:
    port = free_port()  # nothing listens there
    lines = Lines()
    client = redis.Redis.from_url(f"redis://127.0.0.1:{port}/0", socket_connect_timeout=1)
    loop = SchedulerLoop(
        LocalScheduler(client, SystemClock(), keys=keys),
        lambda event: None,
        backoff_start=0.1,
        backoff_max=0.4,
        log=lines,
    )
    assert [loop.next_delay()] == [0.1]  # the poll interval while nothing fails
    loop.start()
    time.sleep(2.5)
    loop.stop()
    texts = lines.texts()
    # Waits 0.1, 0.2, 0.4, 0.4, ...: at most 1 + 3 + (2.5 - 0.7) / 0.4 = 8 polls in 2.5 s.
    assert 4 <= len(texts) <= 8, texts
    assert [text.rsplit("next try in ", 1)[1] for text in texts[:4]] == [
        "0.1 s (the wait doubles up to 0.4 s while this lasts)",
        "0.2 s",
        "0.4 s",
        "0.4 s",
    ]
    times = [at for at, _ in lines.items]
    gaps = [later - earlier for earlier, later in pairwise(times)]
    assert all(
        gap >= wait * 0.9 for gap, wait in zip(gaps, [0.1, 0.2] + [0.4] * 10, strict=False)
    ), gaps


def test_the_launcher_loop_never_prints_the_database_password(
    keys: LocalScheduleKeys, capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    port = free_port()  # nothing listens there
    url = f"redis://kividb:s3cret%2Fpass@127.0.0.1:{port}/0"
    never = Function("Never", tmp_path, "never.lambda_handler")  # nothing is due: never loaded
    loop = start_scheduler_loop(url, never, keys=keys)
    try:
        deadline = time.monotonic() + 5
        err = ""
        while "cannot take due extractions" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capfd.readouterr().err
    finally:
        loop.stop()
    (line,) = err.splitlines()  # one failure so far (the next try is 0.5 s later)
    assert line.startswith("local scheduler: cannot take due extractions from the database: ")
    assert "s3cret" not in line and "Traceback" not in err


def test_a_failure_is_described_by_its_cause_with_credentials_masked() -> None:
    cause = redis.ConnectionError(
        "Error 111 connecting to rediss://admin:hunter2@db.example.com:6380/0.\nsecond line"
    )
    try:
        raise DatabaseUnavailable("The database cannot be reached right now.") from cause
    except DatabaseUnavailable as exc:
        wrapped = exc
    assert describe(wrapped) == (
        "ConnectionError: Error 111 connecting to rediss://***@db.example.com:6380/0"
    )
    assert describe(redis.ResponseError("WRONGPASS for hunter2"), ["hunter2"]) == (
        "ResponseError: WRONGPASS for ***"
    )
    assert describe(redis.TimeoutError()) == "TimeoutError"
    long = describe(redis.ConnectionError("x" * 500))
    assert long == "ConnectionError: " + "x" * 157 + "..."


def test_a_run_that_fails_on_the_database_is_one_line_and_a_bug_keeps_its_traceback(
    tmp_path: Path, keys: LocalScheduleKeys, capsys: pytest.CaptureFixture[str]
) -> None:
    database = _server(tmp_path, free_port())
    try:
        client = redis.Redis.from_url(database.url, decode_responses=True)
        scheduler = LocalScheduler(client, SystemClock(), keys=keys)
        lines = Lines()

        def database_gone(event: dict[str, str]) -> None:
            try:
                raise ConnectionError("Error 111 connecting to redis://u:hunter2@10.0.0.1:6379")
            except ConnectionError as exc:
                raise DatabaseUnavailable("The database is unavailable.") from exc

        scheduler.arm(TARGET, datetime.now(UTC))
        assert SchedulerLoop(scheduler, database_gone, log=lines).run_once() == 1
        (line,) = lines.texts()
        assert line == (
            "local scheduler: the background run of chat:42@web failed: ConnectionError: "
            "Error 111 connecting to redis://***@10.0.0.1:6379"
        )
        assert "Traceback" not in capsys.readouterr().out

        def bug(event: dict[str, str]) -> None:
            raise KeyError("oops")

        scheduler.arm(TARGET, datetime.now(UTC))
        assert SchedulerLoop(scheduler, bug, log=lines).run_once() == 1
        printed = capsys.readouterr()
        assert "the background function failed on" in printed.out
        assert "Traceback" in printed.err and "KeyError: 'oops'" in printed.err
    finally:
        database.stop()


def test_a_poll_cut_short_by_the_stop_is_not_reported(keys: LocalScheduleKeys) -> None:
    """Seen under a stress run: the launcher waited 5 s for a slow poll, stopped its
    redis-server child, and the poll's ConnectionError was logged as the database failing."""
    lines = Lines()
    polling, stopped = threading.Event(), threading.Event()

    class ClosedUnderIt(LocalScheduler):
        def take_due(self, now: datetime, limit: int) -> list:  # type: ignore[override]
            polling.set()
            stopped.wait(10)
            raise redis.ConnectionError("Connection closed by server.")

    client = redis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    loop = SchedulerLoop(ClosedUnderIt(client, SystemClock(), keys=keys), print, log=lines)
    loop.start()
    assert polling.wait(10)
    loop.request_stop()
    stopped.set()
    loop.stop(10)
    assert lines.texts() == []
    # the same failure in a loop no one asked to stop is reported
    running = SchedulerLoop(ClosedUnderIt(client, SystemClock(), keys=keys), print, log=lines)
    assert running.run_once() == 0
    assert [t.split(":")[0] for t in lines.texts()] == ["local scheduler"]
