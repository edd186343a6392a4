"""Usage (``control.usage``) on a real server: requests counted in the step that takes their
token, messages and memories in the step that reserves their quota (a refused request counts
nothing), the rest after the fact; read back by store and for the organization, day by day;
and the daily model-token quota, which stops what would spend more once it is used up."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

import pytest
import redis

from agent_memory.control.limits import Limits, LimitStore
from agent_memory.control.usage import MAX_COUNT, MAX_DAY_FIELDS, UsageStore, day_range
from agent_memory.database.keys import ControlKeys
from agent_memory.errors import QuotaExceeded, RateLimited, ValidationFailed
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.databases import database_client

STORE = ("inst", "notes")
OTHER = ("inst", "other")
EVENTS = "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/events"


@pytest.fixture
def counters(redis_url) -> Iterator[tuple[LimitStore, UsageStore, MovableClock, str]]:
    clock = MovableClock()
    clock.moment = clock.moment.replace(hour=12, minute=0, second=0, microsecond=0)
    client = database_client(redis_url)  # a cluster client on a cluster
    yield LimitStore(client, clock), UsageStore(client, clock), clock, unique("usage-org")


def _route(store: tuple[str, str], route: str = EVENTS) -> str:
    return ControlKeys.usage_field(*store, "route:" + route)


def test_requests_messages_and_the_rest_are_counted_per_store_and_day(counters):
    limits, usage, clock, org = counters
    today = clock.now().date()
    for _ in range(3):
        limits.take(org, "key_a", _route(STORE))
    limits.take(org, "key_a", _route(OTHER))
    limits.take(org, "key_a", ControlKeys.usage_field("", "", "route:GET /keys"))
    limits.take(org, "key_a", "")  # a request of no route: not counted
    limits.reserve(org, "key_a", "messages", 5, STORE)
    limits.reserve(org, "key_a", "memories", 2, STORE)
    usage.add(org, *STORE, {"memories_deleted": 1, "llm_input_tokens": 40, "unknown": 9})
    (day,) = usage.days(org, [today], STORE)
    assert day.date == today
    assert day.requests == 3 and day.requests_by_route == {EVENTS: 3}
    assert (day.messages_added, day.memories_added, day.memories_deleted) == (5, 2, 1)
    assert day.llm_input_tokens == 40 and day.embedding_tokens == 0
    (whole,) = usage.days(org, [today])
    assert whole.requests == 5  # every store's, and the request of no store
    assert whole.requests_by_route == {EVENTS: 4, "GET /keys": 1}
    assert usage.days(unique("stranger"), [today])[0].requests == 0


def test_a_refused_request_or_write_counts_nothing(counters):
    limits, usage, clock, org = counters
    limits.set(org, Limits(requests_per_second=0.001, burst=1, messages_per_day=3))
    limits.take(org, "key_a", _route(STORE))
    with pytest.raises(RateLimited):
        limits.take(org, "key_a", _route(STORE))
    limits.reserve(org, "key_a", "messages", 3, STORE)
    with pytest.raises(QuotaExceeded):
        limits.reserve(org, "key_a", "messages", 1, STORE)
    (day,) = usage.days(org, [clock.now().date()], STORE)
    assert day.requests == 1 and day.messages_added == 3


def test_days_are_apart_and_a_range_has_every_day_oldest_first(counters):
    limits, usage, clock, org = counters
    first = clock.now().date()
    limits.reserve(org, "key_a", "messages", 1, STORE)
    clock.moment += timedelta(days=2)
    limits.reserve(org, "key_a", "messages", 7, STORE)
    days = usage.days(org, day_range(first, None, clock.now().date()), STORE)
    assert [d.date for d in days] == [first + timedelta(days=n) for n in range(3)]
    assert [d.messages_added for d in days] == [1, 0, 7]


def test_a_range_is_checked():
    today = date(2026, 12, 2)
    assert len(day_range(None, None, today)) == 30
    assert day_range(today, today, today) == [today]
    with pytest.raises(ValidationFailed) as caught:
        day_range(today, today - timedelta(days=1), today)
    assert caught.value.details[0]["field"] == "query.from"
    with pytest.raises(ValidationFailed) as caught:
        day_range(today - timedelta(days=366), today, today)
    assert caught.value.details[0]["field"] == "query.to"
    assert len(day_range(today - timedelta(days=365), today, today)) == 366
    assert day_range(None, date(1, 1, 3), today) == [date(1, 1, n) for n in (1, 2, 3)]


def test_model_tokens_spent_stop_background_calls_and_embedding_writes_once_used_up(counters):
    limits, usage, _, org = counters
    limits.set(org, Limits(model_tokens_per_day=100))
    limits.check_model_tokens(org)
    usage.add(org, *STORE, {"llm_input_tokens": 60, "llm_output_tokens": 39})
    limits.check_model_tokens(org)  # 99 of 100
    limits.reserve(org, "key_a", "memories", 1, STORE, embeds=True)
    usage.add(org, *STORE, {"embedding_tokens": 1})
    with pytest.raises(QuotaExceeded) as caught:
        limits.check_model_tokens(org)
    assert caught.value.limit == "model_tokens_per_day"
    assert "used up" in caught.value.message
    with pytest.raises(QuotaExceeded) as refused:
        limits.reserve(org, "key_a", "memories", 1, STORE, embeds=True)
    assert refused.value.limit == "model_tokens_per_day"
    limits.reserve(org, "key_a", "memories", 1, STORE)  # a memory with its own vector
    limits.reserve(org, "key_a", "messages", 5, STORE)  # messages spend no token now


def test_a_keys_model_tokens_count_against_its_own_quota(counters):
    limits, usage, _, org = counters
    limits.set(org, Limits(model_tokens_per_day=5), key_id="key_small")
    usage.add(org, *STORE, {"embedding_tokens": 5}, key_id="key_small")
    with pytest.raises(QuotaExceeded) as caught:
        limits.reserve(org, "key_small", "memories", 1, STORE, embeds=True)
    assert caught.value.limit == "key.model_tokens_per_day"
    limits.reserve(org, "key_other", "memories", 1, STORE, embeds=True)


def test_counting_never_fails_what_was_counted(counters):
    _, _, clock, org = counters
    down = UsageStore(redis.Redis(port=1, socket_connect_timeout=0.2), clock)
    down.add(org, *STORE, {"memories_deleted": 1})  # logged, not raised


def test_no_count_makes_counting_raise(counters):
    """Issue 32: a count above 2^63 made the background run raise as it counted (its webhook
    events were never queued). Counts are brought into 0 to ``MAX_COUNT``; a counter that would
    overflow all the same is logged, not raised."""
    _, usage, clock, org = counters
    today = clock.moment.date()
    usage.add(
        org,
        *STORE,
        {
            "llm_input_tokens": 2**64 * 10**6,
            "llm_output_tokens": 9_200_000_000_000_000_000,
            "embedding_tokens": -5,
            "memories_deleted": 1.5e300,  # type: ignore[dict-item]
            "rerank_calls": True,
        },
    )
    (day,) = usage.days(org, [today], STORE)
    assert (day.llm_input_tokens, day.llm_output_tokens) == (MAX_COUNT, MAX_COUNT)
    assert (day.embedding_tokens, day.memories_deleted, day.rerank_calls) == (0, 0, 0)
    field = ControlKeys.usage_field(*STORE, "llm_input_tokens")
    usage._redis.hset(ControlKeys.usage(org, today.strftime("%Y%m%d")), field, str(2**63 - 10))
    usage.add(org, *STORE, {"llm_input_tokens": 100, "memories_deleted": 1})  # logged


def test_memories_a_background_run_kept_count_against_the_daily_quota(counters):
    limits, usage, _, org = counters
    limits.set(org, Limits(memories_per_day=10))
    usage.add(org, *STORE, {"memories_added": 8})  # what extraction kept
    limits.reserve(org, "key_a", "memories", 2, STORE)
    with pytest.raises(QuotaExceeded) as caught:
        limits.reserve(org, "key_a", "memories", 1, STORE)
    assert caught.value.limit == "memories_per_day"


def test_a_full_day_counts_requests_to_stores_not_seen_that_day_under_no_store(counters):
    limits, usage, clock, org = counters
    today = clock.now().date()
    key = ControlKeys.usage(org, today.strftime("%Y%m%d"))
    limits.take(org, "key_a", _route(STORE))
    filler = {f"inst/s{n}|route:GET /x": 1 for n in range(MAX_DAY_FIELDS)}
    limits._redis.hset(key, mapping=filler)
    limits.take(org, "key_a", _route(STORE))  # a store counted already that day: still its own
    limits.take(org, "key_a", _route(("inst", "never-made")))
    assert limits._redis.hget(key, _route(("inst", "never-made"))) is None
    assert limits._redis.hget(key, ControlKeys.usage_field("", "", "route:" + EVENTS)) == "1"
    (day,) = usage.days(org, [today], STORE)
    assert day.requests == 2
