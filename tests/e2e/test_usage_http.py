"""Usage over HTTP through the local stack: what a store's requests, writes and background runs
count today (``GET .../usage``), summed for the organization (``GET /usage``), what the store
holds now; a range that cannot be is 422; a key limited to actors gets 403, a scoped key 403
on the organization's; and a key's daily model-token quota refuses what would embed more."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.limits import Limits, LimitStore
from agent_memory.control.plane import ControlPlane
from agent_memory.database.keys import ControlKeys
from kividb_memory import (
    MemoryClient,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    StoreClient,
)
from tests.support.common import unique, wait_for
from tests.support.databases import database_client
from tests.support.stack import Stack, model_store
from tools.scripted_model import ScriptedModel, ScriptedServer

S = "/instances/{instance_id}/agent-memory/{store}"


def _today(store: StoreClient):
    (day,) = store.usage(datetime.now(UTC).date()).days
    return day


def test_a_stores_requests_writes_and_holding_are_counted_today(memory_store: StoreClient):
    store = memory_store
    store.add_events(
        "s1",
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
        actor_id="ana",
    )
    store.add_events("s1", [{"role": "user", "content": "bye"}], actor_id="ana")
    kept = store.add_memory("Ana likes tea", actor_id="ana", vector=[1.0, 0.0, 0.0])
    newer = store.add_memory(
        "Ana likes coffee", actor_id="ana", vector=[0.0, 1.0, 0.0], supersedes=kept.id
    )
    store.add_memory("Ana has a cat", actor_id="ana", vector=[0.0, 0.0, 1.0])
    store.delete_memory(newer.id)
    store.recall("s1", actor_id="ana")
    report = store.usage()
    assert len(report.days) == 30 and report.days[-1].date == datetime.now(UTC).date()
    day = report.days[-1]
    assert day.requests_by_route[f"POST {S}/sessions/{{session_id}}/events"] == 2
    assert day.requests_by_route[f"POST {S}/memories"] == 3
    assert day.requests_by_route[f"POST {S}/recall"] == 1
    assert day.requests_by_route[f"GET {S}/usage"] == 1  # this request, counted as it came
    assert day.requests == sum(day.requests_by_route.values())
    assert (day.messages_added, day.memories_added) == (3, 3)
    assert (day.memories_superseded, day.memories_deleted) == (1, 1)
    assert (day.extraction_runs, day.llm_input_tokens, day.embedding_tokens) == (0, 0, 0)
    now = report.now
    assert (now.sessions, now.messages, now.memories) == (1, 3, 1)
    assert now.bytes > 0


def test_a_background_run_counts_its_runs_and_the_tokens_the_provider_reported(
    memory: MemoryClient, provider
):
    path = model_store(memory, provider)
    store = memory.store("local", path.rsplit("/", 1)[1])
    store.add_memory("Dee plays the cello", actor_id="dee")  # embedded by the provider
    store.add_events(
        "talk", [{"role": "user", "content": "I moved to Porto last spring."}], actor_id="dee"
    )
    store.extract("talk")
    deadline = time.monotonic() + 20
    while (day := _today(store)).extraction_runs == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert day.extraction_runs == 1 and day.memories_added == 2  # one added, one extracted
    assert day.llm_input_tokens > 0 and day.llm_output_tokens > 0
    assert day.embedding_tokens >= 4  # "Dee plays the cello", as the scripted provider counts
    memory.delete_store("local", store.name)


def test_the_organization_sums_every_store(memory: MemoryClient):
    names = [unique("summed"), unique("summed")]
    for name in names:
        memory.put_store("local", name, dimensions=3)
        memory.store("local", name).add_events("s", [{"role": "user", "content": "x"}])
    before = memory.organization_usage().days[-1]
    for name in names:
        memory.store("local", name).add_events("s", [{"role": "user", "content": "y"}])
    after = memory.organization_usage(datetime.now(UTC).date()).days[-1]
    assert after.messages_added - before.messages_added == 2
    assert after.requests_by_route["GET /usage"] - before.requests_by_route["GET /usage"] == 1
    whole = memory.organization_usage().now
    assert whole.sessions >= 2 and whole.messages >= 4
    for name in names:
        memory.delete_store("local", name)


def test_a_range_that_cannot_be_is_422_naming_the_field(api: httpx.Client, store: str):
    today = datetime.now(UTC).date()
    for query, field in [
        ({"from": str(today), "to": str(today - timedelta(days=1))}, "query.from"),
        ({"from": str(today - timedelta(days=400)), "to": str(today)}, "query.to"),
        ({"from": "yesterday"}, "query.from"),
        ({"to": "2026-02-30"}, "query.to"),
        ({"since": str(today)}, "query.since"),
    ]:
        for path in (f"{store}/usage", "/usage"):
            answer = api.get(path, params=query)
            assert answer.status_code == 422, (path, query, answer.text)
            assert answer.json()["details"][0]["field"] == field, (path, query, answer.text)


def test_scoped_keys_read_only_what_they_may(
    stack: Stack, memory: MemoryClient, memory_store: StoreClient
):
    where = ("local", memory_store.name)
    store_key = memory.create_key("read", stores=[where]).api_key
    actor_key = memory.create_key("read", stores=[where], actors=["ana"]).api_key
    other = unique("other")
    memory.put_store("local", other, dimensions=3)
    before = memory.store("local", other).usage().days[-1].requests
    with stack.memory(store_key) as by_store, stack.memory(actor_key) as by_actor:
        assert len(by_store.store(*where).usage().days) == 30
        for _ in range(3):  # a store out of its scope: a stranger's 404, counted under none
            with pytest.raises(NotFoundError):
                by_store.store("local", other).list_sessions()
        after = memory.store("local", other).usage().days[-1].requests
        assert after == before + 1  # the admin's usage read, not the other key's requests
        with pytest.raises(PermissionDeniedError):
            by_store.organization_usage()
        with pytest.raises(PermissionDeniedError):
            by_actor.store(*where).usage()
    memory.delete_store("local", other)


def test_a_keys_model_token_quota_refuses_what_would_embed_more(
    stack: Stack, memory: MemoryClient, provider
):
    path = model_store(memory, provider)
    name = path.rsplit("/", 1)[1]
    client = database_client(stack.redis_url)
    control = ControlPlane(client, SystemClock(), release_hold_seconds=0)
    key_id, key = control.issue_api_key("local")
    LimitStore(client, SystemClock()).set("local", Limits(model_tokens_per_day=5), key_id=key_id)
    try:
        with stack.memory(key) as limited:
            store = limited.store("local", name)
            store.add_memory("Eve keeps bees in the garden", actor_id="eve")  # 6 tokens
            with pytest.raises(RateLimitedError) as caught:
                store.add_memory("Eve sells honey", actor_id="eve")
            assert caught.value.code == "quota_exceeded"
            assert caught.value.details[0].field == "key.model_tokens_per_day"
            vector = [1.0] + [0.0] * 383
            store.add_memory("Eve sells wax", actor_id="eve", vector=vector)  # no embedding
            assert [m.text for m in store.list_memories(actor_id="eve").memories] == [
                "Eve sells wax",
                "Eve keeps bees in the garden",
            ]
    finally:
        control.revoke_api_key("local", key_id)
        memory.delete_store("local", name)


class PoisonedModel(ScriptedModel):
    """The scripted provider's answers, each reporting ``reported`` tokens of every kind."""

    def __init__(self, reported: int) -> None:
        super().__init__()
        self.reported = reported

    def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().chat(body)
        answer["usage"] = {"prompt_tokens": self.reported, "completion_tokens": self.reported}
        return answer

    def embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = super().embeddings(body)
        answer["usage"] = {"prompt_tokens": self.reported, "total_tokens": self.reported}
        return answer


@contextmanager
def org_token_room(stack: Stack, room: int) -> Iterator[Callable[[], int]]:
    """The stack's organization limited to ``room`` more model tokens today than it has used
    (its limit as it was again after); yields what it has used since."""
    client = database_client(stack.redis_url)
    day = datetime.now(UTC).strftime("%Y%m%d")
    quota = ControlKeys.quota("local", day)

    def used() -> int:
        return int(client.hget(quota, "model_tokens") or 0)

    before = used()
    limits = ControlKeys.limits("local")
    was = client.hget(limits, "model_tokens_per_day")
    client.hset(limits, "model_tokens_per_day", str(before + room))
    try:
        yield lambda: used() - before
    finally:
        if was is None:
            client.hdel(limits, "model_tokens_per_day")
        else:
            client.hset(limits, "model_tokens_per_day", was)


@pytest.mark.parametrize("reported", [9_200_000_000_000_000_000, 2**63 + 5])
def test_a_provider_reporting_absurd_counts_spends_only_what_its_requests_could_use(
    stack: Stack, memory: MemoryClient, provider, reported: int
):
    """Issue 32: a custom model answering ``usage.prompt_tokens`` 9.2e18 used up the
    organization's ``model_tokens_per_day`` in one call (every other store then answered 429),
    and one above 2^63 made the run raise as it counted: the memory was kept but its webhook
    events were never queued and its usage never counted. Each count is now at most what the
    request could use (``providers.token_counts``), so the run counts, tells its events, and
    the organization's other stores go on."""
    poisoned = ScriptedServer()
    poisoned.model = PoisonedModel(reported)
    poisoned.start()
    hook = [{"url": "http://127.0.0.1:9/hook", "events": ["extraction.completed"]}]
    path = model_store(memory, poisoned, webhooks=hook)
    store = memory.store("local", path.rsplit("/", 1)[1])
    honest = memory.store("local", model_store(memory, provider).rsplit("/", 1)[1])
    try:
        with org_token_room(stack, 10_000_000) as spent:
            store.add_events(
                "talk", [{"role": "user", "content": "I moved to Porto last spring."}], "dee"
            )
            store.extract("talk")
            day = wait_for(
                lambda: (d := _today(store)).extraction_runs and d,
                30,
                "the poisoned store's run counted",
            )
            assert day.memories_added == 1
            assert 0 < day.llm_input_tokens < 100_000 and 0 < day.llm_output_tokens <= 8192
            assert day.embedding_tokens < 1_000  # what the memory kept could use
            (told,) = wait_for(
                lambda: store.webhook_deliveries().deliveries, 10, "the run's event queued"
            )
            assert told.event == "extraction.completed"
            assert spent() < 200_000
            # Another store of the organization still embeds what it adds: tokens are left.
            assert honest.add_memory("Dee plays the cello", actor_id="dee").id
    finally:
        memory.delete_store("local", store.name)
        memory.delete_store("local", honest.name)
        poisoned.shutdown()
        poisoned.server_close()
