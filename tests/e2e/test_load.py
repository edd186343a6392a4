"""Mixed traffic through the local stack, a short version of ``make bench-load`` (bench/load.py):
the same agents (bench/traffic.py) on threads instead of locust, for a few seconds, then
everything read back once background extraction has caught up."""

from __future__ import annotations

import threading
import time

from bench.traffic import Agent, Ledger, check_exactly_once, httpx_transport, statuses
from kividb_memory import MemoryClient
from tests.support.common import unique
from tests.support.stack import model_store

AGENTS = 4
SECONDS = 6.0


def test_mixed_traffic_keeps_every_acknowledged_write_exactly_once(open_stack, provider):
    with open_stack.memory() as api:
        store = model_store(api, provider, summarize_after=1000, dedupe_threshold=1.0)
        clients = [open_stack.client() for _ in range(AGENTS)]
        agents = [
            Agent(
                httpx_transport(http),
                store,
                unique("load"),
                dimensions=None,
                extract=True,
                turns_per_session=4,
                seed=n,
            )
            for n, http in enumerate(clients)
        ]
        end = time.monotonic() + SECONDS

        def loop(agent: Agent) -> None:
            while time.monotonic() < end:
                agent.step()
            agent.finish()

        threads = [threading.Thread(target=loop, args=(a,)) for a in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for http in clients:
            http.close()
        waiting = wait_for_extraction(api, store, limit=30.0)
        ledger = Ledger(store)
        for agent in agents:
            ledger.extend(agent.ledger)
        check = check_exactly_once(api, ledger)
        api.delete_store("local", store.rsplit("/", 1)[1])
    assert statuses(ledger.answers) == {"2xx": len(ledger.answers)}
    assert {a.route for a in ledger.answers} >= {"POST events", "POST recall", "POST extract"}
    assert waiting == 0, "extraction did not catch up within 30 s"
    assert check.failures == 0, check
    assert check.messages_acknowledged > 0 and check.memories_acknowledged > 0
    assert check.extracted > 0  # every user line says "I wrote down ...": one memory each


def wait_for_extraction(api: MemoryClient, store: str, limit: float) -> int:
    """Sessions of ``store`` (a path) still waiting for extraction once none is, or ``limit``
    seconds passed."""
    deadline = time.monotonic() + limit
    while True:
        counts = api.get_store("local", store.rsplit("/", 1)[1]).counts
        assert counts is not None
        waiting = counts.waiting_for_extraction
        if waiting == 0 or time.monotonic() > deadline:
            return waiting
        time.sleep(0.5)
