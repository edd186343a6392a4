"""A store's records of idempotent writes (``stores.idempotency``) on a real server (and a
cluster, KIVIDB_TEST_CLUSTER=1): one claim per key, answers kept and given again, another
request refused, a running claim waited for and then refused, a claim finished or released only
by its holder, records gone with the store."""

from __future__ import annotations

import threading

import pytest

from agent_memory.database.keys import StoreKeys, new_incarnation
from agent_memory.errors import IdempotencyKeyInProgress, IdempotencyKeyReused
from agent_memory.stores.idempotency import (
    LEASE_MS,
    RECORD_SECONDS,
    Answered,
    Claim,
    IdempotencyRecords,
    key_digest,
)
from tests.support.common import unique
from tests.support.databases import database_client


@pytest.fixture
def keys(redis_url: str):
    keys = StoreKeys(unique("idem"), new_incarnation())
    yield keys
    database = database_client(redis_url)
    for key in database.scan_iter(match=keys.all_pattern, count=1000):
        database.delete(key)


def _records(redis_url: str, keys: StoreKeys, wait: float = 0.3) -> IdempotencyRecords:
    return IdempotencyRecords(database_client(redis_url), keys, wait_seconds=wait)


def test_the_first_call_claims_and_the_next_gets_its_answer_for_24_hours(redis_url, keys):
    records = _records(redis_url, keys)
    claim = records.begin("k-1", "f" * 64)
    assert isinstance(claim, Claim)
    ttl = database_client(redis_url).pttl(claim.name)
    assert 0 < ttl <= LEASE_MS
    records.finish(claim, 201, "application/json", '{"id":"m1"}')
    assert records.begin("k-1", "f" * 64) == Answered(201, "application/json", '{"id":"m1"}')
    ttl = database_client(redis_url).pttl(claim.name)
    assert RECORD_SECONDS * 1000 - 60_000 < ttl <= RECORD_SECONDS * 1000
    assert claim.name == keys.idempotency(key_digest("k-1"))
    assert "k-1" not in claim.name


def test_another_request_under_a_used_key_is_refused_running_or_answered(redis_url, keys):
    records = _records(redis_url, keys)
    claim = records.begin("k", "a" * 64)
    with pytest.raises(IdempotencyKeyReused):
        records.begin("k", "b" * 64)
    records.finish(claim, 200, "application/json", "{}")
    with pytest.raises(IdempotencyKeyReused):
        records.begin("k", "b" * 64)


def test_a_call_waits_for_the_running_one_then_answers_in_progress(redis_url, keys):
    records = _records(redis_url, keys, wait=0.3)
    claim = records.begin("k", "a" * 64)
    with pytest.raises(IdempotencyKeyInProgress) as raised:
        records.begin("k", "a" * 64)
    assert raised.value.code == "idempotency_key_in_progress"

    def finish_soon() -> None:
        records.finish(claim, 200, "application/json", '{"ok":true}')

    timer = threading.Timer(0.1, finish_soon)
    timer.start()
    try:
        waiting = _records(redis_url, keys, wait=5.0)
        assert waiting.begin("k", "a" * 64) == Answered(200, "application/json", '{"ok":true}')
    finally:
        timer.join()


def test_a_released_key_is_claimed_afresh(redis_url, keys):
    records = _records(redis_url, keys)
    first = records.begin("k", "a" * 64)
    records.release(first)
    second = records.begin("k", "b" * 64)  # nothing was kept: any request may use it now
    assert isinstance(second, Claim) and second != first


def test_a_holder_whose_lease_ran_out_cannot_overwrite_the_next_holders_record(redis_url, keys):
    records = _records(redis_url, keys)
    old = records.begin("k", "a" * 64)
    database_client(redis_url).delete(old.name)  # as when the lease ends
    new = records.begin("k", "a" * 64)
    records.finish(old, 500, "application/json", "stale")
    records.release(old)
    records.finish(new, 200, "application/json", "fresh")
    assert records.begin("k", "a" * 64) == Answered(200, "application/json", "fresh")


def test_of_many_concurrent_calls_with_one_key_exactly_one_claims(redis_url, keys):
    results: list[object] = []
    lock = threading.Lock()

    def call() -> None:
        records = _records(redis_url, keys, wait=0.0)
        try:
            found: object = records.begin("k", "a" * 64)
        except IdempotencyKeyInProgress as exc:
            found = exc
        with lock:
            results.append(found)

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(r, Claim) for r in results) == 1
    assert sum(isinstance(r, IdempotencyKeyInProgress) for r in results) == 15


def test_a_digest_that_is_not_64_hex_digits_names_no_key(keys):
    for bad in ("", "A" * 64, "g" * 64, "a" * 63, "a" * 65, "{x}" + "a" * 61):
        with pytest.raises(ValueError):
            keys.idempotency(bad)
