"""The local stack's stop signals: a second one that arrives inside the first one's handler
(make passes a process group's SIGTERM on to its children, so two come at once) must not
wait for a lock the first one holds."""

from __future__ import annotations

import signal
import threading

from local.__main__ import Shutdown


class Loop:
    """The scheduler loop's stop as it is (``SchedulerLoop.request_stop``: ``Event.set()``),
    with the second signal delivered while the first ``set()`` holds the Event's lock."""

    def __init__(self, shutdown: Shutdown) -> None:
        self.shutdown = shutdown
        self.stopping = threading.Event()
        self.calls = 0

    def request_stop(self) -> None:
        self.calls += 1
        if self.calls == 1:
            with self.stopping._cond:  # type: ignore[attr-defined]  # inside Event.set()
                self.shutdown.note(signal.SIGTERM)
        self.stopping.set()


def test_a_second_stop_signal_inside_the_first_handler_returns_at_once():
    shutdown = Shutdown()
    loop = Loop(shutdown)
    shutdown.loop = loop  # type: ignore[assignment]
    done = threading.Event()

    def first_signal() -> None:
        shutdown.note(signal.SIGINT)
        done.set()

    threading.Thread(target=first_signal, daemon=True).start()
    assert done.wait(5), "the nested stop signal waited for the lock the first one held"
    assert loop.calls == 1 and loop.stopping.is_set()
    assert shutdown.signal_name == "SIGINT"
