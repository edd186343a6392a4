"""The local stack's stand-in for EventBridge Scheduler: a loop that fires due schedules.

Functions of the local stack run with ``KIVIDB_SCHEDULER=local``, so arming a session's
extraction (``agent_memory.scheduler.LocalScheduler``) keeps an entry in the stack's database.
This loop, a daemon thread of the launcher process (``python -m local``), polls that database
about every 100 ms with :meth:`LocalScheduler.take_due`, which removes what it returns (as
``ActionAfterCompletion: DELETE`` removes a fired schedule), and invokes the template's
``BackgroundFunction`` handler with each event, exactly the JSON object EventBridge Scheduler
would deliver (the schedule target's ``Input``: ``ExtractionTarget.event()``), and a
``LambdaContext`` with the function's timeout and memory.

One invocation at a time, in the launcher process (one warm "container" of the background
function, imported on its first event). A handler that raises, or a database that cannot be
reached, is printed with its traceback and the loop goes on; an event taken is not retried
(EventBridge Scheduler would retry; the background function records its own failures).
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

import redis

from agent_memory.clock import Clock, SystemClock
from agent_memory.keys import LocalScheduleKeys
from agent_memory.scheduler import LocalScheduler
from local.server import LambdaContext
from local.template import Function

POLL_SECONDS = 0.1
BATCH = 10

Invoke = Callable[[dict[str, Any]], Any]


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
    daemon thread until ``stop``.
    """

    def __init__(
        self,
        scheduler: LocalScheduler,
        invoke: Invoke,
        *,
        clock: Clock | None = None,
        interval: float = POLL_SECONDS,
        batch: int = BATCH,
    ) -> None:
        self.scheduler = scheduler
        self.invoke = invoke
        self.clock = clock or scheduler.clock
        self.interval = interval
        self.batch = batch
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> int:
        """Take what is due now and invoke it, oldest first; errors are printed, not raised."""
        try:
            events = self.scheduler.take_due(self.clock.now(), self.batch)
        except Exception:  # noqa: BLE001 - the loop outlives a database hiccup
            traceback.print_exc()
            return 0
        for event in events:
            try:
                self.invoke(event)
            except Exception:  # noqa: BLE001 - a failed run is printed, as Lambda logs it
                print(f"local scheduler: the background function failed on {event}", flush=True)
                traceback.print_exc()
        return len(events)

    def _run(self) -> None:
        while not self._stopping.is_set():
            # A full batch may mean more is due: poll again at once.
            if self.run_once() < self.batch:
                self._stopping.wait(self.interval)

    def start(self) -> threading.Thread:
        """Run in a daemon thread (it never keeps the process alive)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="local-scheduler")
            self._thread.start()
        return self._thread

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
    """The launcher's loop: the stack's database at ``database_url`` (the same control
    database the functions' ``LocalScheduler`` writes to) and the template's background
    function. Started before it is returned."""
    client = redis.Redis.from_url(
        database_url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5
    )
    scheduler = LocalScheduler(client, SystemClock(), keys=keys)
    loop = SchedulerLoop(scheduler, invoker(background), interval=interval)
    loop.start()
    return loop
