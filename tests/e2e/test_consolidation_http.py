"""Consolidation over HTTP through the local stack, with the scripted model (its plan rule
merges what it can tell is the same fact): a run asked for and applied by the background
function, its record and listing, usage and the ``consolidation.completed`` event; review with
apply and discard; restore and revert with their 409s; and the refusals of bad requests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import httpx
import pytest

from tests.support.common import wait_for
from tests.support.stack import model_store

TEA = "The user loves green tea every morning."
TEA_CUP = "The user loves a cup of green tea every morning."
LISBON = "The user lives in Lisbon."


@pytest.fixture
def http(open_stack) -> Iterator[httpx.Client]:
    with open_stack.client() as client:
        yield client


@pytest.fixture
def made(http) -> Iterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in paths:
        with contextlib.suppress(httpx.HTTPError):
            http.delete(path)


def _keep(http: httpx.Client, path: str, text: str, actor: str = "ann") -> str:
    answer = http.post(f"{path}/memories", json={"text": text, "actor_id": actor})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _texts(http: httpx.Client, path: str, actor: str = "ann") -> list[str]:
    listed = http.get(f"{path}/memories", params={"actor_id": actor, "limit": 100})
    return sorted(m["text"] for m in listed.json()["memories"])


def _run(http: httpx.Client, path: str, actor: str, until: tuple[str, ...]) -> dict:
    queued = http.post(f"{path}/actors/{actor}/consolidate")
    assert queued.status_code == 202, queued.text
    assert queued.json()["status"] == "queued"
    run_path = f"{path}/consolidations/{queued.json()['consolidation_id']}"
    return dict(
        wait_for(
            lambda: (r := http.get(run_path).json())["status"] in until and r,
            30,
            f"the run to be {until}",
            show=lambda: http.get(run_path).text,
        )
    )


def test_a_run_merges_the_same_fact_and_keeps_what_it_replaced(http, provider, made):
    path = model_store(http, provider, made, webhooks=[])
    secret = http.post(f"{path}/webhooks/secret")
    assert secret.status_code == 201, secret.text
    hook = [{"url": "http://127.0.0.1:9/hook", "events": ["consolidation.completed"]}]
    assert http.put(path, json={"webhooks": hook}).status_code == 200
    first, second = _keep(http, path, TEA), _keep(http, path, TEA_CUP)
    _keep(http, path, LISBON)
    run = _run(http, path, "ann", ("applied", "failed"))
    assert run["status"] == "applied", run
    assert (run["mode"], run["trigger"]) == ("apply", "request")
    assert run["model_calls"] >= 1 and run["input_tokens"] > 0
    (step,) = run["steps"]
    assert step["action"] == "merge" and step["status"] == "applied"
    assert [m["id"] for m in step["before"]] == [first, second]
    assert step["after"]["text"] == TEA_CUP
    assert run["counts"]["merged"] == 2 and run["counts"]["examined"] == 3
    assert _texts(http, path) == [LISBON, TEA_CUP]
    merged = http.get(f"{path}/memories/{step['after']['id']}").json()
    assert merged["source"]["consolidation_id"] == run["consolidation_id"]
    assert merged["source"]["session_id"] is None
    assert [m["id"] for m in merged["chain"]] == [first, step["after"]["id"]]
    everything = http.get(
        f"{path}/memories", params={"actor_id": "ann", "include_superseded": "true"}
    ).json()["memories"]
    assert {m["id"] for m in everything} >= {first, second}
    listed = http.get(f"{path}/consolidations", params={"actor_id": "ann", "status": "applied"})
    assert [r["consolidation_id"] for r in listed.json()["consolidations"]] == [
        run["consolidation_id"]
    ]
    assert "steps" not in listed.json()["consolidations"][0]
    none = http.get(f"{path}/consolidations", params={"status": "proposed,reverted"})
    assert none.json()["consolidations"] == []
    today = http.get(f"{path}/usage").json()["days"][-1]
    assert today["consolidation_runs"] == 1 and today["memories_superseded"] >= 2
    deliveries = wait_for(
        lambda: http.get(f"{path}/webhooks/deliveries").json()["deliveries"],
        15,
        "the consolidation.completed delivery",
    )
    assert [d["event"] for d in deliveries] == ["consolidation.completed"]


def test_review_apply_discard_restore_and_revert(http, provider, made):
    path = model_store(http, provider, made, consolidation_mode="review")
    first, _ = _keep(http, path, TEA), _keep(http, path, TEA_CUP)
    before = _texts(http, path)
    run = _run(http, path, "ann", ("proposed", "failed"))
    assert run["status"] == "proposed" and run["steps"][0]["status"] == "planned"
    assert _texts(http, path) == before
    run_path = f"{path}/consolidations/{run['consolidation_id']}"
    applied = http.post(f"{run_path}/apply")
    assert applied.status_code == 200, applied.text
    assert applied.json()["status"] == "applied" and _texts(http, path) == [TEA_CUP]
    again = http.post(f"{run_path}/discard")
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    # Restore the first version: the merged memory is replaced, so the run cannot be reverted.
    restored = http.post(f"{path}/memories/{first}/restore")
    assert restored.status_code == 201, restored.text
    assert restored.json()["source"]["restored_from"] == first
    assert _texts(http, path) == [TEA]
    merged = applied.json()["steps"][0]["after"]["id"]
    refused = http.post(f"{run_path}/revert")
    assert refused.status_code == 409 and merged in refused.json()["message"]
    current = http.post(f"{path}/memories/{restored.json()['id']}/restore")
    assert current.status_code == 409
    # Forget the restored memory's chain, then a new run: discard it, nothing changes.
    assert http.delete(f"{path}/memories/{restored.json()['id']}").status_code == 204
    _keep(http, path, TEA), _keep(http, path, TEA_CUP)
    before = _texts(http, path)
    second = _run(http, path, "ann", ("proposed", "failed"))
    discarded = http.post(f"{path}/consolidations/{second['consolidation_id']}/discard")
    assert discarded.status_code == 200 and discarded.json()["status"] == "discarded"
    assert _texts(http, path) == before


def test_an_applied_run_reverts_to_the_memories_it_replaced(http, provider, made):
    path = model_store(http, provider, made)
    _keep(http, path, TEA), _keep(http, path, TEA_CUP)
    run = _run(http, path, "ann", ("applied", "failed"))
    assert _texts(http, path) == [TEA_CUP]
    reverted = http.post(f"{path}/consolidations/{run['consolidation_id']}/revert")
    assert reverted.status_code == 200, reverted.text
    assert reverted.json()["status"] == "reverted"
    assert _texts(http, path) == sorted([TEA, TEA_CUP])
    assert http.get(path).json()["counts"]["memories"] == 2


def test_bad_requests_are_refused_and_change_nothing(http, provider, made, store):
    path = model_store(http, provider, made)
    unknown = http.get(f"{path}/consolidations/con_0000ffffffffffffffff")
    assert unknown.status_code == 404 and unknown.json()["error"] == "consolidation_not_found"
    malformed = http.get(f"{path}/consolidations/not-a-run")
    assert malformed.status_code == 422
    status = http.get(f"{path}/consolidations", params={"status": "done"})
    assert status.status_code == 422 and "query.status" in status.text
    no_model = http.post(f"{store}/actors/ann/consolidate")
    assert no_model.status_code == 409 and "language model" in no_model.json()["message"]
    assert http.get(f"{store}/consolidations").json()["consolidations"] == []
