"""Limits over HTTP through the local stack: past its request rate an organization gets 429
``rate_limited`` with ``Retry-After``, in the error shape, before anything runs; past a daily
quota 429 ``quota_exceeded`` and nothing is added; another organization is not slowed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from agent_memory.clock import SystemClock
from agent_memory.control.limits import Limits, LimitStore
from agent_memory.control.plane import ControlPlane
from agent_memory.database.keys import ControlKeys
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.stack import Stack


@pytest.fixture
def tenant(stack: Stack) -> Iterator[tuple[str, httpx.Client, LimitStore]]:
    client = database_client(stack.redis_url)
    control = ControlPlane(client, SystemClock(), release_hold_seconds=0)
    org = unique("limited")
    control.create_organization(org)
    _, key = control.issue_api_key(org)
    api = httpx.Client(base_url=stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    yield org, api, LimitStore(client, SystemClock())
    api.close()
    control.delete_organization(org)


@contextmanager
def limited_key(stack: Stack, limits: Limits, headers: dict[str, str] | None = None):
    """A new key of the stack's own organization with ``limits`` of its own, as an HTTP client
    of the stack; revoked after."""
    client = database_client(stack.redis_url)
    control = ControlPlane(client, SystemClock(), release_hold_seconds=0)
    key_id, key = control.issue_api_key("local")
    LimitStore(client, SystemClock()).set("local", limits, key_id=key_id)
    sent = {"Authorization": f"Bearer {key}", **(headers or {})}
    try:
        with httpx.Client(base_url=stack.url, headers=sent, timeout=30) as limited:
            yield limited
    finally:
        control.revoke_api_key("local", key_id)


@contextmanager
def new_store(memory, prefix: str):
    """A new store of instance ``local`` (3 dimensions), its name; deleted after."""
    name = unique(prefix)
    memory.put_store("local", name, dimensions=3)
    try:
        yield name
    finally:
        memory.delete_store("local", name)


def test_past_its_rate_an_organization_gets_429_with_retry_after_and_others_do_not(
    stack, tenant, api
):
    org, limited, limits = tenant
    limits.set(org, Limits(requests_per_second=0.5, burst=3))
    answers = [limited.get("/agent-memory") for _ in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    refused = answers[3]
    assert refused.json()["error"] == "rate_limited"
    assert refused.json()["details"] == [
        {"field": "requests_per_second", "problem": "limit reached"}
    ]
    assert 1 <= int(refused.headers["retry-after"]) <= 2
    assert api.get("/agent-memory").status_code == 200  # the stack's own organization


def test_past_a_keys_daily_quota_nothing_is_added_and_the_answer_says_which(stack, memory):
    with (
        new_store(memory, "quota") as name,
        limited_key(stack, Limits(messages_per_day=3)) as limited,
    ):
        path = f"/instances/local/agent-memory/{name}/sessions/c"
        two = {"events": [{"role": "user", "content": str(i)} for i in range(2)]}
        assert limited.post(f"{path}/events", json=two).status_code == 200
        refused = limited.post(f"{path}/events", json=two)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"] == "quota_exceeded"
        assert refused.json()["details"][0]["field"] == "key.messages_per_day"
        assert int(refused.headers["retry-after"]) >= 1
        one = {"events": [{"role": "user", "content": "last"}]}
        assert limited.post(f"{path}/events", json=one).status_code == 200
        kept = memory.store("local", name).get_session("c")
        assert [m.content for m in kept.messages] == ["0", "1", "last"]


def test_importing_a_session_counts_against_the_messages_quota(stack, memory):
    now = "2026-01-01T00:00:00Z"
    soon = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    body = {
        "message_count": 3,
        "created_at": now,
        "last_event_at": now,
        "expires_at": soon,
        "messages": [
            {"seq": n, "role": "user", "content": str(n), "created_at": now} for n in (1, 2, 3)
        ],
    }
    with (
        new_store(memory, "quota-import") as name,
        limited_key(stack, Limits(messages_per_day=2)) as limited,
    ):
        path = f"/instances/local/agent-memory/{name}/import/sessions/c"
        refused = limited.put(path, json=body)
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
        assert memory.store("local", name).list_sessions().sessions == []


def test_past_its_rate_the_mcp_endpoint_answers_429_too(stack):
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with limited_key(stack, Limits(requests_per_second=0.5, burst=2), headers) as mcp:
        answers = [mcp.post("/mcp", json=listing) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert int(answers[2].headers["retry-after"]) >= 1
    assert "429 rate_limited" in answers[2].json()["error"]["message"]


def test_a_rate_too_small_for_the_script_keeps_limiting_and_an_untakeable_token_is_503(
    stack, tenant, api
):
    """Issue 32: a rate of 1e-17 (written before limits were checked; ``tools.admin`` now
    refuses it) made the next request 500 and every later one unlimited and uncounted. The
    script brings it into range, so the organization stays limited; and when its token cannot
    be taken at all (here its bucket is not a hash), its requests are 503 with Retry-After,
    never let through, while other organizations go on."""
    org, limited, _ = tenant
    client = database_client(stack.redis_url)
    client.hset(ControlKeys.limits(org), mapping={"requests_per_second": "1e-17", "burst": "2"})
    answers = [limited.get("/agent-memory") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 429, 429]
    assert 1 <= int(answers[3].headers["retry-after"]) <= 1000
    client.delete(ControlKeys.bucket(org))
    client.set(ControlKeys.bucket(org), "not a bucket")
    refused = [limited.get("/agent-memory") for _ in range(3)]
    assert {a.status_code for a in refused} == {503}
    assert refused[0].json()["error"] == "database_unavailable"
    assert refused[0].headers["retry-after"] == "1"
    assert api.get("/agent-memory").status_code == 200  # the stack's own organization
    client.delete(ControlKeys.bucket(org))
    assert limited.get("/agent-memory").status_code == 200  # a bucket again: counted again
