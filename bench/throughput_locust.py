"""Locust users for ``bench/throughput.py``: each user sends one operation's requests back to
back (no wait) and records its own timing of each.

``bench/throughput.py`` runs it in a process of its own (locust's gevent monkey-patches)::

    locust -f bench/throughput_locust.py --headless -u 16 -r 16 -t 12s --host http://127.0.0.1:PORT

Read from the environment: ``KIVIDB_THROUGHPUT_PLAN``, a JSON file ``{"headers": {name: value},
"requests": [[method, path, body or null], ...]}`` that each user cycles through from an offset
of its own, and ``KIVIDB_THROUGHPUT_OUT``, where the users' timings are written as JSON when the
test stops: ``[[start (epoch s), milliseconds, HTTP status (0: no answer)], ...]``. In a path or
a body, ``@USER@`` is the user's number, ``@N@`` its count of requests sent so far, ``@S@`` that
count divided by 50 (a new session every 50 requests) and ``@UID@`` a new random hex id.
"""

from __future__ import annotations

import itertools
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from locust import FastHttpUser, events, task  # type: ignore[import-not-found,unused-ignore]

PLAN: dict[str, Any] = json.loads(Path(os.environ["KIVIDB_THROUGHPUT_PLAN"]).read_text())
HEADERS: dict[str, str] = PLAN["headers"]
REQUESTS: list[list[Any]] = PLAN["requests"]
NUMBERS = itertools.count()
TIMINGS: list[tuple[float, float, int]] = []


def _filled(text: str, user: int, n: int) -> str:
    if "@" not in text:
        return text
    text = text.replace("@USER@", str(user)).replace("@N@", str(n)).replace("@S@", str(n // 50))
    return text.replace("@UID@", uuid.uuid4().hex) if "@UID@" in text else text


class OneOperation(FastHttpUser):  # type: ignore[misc,unused-ignore]
    """Sends the plan's requests in turn, each timed from before it is sent to its answer read."""

    network_timeout = 120.0
    connection_timeout = 120.0

    def on_start(self) -> None:
        self.number = next(NUMBERS)
        self.sent = 0

    @task  # type: ignore[untyped-decorator,unused-ignore]
    def send(self) -> None:
        method, path, body = REQUESTS[(self.number * 7 + self.sent) % len(REQUESTS)]
        path = _filled(path, self.number, self.sent)
        data = None if body is None else _filled(body, self.number, self.sent)
        self.sent += 1
        started = time.time()
        clock = time.perf_counter()
        with self.client.request(
            method, path, data=data, headers=HEADERS, name=method, catch_response=True
        ) as response:
            _ = response.content
            elapsed = (time.perf_counter() - clock) * 1000
            status = int(response.status_code or 0)
            if not 200 <= status < 300:
                response.failure(f"HTTP {status}")
        TIMINGS.append((started, elapsed, status))


@events.test_stop.add_listener  # type: ignore[untyped-decorator,unused-ignore]
def write_timings(**_: Any) -> None:
    """Write every user's timings to ``KIVIDB_THROUGHPUT_OUT``."""
    Path(os.environ["KIVIDB_THROUGHPUT_OUT"]).write_text(json.dumps(TIMINGS))
