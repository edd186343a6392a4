"""Limits (``control.limits.LimitStore``) on a real server: the request bucket of an
organization and of its key, taken in one step, refilled at its rate; daily quotas counted
before the write, refused whole, started again the next day (UTC)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis

from agent_memory.control.limits import Limits, LimitStore
from agent_memory.errors import QuotaExceeded, RateLimited
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
