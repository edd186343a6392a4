"""The local stack's stand-in for EventBridge Scheduler: a loop that fires due schedules.

Functions of the local stack run with ``KIVIDB_SCHEDULER=local``, so arming a session's extraction
(``agent_memory.background.scheduler.LocalScheduler``) keeps an entry in the stack's database. This
loop, a daemon thread of the launcher process (``python -m local``), polls that database about every
100 ms with :meth:`LocalScheduler.take_due`, which removes what it returns (as
``ActionAfterCompletion: DELETE`` removes a fired schedule), and invokes the template's
``BackgroundFunction`` handler with each event, exactly the JSON object EventBridge Scheduler would
deliver (the schedule target's ``Input``: ``ExtractionTarget.event()``), and a ``LambdaContext``
with the function's timeout and memory.

One invocation at a time, in the launcher process (one warm "container" of the background
function, imported on its first event). A handler that raises is printed with its traceback
(as Lambda logs it) and the loop goes on; an event taken is not retried (EventBridge Scheduler
would retry; the background function records its own failures).

A poll that fails because the database cannot be reached (or answers an error) prints one line
on stderr: what failed, the error class and its first line, with URL credentials and the
database password masked. The next poll waits 0.5 s, then 1, 2, 4... doubling up to
``BACKOFF_MAX_SECONDS`` (30 s) while the failure lasts, so a stopped database costs a few lines a
minute instead of a traceback ten times a second; due entries stay in the database meanwhile. The
first poll that succeeds again prints one line (how long and how many polls failed), and polling
goes back to every 100 ms. A database that comes back is therefore noticed within 30 s.
"""

from __future__ import annotations

import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import redis

from agent_memory.background.scheduler import LocalScheduler
from agent_memory.clock import Clock, SystemClock
from agent_memory.database.client import redis_client
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.database.urls import url_secrets
from agent_memory.errors import AgentMemoryError, DatabaseUnavailable
from local.server import LambdaContext
from local.template import Function

POLL_SECONDS = 0.1
BATCH = 10
BACKOFF_START_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 30.0
REASON_MAX_CHARS = 160

Invoke = Callable[[dict[str, Any]], Any]
Log = Callable[[str], None]

_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """``"ErrorClass: first line of its message"`` for a log line, at most ``REASON_MAX_CHARS``
    characters of message. A ``DatabaseUnavailable`` is described by the library error it was
    raised from (``ConnectionError: Error 111 connecting to 127.0.0.1:6380. Connection
    refused.``), which says more than its fixed message. The ``user:password@`` part of any URL
    in the text becomes ``***@``, and each of ``secrets`` (e.g. the database password) ``***``."""
    if isinstance(exc, DatabaseUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    lines = str(exc).strip().splitlines()
    reason = _URL_CREDENTIALS.sub("***@", lines[0] if lines else "")
    for secret in secrets:
        if secret:
            reason = reason.replace(secret, "***")
    reason = reason.removesuffix(".")  # the line goes on after it
    if len(reason) > REASON_MAX_CHARS:
        reason = reason[: REASON_MAX_CHARS - 3] + "..."
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def invoker(function: Function) -> Invoke:
    """Call ``function``'s handler with an event and a fresh ``LambdaContext`` carrying the
    template's ``Timeout`` and ``MemorySize`` for it (30 s and 512 MB when it sets none)."""

    def invoke(event: dict[str, Any]) -> Any:
        context = LambdaContext(
            function.logical_id,
            timeout_seconds=function.timeout_seconds or 30.0,
            memory_limit_in_mb=function.memory_mb or 512,
        )
        return function.load()(event, context)

    return invoke


class SchedulerLoop:
    """Poll ``scheduler`` every ``interval`` seconds and ``invoke`` each due event in turn.

    ``run_once`` is one poll (returns how many events it invoked); ``start`` runs polls in a
    daemon thread until ``stop``. While polls fail on the database, the thread waits
    ``backoff_start`` s after the first failure and twice as long after each next one, at most
    ``backoff_max`` s; each failure and the recovery are one line given to ``log`` (stderr by
    default). ``secrets`` are masked in those lines (see :func:`describe`).
    """

    def __init__(
        self,
        scheduler: LocalScheduler,
        invoke: Invoke,
        *,
        clock: Clock | None = None,
        interval: float = POLL_SECONDS,
        batch: int = BATCH,
        backoff_start: float = BACKOFF_START_SECONDS,
        backoff_max: float = BACKOFF_MAX_SECONDS,
        log: Log = _stderr,
        secrets: Iterable[str] = (),
    ) -> None:
        self.scheduler = scheduler
        self.invoke = invoke
        self.clock = clock or scheduler.clock
        self.interval = interval
        self.batch = batch
        self.backoff_start = backoff_start
        self.backoff_max = backoff_max
        self.log = log
        self.secrets = tuple(s for s in secrets if s)
        self.failures = 0
        self._failing_since = 0.0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        """Take what is due now and invoke it, oldest first. A poll that fails on the database
        is one log line (see the class); a handler that raises is printed with its traceback.
        Neither is raised."""
        try:
            events = self.scheduler.take_due(self.clock.now(), self.batch)
        except (DatabaseUnavailable, redis.RedisError) as exc:
            # A poll cut short once a stop was asked for is the stop's doing (the launcher
            # stops its redis-server child after waiting for this loop, which a slow poll on a
            # loaded machine can outlast): not a failure to report.
            if not self._stopping.is_set():
                self._failed(exc)
            return 0
        if self.failures:
            self.log(
                f"local scheduler: the database answers again after "
                f"{_seconds(time.monotonic() - self._failing_since)} ({self.failures} failed "
                f"poll{'s' if self.failures > 1 else ''}); polling every {_seconds(self.interval)}"
            )
            self.failures = 0
        for event in events:
            try:
                self.invoke(event)
            except AgentMemoryError as exc:
                # An expected failure (the database went away mid-run, say): one line, as the
                # polls' own failures are; the run records its failure and retries itself.
                self.log(
                    "local scheduler: the background run of "
                    f"{event.get('session_id') or event.get('actor_id')} failed: "
                    + describe(exc, self.secrets)
                )
            except Exception:  # noqa: BLE001 - a bug is printed with its traceback, as Lambda logs it
                print(f"local scheduler: the background function failed on {event}", flush=True)
                traceback.print_exc()
        return len(events)

    def next_delay(self) -> float:
        """Seconds until the next poll: ``interval`` while polls succeed, else the backoff
        (``backoff_start`` doubled for each failure after the first, at most ``backoff_max``)."""
        if not self.failures:
            return self.interval
        return min(self.backoff_max, self.backoff_start * 2.0 ** min(self.failures - 1, 62))

    def _failed(self, exc: BaseException) -> None:
        self.failures += 1
        if self.failures == 1:
            self._failing_since = time.monotonic()
            self.log(
                f"local scheduler: cannot take due extractions from the database: "
                f"{describe(exc, self.secrets)}; next try in {_seconds(self.next_delay())} "
                f"(the wait doubles up to {_seconds(self.backoff_max)} while this lasts)"
            )
        else:
            self.log(
                f"local scheduler: still cannot reach the database (failure {self.failures}, "
                f"{_seconds(time.monotonic() - self._failing_since)}): "
                f"{describe(exc, self.secrets)}; next try in {_seconds(self.next_delay())}"
            )

    def _run(self) -> None:
        while not self._stopping.is_set():
            # A full batch may mean more is due: poll again at once.
            if self.run_once() < self.batch:
                self._stopping.wait(self.next_delay())

    def start(self) -> threading.Thread:
        """Run in a daemon thread (it never keeps the process alive)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="local-scheduler")
            self._thread.start()
        return self._thread

    def request_stop(self) -> None:
        """Poll no more (an invocation in progress finishes); returns at once, so a signal
        handler may call it. :meth:`stop` also waits for the thread."""
        self._stopping.set()

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop polling; waits up to ``timeout`` s for an invocation in progress."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)


def start_scheduler_loop(
    database_url: str,
    background: Function,
    *,
    keys: LocalScheduleKeys | None = None,
    interval: float = POLL_SECONDS,
) -> SchedulerLoop:
    """The launcher's loop: the stack's database at ``database_url`` (the same control database the
    functions' ``LocalScheduler`` writes to) and the template's background function. Started before
    it is returned. The client does not retry a command (the loop's backoff does), and the URL's
    credentials are masked in the loop's lines (``agent_memory.database.urls.url_secrets``: its user
    part's password, its ``password=`` query option...). The database may be a cluster
    (``agent_memory.database.client.redis_client``'s cluster client, which it then connects to here:
    ``DatabaseUnavailable`` when it cannot)."""
    client = redis_client(database_url)
    scheduler = LocalScheduler(client, SystemClock(), keys=keys)
    loop = SchedulerLoop(
        scheduler, invoker(background), interval=interval, secrets=url_secrets(database_url)
    )
    loop.start()
    return loop


PERIODIC_SECONDS = 0.5
"""How often the local stack invokes a scheduled function (``rate(1 minute)`` in AWS): often,
so that a webhook is sent within a second of its event here."""


class PeriodicLoop:
    """Invoke ``function`` (one of the template's scheduled functions) every ``interval``
    seconds on a daemon thread, with the event EventBridge Scheduler sends a target without
    ``Input`` (``{}``); a handler that raises is printed with its traceback and the loop goes
    on, as Lambda would invoke it again at the next minute. While the database cannot be
    reached the loop waits twice as long after each failure (at most ``BACKOFF_MAX_SECONDS``)
    and prints nothing: the scheduler loop, on the same database, says so in its lines."""

    def __init__(self, function: Function, interval: float = PERIODIC_SECONDS) -> None:
        self.function = function
        self.interval = interval
        self.failures = 0
        self._invoke = invoker(function)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> None:
        """One invocation; nothing is raised."""
        try:
            self._invoke({})
        except (DatabaseUnavailable, redis.RedisError):
            self.failures += 1
            return
        except Exception:  # noqa: BLE001 - printed with its traceback, as Lambda logs it
            print(f"local scheduler: {self.function.logical_id} failed", flush=True)
            traceback.print_exc()
        self.failures = 0

    def next_delay(self) -> float:
        """``interval``, or the backoff while the database cannot be reached."""
        if not self.failures:
            return self.interval
        return min(BACKOFF_MAX_SECONDS, self.interval * 2.0 ** min(self.failures, 62))

    def _run(self) -> None:
        while not self._stopping.wait(self.next_delay()):
            self.run_once()

    def start(self) -> PeriodicLoop:
        """Run on a daemon thread (it never keeps the process alive); returns itself."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"local-{self.function.logical_id}"
            )
            self._thread.start()
        return self

    def stop(self, timeout: float | None = 15.0) -> None:
        """Invoke no more; waits up to ``timeout`` s for an invocation in progress."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
