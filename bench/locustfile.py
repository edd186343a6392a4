"""Locust users for ``bench/load.py``: each user is one ``bench.traffic.Agent`` (its own actor
and sessions; append, recall, search, add memory, read session, extract each finished session)
on one store whose models are the scripted provider.

``bench/load.py`` runs it in a process of its own (locust's gevent monkey-patches)::

    locust -f bench/locustfile.py --headless -u 16 -r 16 -t 60s --stop-timeout 40 \\
        --host http://127.0.0.1:PORT --csv PREFIX

Read from the environment: ``KIVIDB_LOAD_STORE`` (the store's path), ``KIVIDB_LOAD_KEY`` (the
API key), ``KIVIDB_LOAD_TAG`` (a prefix for actor and session ids), ``KIVIDB_LOAD_WAIT`` (each
user waits a random 0 to that many seconds between calls; default 0) and
``KIVIDB_LOAD_LEDGER`` (where the users' ``bench.traffic.Ledger`` is written as JSON when the
test stops, after every user finished its call in flight).
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from locust import FastHttpUser, between, events, task  # type: ignore[import-not-found,unused-ignore]

from bench.traffic import CLIENT_TIMEOUT, Agent, Ledger, Reply, Route

STORE = os.environ.get("KIVIDB_LOAD_STORE", "")
HEADERS = {"Authorization": f"Bearer {os.environ.get('KIVIDB_LOAD_KEY', '')}"}
TAG = os.environ.get("KIVIDB_LOAD_TAG", "load")
AGENTS: list[Agent] = []
NUMBERS = itertools.count()


class AgentUser(FastHttpUser):  # type: ignore[misc,unused-ignore]
    """One agent; its calls are named by route in locust's statistics."""

    wait_time = between(0.0, float(os.environ.get("KIVIDB_LOAD_WAIT", "0")))
    network_timeout = CLIENT_TIMEOUT
    connection_timeout = CLIENT_TIMEOUT

    def on_start(self) -> None:
        self.agent = Agent(
            self.send, STORE, f"{TAG}-u{next(NUMBERS)}", dimensions=None, extract=True
        )
        AGENTS.append(self.agent)

    def send(self, method: str, path: str, body: dict[str, Any] | None, route: Route) -> Reply:
        """A ``bench.traffic.Transport`` over locust's client: a non-2xx answer is a failure in
        locust's statistics too."""
        with self.client.request(
            method, path, json=body, name=route, headers=HEADERS, catch_response=True
        ) as response:
            status = int(response.status_code)
            if not 200 <= status < 300:
                response.failure(f"HTTP {status}")
            if status == 0:  # no answer: geventhttpclient's connection error or timeout
                return Reply(None, error=f"no answer ({type(response.error).__name__})")
            try:
                data = response.json() if response.content else None
            except ValueError:
                data = None
            return Reply(status, data, response.headers.get("retry-after"))

    @task  # type: ignore[untyped-decorator,unused-ignore]
    def step(self) -> None:
        self.agent.step()


@events.test_stop.add_listener  # type: ignore[untyped-decorator,unused-ignore]
def write_ledger(**_: Any) -> None:
    """Write every agent's ledger, merged, to ``KIVIDB_LOAD_LEDGER``."""
    ledger = Ledger(STORE)
    for agent in AGENTS:
        ledger.extend(agent.ledger)
    target = os.environ.get("KIVIDB_LOAD_LEDGER")
    if target:
        Path(target).write_text(json.dumps(ledger.dump()), encoding="utf-8")
