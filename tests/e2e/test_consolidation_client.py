"""The Python client's consolidation methods (sync and async) against the local stack with
the scripted model (``tools.scripted_consolidation``: it merges what states the same fact):
a run in review mode read, applied and reverted; a proposal discarded; a memory's version
restored; the errors a caller meets named."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import pytest

from kividb_memory import (
    AsyncMemoryClient,
    ConflictError,
    Consolidation,
    MemoryClient,
    NotFoundError,
    StoreClient,
)
from tests.support.common import wait_for
from tests.support.stack import model_store

TEA = "The user loves green tea every morning."
TEA_AGAIN = "The user loves green tea every single morning."
HIKING = "The user goes hiking in the Alps each summer."


@pytest.fixture
def api(open_stack) -> Iterator[MemoryClient]:
    with open_stack.memory() as client:
        yield client


@pytest.fixture
def reviewed(api, provider) -> Iterator[StoreClient]:
    """A store on the scripted model whose runs wait for review."""
    made: list[str] = []
    model_store(api, provider, made, consolidation_mode="review", dedupe_threshold=0.999)
    name = made[0].rsplit("/", 1)[1]
    yield api.store("local", name)
    for path in made:
        with contextlib.suppress(NotFoundError):
            api.delete_store("local", path.rsplit("/", 1)[1])


def _finished(store: StoreClient, run_id: str) -> Consolidation:
    return wait_for(
        lambda: (
            (run := store.get_consolidation(run_id)).status not in ("queued", "running") and run
        ),
        60,
        f"consolidation {run_id} to finish",
        show=lambda: store.get_consolidation(run_id),
    )


def _current(store: StoreClient, actor: str) -> dict[str, str]:
    return {m.id: m.text for m in store.list_memories(actor_id=actor, limit=100).memories}


def test_a_reviewed_run_is_read_applied_and_reverted_through_the_client(reviewed):
    store = reviewed
    a = store.add_memory(TEA, actor_id="ann").id
    b = store.add_memory(TEA_AGAIN, actor_id="ann").id
    c = store.add_memory(HIKING, actor_id="ann").id
    queued = store.consolidate("ann")
    assert queued.status == "queued" and queued.consolidation_id.startswith("con_")
    run = _finished(store, queued.consolidation_id)
    assert (run.status, run.mode, run.trigger) == ("proposed", "review", "request")
    (step,) = run.steps
    assert (step.action, step.status) == ("merge", "planned")
    assert [m.id for m in step.before] == [a, b] and step.after is not None
    assert step.after.text == TEA_AGAIN
    assert run.model_calls == 1 and run.input_tokens > 0 and run.budget_tokens > 0
    assert _current(store, "ann") == {a: TEA, b: TEA_AGAIN, c: HIKING}  # nothing yet

    listed = store.list_consolidations(actor_id="ann", status=["proposed", "failed"])
    assert [r.consolidation_id for r in listed.consolidations] == [run.consolidation_id]
    assert store.list_consolidations(actor_id="ann", status="applied").consolidations == []

    applied = store.apply_consolidation(run.consolidation_id)
    assert applied.status == "applied" and applied.steps[0].status == "applied"
    merged = applied.steps[0].after
    assert merged is not None
    assert _current(store, "ann") == {merged.id: TEA_AGAIN, c: HIKING}
    assert store.get_memory(merged.id).source.consolidation_id == run.consolidation_id
    with pytest.raises(ConflictError):
        store.apply_consolidation(run.consolidation_id)  # applied already

    reverted = store.revert_consolidation(run.consolidation_id)
    assert reverted.status == "reverted"
    assert set(_current(store, "ann").values()) == {TEA, TEA_AGAIN, HIKING}
    assert merged.id not in _current(store, "ann")


def test_a_discarded_proposal_changes_nothing_and_a_version_is_restored(reviewed):
    store = reviewed
    a = store.add_memory(TEA, actor_id="bo").id
    b = store.add_memory(TEA_AGAIN, actor_id="bo").id
    run = _finished(store, store.consolidate("bo").consolidation_id)
    discarded = store.discard_consolidation(run.consolidation_id)
    assert discarded.status == "discarded"
    assert [s.status for s in discarded.steps] == ["discarded"]
    assert _current(store, "bo") == {a: TEA, b: TEA_AGAIN}
    with pytest.raises(ConflictError):
        store.discard_consolidation(run.consolidation_id)

    newer = store.add_memory("The user loves black tea every morning.", actor_id="bo", supersedes=a)
    with pytest.raises(ConflictError, match="current"):
        store.restore_memory(newer.id)
    restored = store.restore_memory(a)
    assert restored.text == TEA and restored.source is not None
    assert restored.source.restored_from == a
    assert _current(store, "bo") == {restored.id: TEA, b: TEA_AGAIN}
    assert restored.id in {v.id for v in store.get_memory(a).chain}


def test_the_async_client_runs_the_same_calls(open_stack, reviewed):
    name = reviewed._prefix.rsplit("/", 1)[1]

    async def go() -> None:
        async with AsyncMemoryClient(open_stack.url, open_stack.api_key) as client:
            store = client.store("local", name)
            await store.add_memory(TEA, actor_id="cy")
            await store.add_memory(TEA_AGAIN, actor_id="cy")
            queued = await store.consolidate("cy")
            for _ in range(240):
                run = await store.get_consolidation(queued.consolidation_id)
                if run.status == "proposed":
                    break
                await asyncio.sleep(0.25)
            assert run.status == "proposed"
            listed = await store.list_consolidations(actor_id="cy")
            assert [r.status for r in listed.consolidations] == ["proposed"]
            assert (await store.discard_consolidation(run.consolidation_id)).status == "discarded"
            with pytest.raises(NotFoundError):
                await store.get_consolidation("con_00000000000000000000")

    asyncio.run(go())
