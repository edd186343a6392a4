"""Faults under traffic, short versions of ``make bench-faults`` (bench/faults.py).

Each test runs agents without pause on two fresh stores (client vectors; models on a loopback
provider) through a local stack of its own, on a redis-server of its own, injects one fault for
a couple of seconds, lets traffic recover, and reads everything back: no 500, a database 503
always with ``Retry-After``, an answer to every call within the client timeout, the same stack
process throughout, and every acknowledged message and memory there exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.faults import FaultRun, World, run_fault, world
from bench.traffic import CLIENT_TIMEOUT, Append, Ledger, check_exactly_once, statuses


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with world(Path(tmp_path_factory.mktemp("faults")), workers=4) as running:
        yield running


def fault(w: World, name: str, seconds: float) -> FaultRun:
    return run_fault(w, name, duration=seconds, agents_per_store=1, warmup=1.0, settle=1.0)


def assert_nothing_broke(run: FaultRun, allowed: set[str]) -> None:
    """What must hold after every fault (see the module docstring); ``allowed``: the kinds of
    answer (``bench.traffic.statuses``) the fault may give besides 2xx."""
    kinds = statuses(run.answers)
    assert set(kinds) <= {"2xx"} | allowed, kinds
    assert run.server_errors == 0, kinds
    assert run.unanswered == 0, kinds
    assert run.max_seconds < CLIENT_TIMEOUT
    assert run.missing_retry_after("database_unavailable") == 0
    assert run.survived, "the stack's process stopped or was replaced"
    assert run.recovery is not None, "some agent had no 2xx answer after the fault"
    assert run.check.failures == 0, run.check
    assert run.check.messages_acknowledged > 0
    assert run.check.memories_acknowledged > 0


def test_a_stopped_database_answers_503_with_retry_after_and_loses_nothing(faulty):
    run = fault(faulty, "db-stop", 2.0)
    assert_nothing_broke(run, {"503 database_unavailable"})
    assert statuses(run.answers)["503 database_unavailable"] > 0  # the outage was felt
    assert run.recovery is not None and run.recovery < 5.0


def test_a_stalled_database_answers_503_or_late_and_loses_nothing(faulty):
    run = fault(faulty, "db-stall", 3.0)
    assert_nothing_broke(run, {"503 database_unavailable"})
    stalled = [a for a in run.answers if a.start < run.end and a.end > run.begin + 1.0]
    assert stalled, "no call was caught by the stall"
    assert run.max_seconds < 3.0 + 2.0 + 1.0  # the stall, one 2 s socket timeout, slack


def test_killed_database_connections_lose_nothing(faulty):
    run = fault(faulty, "client-kill", 2.0)
    assert_nothing_broke(run, {"503 database_unavailable"})
    assert ": 0 connections cut" not in run.note, run.note


def test_a_provider_answering_429_gives_503_with_its_retry_after_and_loses_nothing(faulty):
    run = fault(faulty, "provider-429", 2.0)
    assert_nothing_broke(run, {"503 provider_unavailable"})
    assert any(key.startswith("429 ") for key in run.provider_calls), run.provider_calls
    refused = [a for a in run.answers if a.code == "provider_unavailable"]
    assert refused, "no call reached the provider during the fault"
    assert all(a.retry_after for a in refused)


def test_a_provider_answering_garbage_gives_502_and_loses_nothing(faulty):
    run = fault(faulty, "provider-garbage", 2.0)
    assert_nothing_broke(run, {"502 provider_rejected"})
    assert statuses(run.answers)["502 provider_rejected"] > 0


def test_the_check_catches_a_lost_a_duplicated_and_an_unsent_message(faulty):
    twice, never_sent, lost = "I said this twice.", "Nobody sent this.", "I was acknowledged."
    with faulty.memory() as client:
        client.put_store("local", "check-itself", dimensions=8)
        store = client.store("local", "check-itself")
        for content in (twice, twice, never_sent):
            store.add_events("s1", [{"role": "user", "content": content}])
        ledger = Ledger("/instances/local/agent-memory/check-itself", sessions=["s1"])
        ledger.appends = [
            Append("s1", "a", [twice], 200),
            Append("s1", "a", [lost], 200),  # acknowledged, as a lying client would claim
        ]
        check = check_exactly_once(client, ledger)
        client.delete_store("local", "check-itself")
    assert (check.messages_lost, check.messages_duplicated, check.messages_unknown) == (1, 1, 1)
    assert check.failures == 3
