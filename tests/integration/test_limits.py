"""Limits (``control.limits.LimitStore``) on a real server: the request bucket of an
organization and of its key, taken in one step, refilled at its rate; daily quotas counted
before the write, refused whole, started again the next day (UTC)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from agent_memory.control.limits import RANGES, Limits, LimitStore, limits_from
from agent_memory.database.keys import ControlKeys
from agent_memory.errors import DatabaseUnavailable, QuotaExceeded, RateLimited, ValidationFailed
from tests.support.clocks import MovableClock
from tests.support.common import unique

STORE = ("inst", "store")


@pytest.fixture
def limits(redis_url) -> Iterator[tuple[LimitStore, MovableClock, str]]:
    clock = MovableClock()
    clock.moment = clock.moment.replace(hour=12, minute=0, second=0, microsecond=0)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield LimitStore(client, clock), clock, unique("limited-org")


def test_a_burst_passes_then_requests_wait_for_the_rate(limits):
    store, clock, org = limits
    store.set(org, Limits(requests_per_second=2, burst=3))
    for _ in range(3):
        store.take(org, "key_a")
    with pytest.raises(RateLimited) as caught:
        store.take(org, "key_a")
    assert caught.value.retry_after_seconds == 1 and caught.value.limit == "requests_per_second"
    clock.moment += timedelta(milliseconds=500)  # one token back at 2 per second
    store.take(org, "key_a")
    with pytest.raises(RateLimited):
        store.take(org, "key_b")  # the organization's bucket is shared by its keys


def test_a_keys_own_limit_applies_on_top_of_the_organizations_and_takes_nothing_when_refused(
    limits,
):
    store, _, org = limits
    store.set(org, Limits(requests_per_second=100, burst=100))
    store.set(org, Limits(requests_per_second=1, burst=1), key_id="key_slow")
    store.take(org, "key_slow")
    with pytest.raises(RateLimited) as caught:
        store.take(org, "key_slow")
    assert caught.value.limit == "key.requests_per_second"
    for _ in range(99):  # the refused request took nothing from the organization's 100
        store.take(org, "key_other")
    with pytest.raises(RateLimited):
        store.take(org, "key_other")


def test_a_daily_quota_refuses_a_request_that_would_pass_it_and_starts_again_the_next_day(limits):
    store, clock, org = limits
    store.set(org, Limits(messages_per_day=10))
    store.reserve(org, "key_a", "messages", 6, STORE)
    with pytest.raises(QuotaExceeded) as caught:
        store.reserve(org, "key_a", "messages", 5, STORE)
    assert caught.value.limit == "messages_per_day"
    assert caught.value.retry_after_seconds == 12 * 3600  # until midnight UTC
    store.reserve(org, "key_b", "messages", 4, STORE)  # the refused 5 were not counted
    with pytest.raises(QuotaExceeded):
        store.reserve(org, "key_a", "messages", 1, STORE)
    store.reserve(org, "key_a", "memories", 1, STORE)  # another quota
    clock.moment += timedelta(hours=12)
    store.reserve(org, "key_a", "messages", 10, STORE)


def test_limits_set_stay_and_the_ones_not_given_are_kept(limits):
    store, _, org = limits
    assert store.get(org) == Limits()
    store.set(org, Limits(burst=5))
    assert store.set(org, Limits(requests_per_second=2.5)) == Limits(
        requests_per_second=2.5, burst=5
    )


# --- limits that fail closed (issue 32) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("requests_per_second", 1e-17),
        ("requests_per_second", float("nan")),
        ("requests_per_second", float("inf")),
        ("requests_per_second", 0),
        ("burst", 10**8),
        ("burst", 2.5),
        ("messages_per_day", 10**13),
        ("model_tokens_per_day", -1),
        ("memories_per_day", "many"),
    ],
)
def test_a_limit_out_of_its_range_is_refused_in_words_naming_the_field(field, value):
    with pytest.raises(ValidationFailed) as caught:
        limits_from({field: value, "burst" if field != "burst" else "messages_per_day": 5})
    assert caught.value.details == [{"field": field, "problem": caught.value.details[0]["problem"]}]
    high = RANGES[field][1]
    problem = caught.value.details[0]["problem"]
    assert problem.startswith("must be a") and problem.endswith(f"to {high:,.0f}")
    assert field in caught.value.message and "Nothing was set" in caught.value.message


def test_the_slowest_rate_allowed_and_the_most_burst_still_limit_and_wait_a_finite_time(limits):
    store, clock, org = limits
    store.set(org, limits_from({"requests_per_second": 0.001, "burst": 1}))
    store.take(org, "key_a")
    with pytest.raises(RateLimited) as caught:
        store.take(org, "key_a")
    assert caught.value.retry_after_seconds == 1000
    clock.moment += timedelta(seconds=1000)
    store.take(org, "key_a")
    store.set(org, limits_from({"burst": 10_000_000}))
    clock.moment += timedelta(seconds=1000)
    store.take(org, "key_a")  # the bucket's expiry (about 317 years in ms) is one PEXPIRE takes
    assert store._redis.pttl(ControlKeys.bucket(org)) > 10**12


@pytest.mark.parametrize("rate", ["1e-17", "-3", "nan", "0", "1e400"])
def test_a_rate_written_out_of_range_still_limits_every_request(limits, rate):
    """A rate stored before limits were checked (or by hand) is brought into its range by the
    script: the bucket never gets an expiry Redis refuses, nor a wait read as "stale" (a rate
    of 1e-17 once answered 500 and then let every request through uncounted)."""
    store, _, org = limits
    store._redis.hset(ControlKeys.limits(org), mapping={"requests_per_second": rate, "burst": 2})
    store._redis.hset(ControlKeys.limits(org, "key_a"), "requests_per_second", rate)
    store.take(org, "key_a")
    with pytest.raises(RateLimited) as caught:
        for _ in range(3):
            store.take(org, "key_a")
    assert 1 <= caught.value.retry_after_seconds <= 1000
    assert store.get(org).requests_per_second in (0.001, 1_000_000)


def test_a_request_that_cannot_be_taken_is_refused_not_let_through(limits):
    """Any error of the step that takes the token (here the organization's bucket is not a hash)
    is ``DatabaseUnavailable``: 503 with Retry-After, never a request let through uncounted."""
    store, _, org = limits
    store._redis.set(ControlKeys.bucket(org), "not a bucket")
    with pytest.raises(DatabaseUnavailable) as caught:
        store.take(org, "key_a", ControlKeys.usage_field("inst", "store", "route:GET /x"))
    assert caught.value.retry_after_seconds == 1
    assert "nothing was done" in caught.value.message
    assert store._redis.hgetall(ControlKeys.usage(org, clock_day(store))) == {}


def clock_day(store: LimitStore) -> str:
    return store._clock.now().strftime("%Y%m%d")
