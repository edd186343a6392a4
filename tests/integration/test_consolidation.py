"""Consolidation runs on a real Redis (and on a cluster: ``CLUSTER_TESTS``), with the scripted
model's plan rule (``tools.scripted_consolidation``) and crafted plans from a loopback chat
server: each kind of step applied atomically through supersede, hostile plans changing
nothing they should not, review (apply, discard, conflicts), restore and revert, runs racing
adds, changes, forget-actor and each other, and the automatic run armed once.
"""

from __future__ import annotations

import functools
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest

from agent_memory.background.runs import RunBudget
from agent_memory.background.scheduler import schedule_name
from agent_memory.consolidation.runs import ConsolidationRuns
from agent_memory.consolidation.triggers import note_new_memories
from agent_memory.errors import Conflict, ConsolidationNotFound
from agent_memory.memories.models import MemoryIn, MemoryPatch
from agent_memory.search.selection import Selection
from tests.support.background import World
from tests.support.model_servers import ScriptedChatServer

TEA = "The user loves green tea every morning."
TEA_AGAIN = "The user loves green tea every single morning."
HIKING = "The user goes hiking in the Alps each summer."
LEMON = "The user loves green tea every morning with lemon."
PAIRS = [
    (TEA, "The user loves a cup of green tea every morning."),
    ("The user walks the dog named Rex daily.", "The user walks the dog named Rex daily at noon."),
    (
        "The user plays chess with friends on weekends.",
        "The user plays chess with old friends on weekends.",
    ),
]
"""Three facts, each said twice in words the scripted rule takes for the same fact."""


@pytest.fixture
def make_world(make_world):
    """Worlds whose stores keep near-duplicates apart (a dedupe threshold of 0.999), so that
    the runs find repeats to merge."""
    return functools.partial(make_world, dedupe_threshold=0.999)


def runs_of(world: World, model=...) -> ConsolidationRuns:
    return ConsolidationRuns(
        world.memories, world.model if model is ... else model, world.scheduler, "db"
    )


def keep(world: World, text: str, actor: str = "alice") -> str:
    """Keep a memory a second after the one before (so the order of creation is known)."""
    world.clock.moment += timedelta(seconds=1)
    return world.memories.add(MemoryIn(text=text, actor_id=actor)).memory.id


def current(world: World, actor: str = "alice") -> dict[str, str]:
    return {m.id: m.text for m in world.memories.page(0, 200, actor, None).memories}


def everything(world: World, actor: str = "alice") -> dict[str, object]:
    """Every memory of the actor, current or not, as clients see it."""
    page = world.memories.page(0, 500, actor, None, Selection(include_superseded=True))
    return {m.id: m.model_dump() for m in page.memories}


def run_now(world: World, runs: ConsolidationRuns, actor: str = "alice"):
    runs.queue(actor)
    outcome = runs.run(actor, RunBudget(60))
    assert outcome.run is not None
    return outcome


def plan_reply(server: ScriptedChatServer, *steps) -> None:
    server.reply(json.dumps({"plan": list(steps)}), input_tokens=120, output_tokens=30)


# --- each kind of step ----------------------------------------------------------------------


def test_a_merge_replaces_the_same_fact_with_one_memory_and_keeps_both_readable(
    make_world, scripted
):
    world = make_world(scripted, scripted)
    first, second, other = keep(world, TEA), keep(world, TEA_AGAIN), keep(world, HIKING)
    runs = runs_of(world)
    outcome = run_now(world, runs)
    run = outcome.run
    assert run.status == "applied" and run.mode == "apply" and run.trigger == "request"
    assert run.model_calls >= 1 and run.input_tokens > 0 and outcome.model_calls >= 1
    (step,) = run.steps
    assert (step.action, step.status) == ("merge", "applied")
    assert [m.id for m in step.before] == [first, second]
    assert step.after.text == TEA_AGAIN
    assert (run.counts.merged, run.counts.applied, run.counts.conflicts) == (2, 1, 0)
    assert run.counts.examined == 3
    now = current(world)
    assert now == {step.after.id: TEA_AGAIN, other: HIKING}
    successor = world.memories.get(step.after.id)
    assert successor.source.consolidation_id == run.consolidation_id
    assert successor.supersedes == first
    old = everything(world)
    assert old[first]["superseded_by"] == step.after.id
    assert old[second]["superseded_by"] == step.after.id
    assert old[first]["valid_until"] == successor.valid_from
    assert [m.id for m in world.memories.get(second).chain] == [second, step.after.id]
    assert (outcome.kept, outcome.closed) == (1, 2)
    # Read back as the routes show it.
    assert runs.get(run.consolidation_id, None).status == "applied"
    assert world.memories.count() == 2


def test_update_and_drop_go_through_supersede(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        wrong, trivia, _ = keep(world, TEA), keep(world, TEA_AGAIN), keep(world, HIKING)
        plan_reply(
            model,
            {"action": "update", "memories": [wrong], "text": "The user drinks black tea now."},
            {"action": "drop", "memories": [trivia], "reason": "trivia"},
        )
        run = run_now(world, runs_of(world)).run
    assert [(s.action, s.status) for s in run.steps] == [("update", "applied"), ("drop", "applied")]
    update, drop = run.steps
    assert drop.after is None
    now = current(world)
    assert update.after.id in now and now[update.after.id] == "The user drinks black tea now."
    assert wrong not in now and trivia not in now
    old = everything(world)
    assert old[wrong]["superseded_by"] == update.after.id
    assert old[trivia]["superseded_by"] is None and old[trivia]["valid_until"] is not None
    assert (run.counts.updated, run.counts.dropped) == (1, 1)
    assert (run.input_tokens, run.output_tokens) == (120, 30)


def test_a_run_without_related_memories_asks_nothing_and_changes_nothing(make_world, scripted):
    world = make_world(scripted, scripted)
    keep(world, TEA)
    before = everything(world)
    run = run_now(world, runs_of(world)).run
    assert (run.status, run.model_calls, run.steps) == ("applied", 0, [])
    assert everything(world) == before


def test_new_texts_are_redacted(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        a, b = keep(world, TEA), keep(world, TEA_AGAIN)
        text = "The user loves green tea; write to tea.fan@example.com."
        plan_reply(model, {"action": "merge", "memories": [a, b], "text": text})
        run = run_now(world, runs_of(world)).run
    assert "tea.fan@example.com" not in run.steps[0].after.text
    assert "tea.fan@example.com" not in " ".join(current(world).values())


# --- hostile plans --------------------------------------------------------------------------


def test_hostile_plans_change_nothing_they_should_not(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        a, b = keep(world, TEA), keep(world, TEA_AGAIN)
        keep(world, HIKING)
        bob = keep(world, TEA, actor="bob")
        bob_before = everything(world, "bob")
        plan_reply(
            model,
            {"action": "merge", "memories": [a, "mem_0000ffffffffffffffff"], "text": "x"},
            {"action": "merge", "memories": [a, bob], "text": "stolen"},
            {"action": "drop", "memories": [bob]},
            {"action": "merge", "memories": [a], "text": "a merge of one"},
            {"action": "update", "memories": [b], "text": "y" * 5000},
            {"action": "update", "memories": [b]},
            {"action": "explode", "memories": [b]},
            "not a step",
            {"action": "drop", "memories": [b, b, a]},
        )
        before = everything(world)
        run = run_now(world, runs_of(world)).run
    assert run.status == "applied" and run.steps == []
    counts = run.counts
    assert counts.ignored_unknown_ids == 3
    assert counts.ignored_merge_of_one == 1
    assert counts.ignored_too_long == 1
    assert counts.ignored_invalid == 4
    assert everything(world) == before
    assert everything(world, "bob") == bob_before


def test_an_answer_that_is_not_json_fails_the_run_and_keeps_everything(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        a, b = keep(world, TEA), keep(world, TEA_AGAIN)
        before = everything(world)
        model.reply("I merged them for you!")
        model.reply("Sure, here is the plan: merge all")
        runs = runs_of(world)
        outcome = run_now(world, runs)
        run = outcome.run
        assert (outcome.outcome, run.status, run.failures) == ("failed", "failed", 1)
        assert run.last_error and "JSON" in run.last_error
        assert run.retry_at == world.clock.moment + timedelta(seconds=60)
        assert everything(world) == before
        # The retry is armed on the actor's one schedule.
        (target, due) = world.scheduler.arms[-1]
        assert target.actor_id == "alice" and due == run.retry_at
        # When it comes, the same run is done again, and now succeeds.
        world.clock.moment = run.retry_at
        plan_reply(model, {"action": "merge", "memories": [a, b], "text": TEA_AGAIN})
        again = runs.run("alice", RunBudget(60)).run
    assert again.consolidation_id == run.consolidation_id
    assert (again.status, again.failures, again.last_error) == ("applied", 1, None)
    assert len(current(world)) == 1


# --- review -----------------------------------------------------------------------------------


def test_review_keeps_the_plan_until_it_is_applied(make_world, scripted):
    world = make_world(scripted, scripted, consolidation_mode="review")
    a, b = keep(world, TEA), keep(world, TEA_AGAIN)
    before = everything(world)
    runs = runs_of(world)
    run = run_now(world, runs).run
    assert run.status == "proposed" and run.mode == "review"
    assert [s.status for s in run.steps] == ["planned"]
    assert everything(world) == before
    applied = runs.apply(run.consolidation_id, None).run
    assert applied.status == "applied" and applied.steps[0].status == "applied"
    assert set(current(world)) == {applied.steps[0].after.id}
    with pytest.raises(Conflict):
        runs.apply(run.consolidation_id, None)  # applied already
    assert {a, b} <= set(everything(world))


def test_discard_changes_nothing(make_world, scripted):
    world = make_world(scripted, scripted, consolidation_mode="review")
    keep(world, TEA), keep(world, TEA_AGAIN)
    before = everything(world)
    runs = runs_of(world)
    run = run_now(world, runs).run
    discarded = runs.discard(run.consolidation_id, None)
    assert discarded.status == "discarded" and discarded.steps[0].status == "discarded"
    assert everything(world) == before
    with pytest.raises(Conflict):
        runs.apply(run.consolidation_id, None)


def test_a_proposal_applies_the_steps_that_still_hold_and_names_the_conflicts(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted, consolidation_mode="review")
        a, b, c = keep(world, TEA), keep(world, TEA_AGAIN), keep(world, LEMON)
        plan_reply(
            model,
            {"action": "merge", "memories": [a, b], "text": TEA_AGAIN},
            {"action": "drop", "memories": [c]},
        )
        runs = runs_of(world)
        run = run_now(world, runs).run
    world.clock.moment += timedelta(seconds=1)
    world.memories.patch(c, MemoryPatch(text="The user takes lemon in green tea."))
    applied = runs.apply(run.consolidation_id, None).run
    merge, drop = applied.steps
    assert (merge.status, drop.status) == ("applied", "conflict")
    assert c in drop.conflict
    assert (applied.counts.applied, applied.counts.conflicts) == (1, 1)
    assert c in current(world)  # the changed memory stays as its PATCH left it


def test_a_proposal_none_of_whose_steps_holds_is_409_and_stays_proposed(make_world, scripted):
    world = make_world(scripted, scripted, consolidation_mode="review")
    a, _ = keep(world, TEA), keep(world, TEA_AGAIN)
    runs = runs_of(world)
    run = run_now(world, runs).run
    world.clock.moment += timedelta(seconds=1)
    world.memories.patch(a, MemoryPatch(topics=["tea"]))
    before = everything(world)
    with pytest.raises(Conflict, match="No step"):
        runs.apply(run.consolidation_id, None)
    assert everything(world) == before
    assert runs.get(run.consolidation_id, None).status == "proposed"


def test_a_run_of_another_actor_is_not_found_for_a_key_limited_to_actors(make_world, scripted):
    world = make_world(scripted, scripted, consolidation_mode="review")
    keep(world, TEA), keep(world, TEA_AGAIN)
    runs = runs_of(world)
    run = run_now(world, runs).run
    with pytest.raises(ConsolidationNotFound):
        runs.get(run.consolidation_id, ("bob",))
    with pytest.raises(ConsolidationNotFound):
        runs.apply(run.consolidation_id, ("bob",))
    with pytest.raises(ConsolidationNotFound):
        runs.get("con_0000ffffffffffffffff", None)


# --- undo -------------------------------------------------------------------------------------


def test_revert_makes_the_replaced_memories_current_again(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        a, b, c = keep(world, TEA), keep(world, TEA_AGAIN), keep(world, LEMON)
        plan_reply(
            model,
            {"action": "merge", "memories": [a, b], "text": TEA_AGAIN},
            {"action": "drop", "memories": [c]},
        )
        runs = runs_of(world)
        run = run_now(world, runs).run
    merged = run.steps[0].after.id
    world.clock.moment += timedelta(seconds=1)
    reverted = runs.revert(run.consolidation_id, None).run
    assert reverted.status == "reverted"
    assert [s.status for s in reverted.steps] == ["reverted", "reverted"]
    assert current(world) == {a: TEA, b: TEA_AGAIN, c: LEMON}
    closed = everything(world)[merged]
    assert closed["valid_until"] is not None and closed["supersedes"] is None
    assert world.memories.count() == 3
    with pytest.raises(Conflict):
        runs.revert(run.consolidation_id, None)


def test_revert_is_409_naming_the_results_that_changed_and_reverts_nothing(make_world, scripted):
    world = make_world(scripted, scripted)
    keep(world, TEA), keep(world, TEA_AGAIN)
    runs = runs_of(world)
    run = run_now(world, runs).run
    merged = run.steps[0].after.id
    world.clock.moment += timedelta(seconds=1)
    world.memories.patch(merged, MemoryPatch(text="The user loves matcha every morning."))
    before = everything(world)
    with pytest.raises(Conflict) as refused:
        runs.revert(run.consolidation_id, None)
    assert merged in refused.value.message
    assert refused.value.details == [{"field": "memories", "problem": f"{merged} changed"}]
    assert everything(world) == before
    assert runs.get(run.consolidation_id, None).status == "applied"


def test_restore_brings_a_replaced_version_back_as_the_current_one(make_world, scripted):
    world = make_world(scripted, scripted)
    a, b = keep(world, TEA), keep(world, TEA_AGAIN)
    runs = runs_of(world)
    run = run_now(world, runs).run
    merged = run.steps[0].after.id
    world.clock.moment += timedelta(seconds=1)
    restored, closed = runs.restore(a)
    assert closed == merged
    assert current(world) == {restored.id: TEA}
    view = world.memories.get(restored.id)
    assert view.source.restored_from == a and view.supersedes == merged
    assert [m.id for m in view.chain] == [a, merged, restored.id]
    with pytest.raises(Conflict, match="current"):
        runs.restore(restored.id)
    # An older version of the same chain: the current one is replaced again.
    world.clock.moment += timedelta(seconds=1)
    again, closed = runs.restore(b)
    assert closed == restored.id and current(world) == {again.id: TEA_AGAIN}


def test_restore_of_a_dropped_memory_links_from_it(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        a, _, _ = keep(world, TEA), keep(world, TEA_AGAIN), keep(world, HIKING)
        plan_reply(model, {"action": "drop", "memories": [a]})
        run_now(world, runs_of(world))
    assert a not in current(world)
    world.clock.moment += timedelta(seconds=1)
    restored, closed = runs_of(world).restore(a)
    assert closed is None and current(world)[restored.id] == TEA
    assert everything(world)[a]["superseded_by"] == restored.id


# --- races ------------------------------------------------------------------------------------


def test_two_runs_of_one_actor_at_once_apply_once(make_world, scripted):
    world = make_world(scripted, scripted)
    for n in range(6):
        keep(world, f"{TEA} Note {n}.")
    runs = runs_of(world)
    runs.queue("alice")
    assert runs.queue("alice").status == "queued"  # never two queued at once
    start = threading.Barrier(2)

    def one():
        start.wait()
        return runs_of(world).run("alice", RunBudget(60))

    with ThreadPoolExecutor(2) as pool:
        outcomes = [f.result() for f in [pool.submit(one), pool.submit(one)]]
    done = [o for o in outcomes if o.run is not None]
    assert len(done) == 1 and done[0].run.status == "applied"
    assert sorted(o.outcome for o in outcomes) in (["busy", "done"], ["done", "idle"])
    assert len(runs.records.of_actor("alice")) == 1
    history = everything(world)
    assert len(history) == 6 + sum(s.after is not None for s in done[0].run.steps)
    assert len(current(world)) == 6 - done[0].run.counts.merged + len(done[0].run.steps)


def test_a_run_cut_short_while_applying_carries_on_without_conflicts(make_world, scripted):
    world = make_world(scripted, scripted, consolidation_mode="review")
    for pair in PAIRS:
        keep(world, pair[0]), keep(world, pair[1])
    runs = runs_of(world)
    run = run_now(world, runs).run
    assert len(run.steps) == 3
    # The first step applied, then the process died before the run's record was saved.
    vector = world.memories.embed([run.steps[0].after.text])[0]
    assert runs.writer.apply(run, run.steps[0], vector) is None
    assert runs.get(run.consolidation_id, None).status == "proposed"
    applied = runs.apply(run.consolidation_id, None).run
    assert [s.status for s in applied.steps] == ["applied"] * 3
    history = everything(world)
    assert len(history) == 6 + 3  # each new memory once
    assert len(current(world)) == 3


def test_requests_racing_to_queue_a_run_get_one_run(make_world, scripted):
    world = make_world(scripted, scripted)
    start = threading.Barrier(8)

    def ask():
        start.wait()
        return runs_of(world).queue("alice").consolidation_id

    with ThreadPoolExecutor(8) as pool:
        ids = {f.result() for f in [pool.submit(ask) for _ in range(8)]}
    assert len(ids) == 1
    runs = runs_of(world)
    assert [r.consolidation_id for r in runs.records.of_actor("alice")] == list(ids)
    assert runs.records.page(0, 10, None, [])[0][0].consolidation_id in ids
    outcome = runs.run("alice", RunBudget(60))
    assert outcome.run.consolidation_id in ids
    # Once it ended, a request queues a new run.
    assert runs.queue("alice").consolidation_id not in ids


def test_runs_racing_adds_changes_and_another_actor_lose_and_double_nothing(make_world, scripted):
    world = make_world(scripted, scripted)
    pairs = [
        (keep(world, f"{TEA} Cup {n}."), keep(world, f"{TEA_AGAIN} Cup {n}.")) for n in range(4)
    ]
    runs = runs_of(world)
    stop = threading.Event()
    added: list[str] = []

    def adder():
        n = 0
        while not stop.is_set() and n < 30:
            added.append(keep(world, f"The user visited city number {n} in {1990 + n}."))
            n += 1

    def patcher():
        for _ in range(10):
            world.memories.patch(pairs[0][0], MemoryPatch(importance=0.5))

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(adder), pool.submit(patcher)]
        outcome = run_now(world, runs)
        stop.set()
        for f in futures:
            f.result()
    run = outcome.run
    assert run.status == "applied"
    history = everything(world)
    # Every memory ever kept is still there (current or closed), each once.
    for a, b in pairs:
        assert a in history and b in history
    assert set(added) <= set(history)
    now = current(world)
    for memory_id in added:
        assert memory_id in now or history[memory_id]["superseded_by"] in history
    # A memory is current or replaced by a kept one, never neither.
    for memory_id, view in history.items():
        assert memory_id in now or view["valid_until"] is not None
    assert world.memories.count() == len(now)


def test_a_run_racing_extraction_loses_and_doubles_nothing(make_world, scripted):
    world = make_world(scripted, scripted)
    for pair in PAIRS:
        keep(world, pair[0]), keep(world, pair[1])
    world.say("chat", "I am vegetarian.", "I work at Northwind Labs.", "My dog is called Rex.")
    world.quiet()
    runs = runs_of(world)
    runs.queue("alice")
    start = threading.Barrier(2)

    def extract():
        start.wait()
        return world.run("chat")

    def consolidate():
        start.wait()
        return runs_of(world).run("alice", RunBudget(60))

    with ThreadPoolExecutor(2) as pool:
        extracted, consolidated = pool.submit(extract), pool.submit(consolidate)
        report, outcome = extracted.result(), consolidated.result()
    assert report.outcome == "done" and report.kept == 3, report.error
    run = outcome.run
    assert run.status == "applied"
    history = everything(world)
    now = current(world)
    # The extracted memories are all current; each pair is merged once or left as it was.
    extracted_texts = [t for t in now.values() if "said on" in t]
    assert len(extracted_texts) == 3
    assert len(history) == 6 + 3 + sum(s.status == "applied" for s in run.steps)
    assert len(now) == 3 + 6 - sum(len(s.before) - 1 for s in run.steps if s.status == "applied")
    assert world.memories.count() == len(now)


def test_forget_actor_racing_a_run_leaves_no_memory_and_no_run(make_world, scripted):
    world = make_world(scripted, scripted)
    for n in range(5):
        keep(world, f"{TEA} Pot {n}.")
        keep(world, f"{TEA_AGAIN} Pot {n}.")
    runs = runs_of(world)
    runs.queue("alice")
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(runs_of(world).run, "alice", RunBudget(60))
        world.memories.delete_actor("alice")
        runs.records.forget_actor("alice")
        running.result()
    # What the run wrote after the forget, if anything, is forgotten by forgetting again;
    # nothing of alice outlives a forget made after the run.
    world.memories.delete_actor("alice")
    runs.records.forget_actor("alice")
    assert everything(world) == {}
    assert world.memories.count() == 0
    assert runs.records.page(0, 10, "alice", [])[0] == []


# --- the automatic run ------------------------------------------------------------------------


def test_the_automatic_run_is_armed_once_per_threshold(make_world, scripted, client):
    world = make_world(scripted, scripted, consolidate_after_memories=3)
    target = runs_of(world).target("alice")
    armed = [
        note_new_memories(
            client, world.config, "alice", 1, lambda: world.scheduler, target, world.clock
        )
        for _ in range(6)
    ]
    assert armed == [False, False, True, False, False, False]
    assert len(world.scheduler.arms) == 1
    (armed_target, due) = world.scheduler.arms[0]
    assert armed_target == target and due == world.clock.moment + timedelta(seconds=60)
    assert schedule_name(target) in world.scheduler.inner.pending()
    assert schedule_name(target).startswith("kvm-") and len(schedule_name(target)) <= 64
    # The run it arms creates an automatic run, then clears the arming and the count.
    keep(world, TEA), keep(world, TEA_AGAIN)
    outcome = runs_of(world).run("alice", RunBudget(60))
    assert outcome.run.trigger == "automatic" and outcome.run.status == "applied"
    assert not note_new_memories(
        client, world.config, "alice", 2, lambda: world.scheduler, target, world.clock
    )
    assert note_new_memories(
        client, world.config, "alice", 1, lambda: world.scheduler, target, world.clock
    )
    assert len(world.scheduler.arms) == 2


def test_no_automatic_run_for_a_threshold_of_0_or_memories_of_no_actor(
    make_world, scripted, client
):
    world = make_world(scripted, scripted, consolidate_after_memories=0)
    target = runs_of(world).target("alice")
    for _ in range(100):
        note_new_memories(
            client, world.config, "alice", 1, lambda: world.scheduler, target, world.clock
        )
    other = make_world(scripted, scripted, consolidate_after_memories=1)
    note_new_memories(client, other.config, None, 5, lambda: other.scheduler, None, other.clock)
    assert world.scheduler.arms == [] and other.scheduler.arms == []
    # With nothing due, a run fired by hand does nothing.
    outcome = runs_of(world).run("alice", RunBudget(60))
    assert (outcome.outcome, outcome.run) == ("idle", None)
