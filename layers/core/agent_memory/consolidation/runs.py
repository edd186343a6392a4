"""Consolidation runs of one store: asking for one, the run itself (plan, then apply or
propose), and what a person does with a run afterwards (apply, discard, revert), plus the
restore of a memory's version. docs/consolidation.md describes them.

The run (``ConsolidationRuns.run``, in the background function, one at a time per actor under
the actor's lock):

1. reads the actor's current memories and groups the related ones into sets
   (``grouping.related_sets``), each within the prompt budget (``grouping.BUDGET_TOKENS``);
2. asks the store's language model for a plan per set (``background.prompts``), checks each
   step (ids shown in that set, once each; a merge of two or more; a text within
   ``MAX_MEMORY_CHARS``; anything else ignored and counted), redacts the new texts and keeps
   the whole plan on the run's record: a failure before this point (the model, the provider)
   records the error, changes no memory, and arms a retry with backoff (60 s, 120 s, 240 s,
   480 s; a run fails for good after ``MAX_FAILURES``);
3. in ``review`` mode stops there (``proposed``); in ``apply`` mode embeds the new texts and
   applies each step atomically (``steps.StepWriter.apply``). A step whose memories changed
   since the plan read them is a conflict and changes nothing. Each step marks itself done in
   the same script, so a run cut short and done again applies the rest, never a step twice.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from agent_memory.background.prompts import (
    MAX_MEMORY_CHARS,
    MAX_REASON_CHARS,
    PlanAnswer,
    PlannedStep,
    consolidation_prompt,
    memory_line,
)
from agent_memory.background.runs import OutOfTime, RunBudget
from agent_memory.background.scheduler import ConsolidationTarget, Scheduler
from agent_memory.clock import to_ms
from agent_memory.consolidation.grouping import (
    BUDGET_TOKENS,
    Candidate,
    estimate_tokens,
    related_sets,
)
from agent_memory.consolidation.models import (
    Consolidation,
    ConsolidationCounts,
    ConsolidationStep,
    StepMemory,
    new_consolidation_id,
)
from agent_memory.consolidation.records import ARMED, QUEUED, SINCE, ConsolidationRecords
from agent_memory.consolidation.steps import StepWriter, step_memory_id
from agent_memory.database.client import database_errors
from agent_memory.database.keys import actor_bucket
from agent_memory.database.scripts import load_script
from agent_memory.errors import AgentMemoryError, Conflict, ConsolidationNotFound
from agent_memory.memories.models import MemoryView
from agent_memory.memories.records import MemoryRecord, record_view
from agent_memory.memories.redaction import redact
from agent_memory.memories.service import Memories
from agent_memory.providers.language_models import LanguageModel
from agent_memory.sessions import scripts as session_scripts

LOCK_SECONDS = 300
"""A run's hold on its actor: the background function's timeout."""
BUSY_RETRY_SECONDS = 30
MAX_FAILURES = 5
RETRY_BASE_SECONDS = 60
PLAN_MAX_TOKENS = 4_096
"""The longest answer a consolidation call may give (tokens)."""
LOCK_WAIT_SECONDS = 5.0
"""How long apply, discard and revert wait for a run of the same actor to end."""
FIRE_TOLERANCE = timedelta(seconds=5)
"""A schedule may fire a moment before its due time by this clock (as extraction's)."""


@dataclass
class RunOutcome:
    """What one invocation of ``ConsolidationRuns.run`` did: the run (None: nothing to do),
    ``outcome`` (``done``, ``busy``, ``continued``, ``failed``, ``idle``), and this
    invocation's model calls, tokens and memory changes (for usage)."""

    run: Consolidation | None
    outcome: str = "done"
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    kept: int = 0
    closed: int = 0


class ConsolidationRuns:
    """The consolidation of one store's actors: ``memories`` (the store's, embedding through
    the caller's provider client), ``model`` (None: the store has no language model) and the
    ``scheduler`` that arms runs of ``instance_id``'s store. Errors: ``ConsolidationNotFound``,
    ``Conflict``, ``DatabaseUnavailable``."""

    def __init__(
        self,
        memories: Memories,
        model: LanguageModel | None,
        scheduler: Scheduler,
        instance_id: str,
    ) -> None:
        db = memories.db
        self._db = db
        self._redis = db.client
        self._store = db.config
        self._clock = db.clock
        self._memories = memories
        self._model = model
        self._scheduler = scheduler
        self._instance_id = instance_id
        self.records = ConsolidationRecords(db)
        self.writer = StepWriter(memories)
        self._unlock = load_script(db.client, session_scripts.UNLOCK)

    def target(self, actor_id: str) -> ConsolidationTarget:
        """What the background function is invoked with for ``actor_id``'s run."""
        return ConsolidationTarget(self._instance_id, self._store.name, actor_id)

    # --- asking for a run ------------------------------------------------------------------

    def queue(self, actor_id: str, trigger: str = "request") -> Consolidation:
        """A run of ``actor_id`` queued now (or the one already queued or running: never two
        at once), started as soon as possible (``Scheduler.run_now``).

        Each request keeps its run's record first, then claims the actor's ``queued`` field
        (``HSETNX``); one that loses takes its record back and answers the winner's run, which
        is kept already. A claim whose run has ended (a process that died before clearing it)
        is taken over."""
        run = self._new(actor_id, trigger)
        self.records.save(run, new=True)
        state = self._state(actor_id)
        with database_errors():
            won = bool(self._redis.hsetnx(state, QUEUED, run.consolidation_id))
            holder = None if won else self._redis.hget(state, QUEUED)
        if holder is not None:
            existing = self.records.load(str(holder), actor_id)
            if existing is not None and existing.status in ("queued", "running"):
                self.records.drop(run)
                return existing
            with database_errors():
                self._redis.hset(state, QUEUED, run.consolidation_id)
        self._scheduler.run_now(self.target(actor_id))
        return run

    def _new(self, actor_id: str, trigger: str) -> Consolidation:
        return Consolidation(
            consolidation_id=new_consolidation_id(actor_bucket(actor_id)),
            actor_id=actor_id,
            status="queued",
            trigger="automatic" if trigger == "automatic" else "request",
            mode=self._store.consolidation_mode,
            created_at=self._clock.now(),
            budget_tokens=BUDGET_TOKENS,
        )

    # --- the run ---------------------------------------------------------------------------

    def run(self, actor_id: str, budget: RunBudget) -> RunOutcome:
        """One background run for the actor (module docstring): the oldest run that waits
        (queued, cut short, or failed and due again), or a new automatic one when the actor
        has ``consolidate_after_memories`` new memories; ``busy`` when another run holds the
        actor (this one comes back in ``BUSY_RETRY_SECONDS``)."""
        outcome = RunOutcome(None)
        if self._model is None:
            self._state_del(actor_id, ARMED)
            outcome.outcome = "idle"
            return outcome
        with self._locked(actor_id) as held:
            if not held:
                self._arm(actor_id, BUSY_RETRY_SECONDS)
                outcome.outcome = "busy"
                return outcome
            run, since = self._next(actor_id)
            self._state_del(actor_id, ARMED)
            if run is None:
                outcome.outcome = "idle"
                return outcome
            outcome.run = run
            run.status, run.started_at, run.retry_at = "running", self._clock.now(), None
            self.records.save(run)
            try:
                if run.planned_at is None:
                    self._plan(run, budget, outcome)
                    run.planned_at = self._clock.now()
                    self.records.save(run)
                if run.mode == "review":
                    run.status = "proposed"
                else:
                    self._apply_all(run, outcome)
                    run.status = "applied"
                run.finished_at, run.last_error = self._clock.now(), None
                self.records.save(run)
                if since:
                    self._reset_since(actor_id, since)
            except OutOfTime:
                self.records.save(run)  # the plan so far: the next run carries on from it
                self._arm(actor_id, 1)
                outcome.outcome = "continued"
            except AgentMemoryError as exc:
                self._failed(run, exc.message, outcome)
            if outcome.outcome != "continued":
                self._release(actor_id, run.consolidation_id)
        return outcome

    def _release(self, actor_id: str, consolidation_id: str) -> None:
        """Clear the actor's ``queued`` claim when it is ``consolidation_id``'s."""
        state = self._state(actor_id)
        with database_errors():
            if self._redis.hget(state, QUEUED) == consolidation_id:
                self._redis.hdel(state, QUEUED)

    def _next(self, actor_id: str) -> tuple[Consolidation | None, int]:
        """The run to do now and the actor's new-memory count it answers for."""
        with database_errors():
            since = int(self._redis.hget(self._state(actor_id), SINCE) or 0)
        now = self._clock.now()
        for run in self.records.of_actor(actor_id):
            if run.status in ("queued", "running"):
                return run, since
            due = run.retry_at is not None and run.retry_at <= now + FIRE_TOLERANCE
            if run.status == "failed" and due:
                return run, since
        threshold = self._store.consolidate_after_memories
        if threshold and since >= threshold:
            run = self._new(actor_id, "automatic")
            self.records.save(run, new=True)
            with database_errors():
                self._redis.hset(self._state(actor_id), QUEUED, run.consolidation_id)
            return run, since
        return None, 0

    def _failed(self, run: Consolidation, message: str, outcome: RunOutcome) -> None:
        """Record the failure; arm a retry with backoff until ``MAX_FAILURES``."""
        outcome.outcome = "failed"
        run.failures += 1
        run.status, run.last_error = "failed", message
        run.finished_at = self._clock.now()
        if not any(s.status == "applied" for s in run.steps):
            # Nothing changed: the retry plans afresh. (Once a step applied, it carries on.)
            run.planned_at, run.steps, run.counts = None, [], ConsolidationCounts()
        if run.failures < MAX_FAILURES:
            wait = RETRY_BASE_SECONDS * 2 ** (run.failures - 1)
            run.retry_at = self._clock.now() + timedelta(seconds=wait)
            try:
                self._arm(run.actor_id, wait)
            except AgentMemoryError as exc:
                run.last_error = f"{message} (and the retry could not be scheduled: {exc.message})"
                run.retry_at = None
        self.records.save(run)

    def _plan(self, run: Consolidation, budget: RunBudget, outcome: RunOutcome) -> None:
        """Ask for a plan per related set and keep the checked steps on ``run``, carrying on
        after the sets a run cut short already asked about (``counts.groups``; memories named
        by its steps are not shown again)."""
        assert self._model is not None
        bucket = actor_bucket(run.actor_id)
        named = {m.id for s in run.steps for m in s.before}
        current = [(r, v) for r, v in self.writer.current(bucket) if r.id not in named]
        views = [record_view(r) for r, _ in current]
        system, empty = consolidation_prompt([], self._store.custom_types)
        room = BUDGET_TOKENS - estimate_tokens(system + empty)
        candidates = [
            Candidate(v.id, v.text, vector, estimate_tokens(memory_line(v)) + 1)
            for v, (_, vector) in zip(views, current, strict=True)
        ]
        counts = run.counts
        if not counts.groups:
            counts.examined = len(views)
        for members in related_sets(candidates, room)[counts.groups :]:
            budget.check()
            shown = [views[at] for at in members]
            completion = self._model.complete_json(
                *consolidation_prompt(shown, self._store.custom_types), max_tokens=PLAN_MAX_TOKENS
            )
            counts.groups += 1
            outcome.model_calls += 1
            outcome.input_tokens += completion.input_tokens
            outcome.output_tokens += completion.output_tokens
            run.model_calls += 1
            run.input_tokens += completion.input_tokens
            run.output_tokens += completion.output_tokens
            planned, invalid = PlanAnswer.read(completion.data).steps()
            counts.ignored_invalid += invalid
            self._checked(run, planned, shown, run.steps, counts)
        counts.planned = len(run.steps)

    def _checked(
        self,
        run: Consolidation,
        planned: Sequence[PlannedStep],
        shown: Sequence[MemoryView],
        steps: list[ConsolidationStep],
        counts: ConsolidationCounts,
    ) -> None:
        """Append the steps of ``planned`` that hold (module docstring) to ``steps``."""
        by_id = {m.id: m for m in shown}
        used: set[str] = set()
        types = self._memories.types
        for step in planned:
            ids = step.memories
            if not ids:
                counts.ignored_invalid += 1
            elif any(i not in by_id for i in ids):
                counts.ignored_unknown_ids += 1
            elif any(i in used for i in ids):
                counts.ignored_invalid += 1
            elif step.action == "merge" and len(ids) < 2:
                counts.ignored_merge_of_one += 1
            elif (step.action != "merge" and len(ids) != 1) or (
                step.action != "drop" and step.text is None
            ):
                counts.ignored_invalid += 1
            elif step.text is not None and len(step.text) > MAX_MEMORY_CHARS:
                counts.ignored_too_long += 1
            else:
                used.update(ids)
                steps.append(self._step(run, len(steps), step, [by_id[i] for i in ids], types))

    def _step(
        self,
        run: Consolidation,
        index: int,
        planned: PlannedStep,
        before: Sequence[MemoryView],
        types: Sequence[str],
    ) -> ConsolidationStep:
        after = None
        if planned.action != "drop" and planned.text is not None:
            text, topics = planned.text, planned.topics
            if topics is None:
                topics = list(dict.fromkeys(t for m in before for t in m.topics))[:3]
            if self._store.redact_pii:
                card_runs = self._store.redact_card_digit_runs
                text = redact(text, card_digit_runs=card_runs).text
                topics = [redact(t, card_digit_runs=card_runs).text for t in topics]
            after = StepMemory(
                id=step_memory_id(
                    self._store.incarnation, run.consolidation_id, index, actor_bucket(run.actor_id)
                ),
                text=text,
                type=planned.type if planned.type in types else before[0].type,
                topics=topics,
                updated_at=self._clock.now(),
            )
        reason = planned.reason[:MAX_REASON_CHARS] if planned.reason else None
        return ConsolidationStep(
            index=index,
            action=planned.action,
            reason=reason,
            before=[
                StepMemory(
                    id=m.id, text=m.text, type=m.type, topics=m.topics, updated_at=m.updated_at
                )
                for m in before
            ],
            after=after,
        )

    # --- applying ----------------------------------------------------------------------------

    def _apply_all(self, run: Consolidation, outcome: RunOutcome) -> int:
        """Apply every planned step of ``run`` (new texts embedded in one call); how many
        applied. Steps that no longer hold become conflicts."""
        todo = [s for s in run.steps if s.status == "planned"]
        texts = [s.after.text for s in todo if s.after is not None]
        vectors = iter(self._memories.embed(texts)) if texts else iter(())
        applied = 0
        for step in todo:
            vector = next(vectors) if step.after is not None else None
            problem = self.writer.apply(run, step, vector)
            if problem is None:
                step.status = "applied"
                applied += 1
                outcome.kept += int(step.after is not None)
                outcome.closed += len(step.before)
                counts = run.counts
                if step.action == "merge":
                    counts.merged += len(step.before)
                elif step.action == "update":
                    counts.updated += 1
                else:
                    counts.dropped += 1
            else:
                step.status, step.conflict = "conflict", problem
        run.counts.applied = sum(s.status == "applied" for s in run.steps)
        run.counts.conflicts = sum(s.status == "conflict" for s in run.steps)
        return applied

    def apply(self, consolidation_id: str, actor_ids: Sequence[str] | None) -> RunOutcome:
        """Apply a ``proposed`` run: the steps that still hold; the others become conflicts.
        ``Conflict`` (nothing changed) when the run is not proposed, when no step holds, or
        when a run of the actor is in progress."""
        run = self.get(consolidation_id, actor_ids)
        outcome = RunOutcome(run)
        with self._held(run.actor_id):
            run = self.get(consolidation_id, actor_ids)
            outcome.run = run
            if run.status != "proposed":
                raise Conflict(f"Consolidation '{consolidation_id}' is {run.status}, not proposed.")
            pending = sum(s.status == "planned" for s in run.steps)
            applied = self._apply_all(run, outcome)
            if pending and not applied:
                raise Conflict(
                    f"No step of consolidation '{consolidation_id}' still holds: its memories "
                    "changed since the plan; nothing was applied (discard it, or ask for a new "
                    "run)."
                )
            run.status, run.finished_at = "applied", self._clock.now()
            self.records.save(run)
        return outcome

    def discard(self, consolidation_id: str, actor_ids: Sequence[str] | None) -> Consolidation:
        """Discard a ``proposed`` run (no memory changes); ``Conflict`` for another status."""
        run = self.get(consolidation_id, actor_ids)
        with self._held(run.actor_id):
            run = self.get(consolidation_id, actor_ids)
            if run.status != "proposed":
                raise Conflict(f"Consolidation '{consolidation_id}' is {run.status}, not proposed.")
            run.status, run.finished_at = "discarded", self._clock.now()
            for step in run.steps:
                if step.status == "planned":
                    step.status = "discarded"
            self.records.save(run)
        return run

    def revert(self, consolidation_id: str, actor_ids: Sequence[str] | None) -> RunOutcome:
        """Undo an ``applied`` run in one step (``StepWriter.revert``). ``Conflict`` naming
        the memories that changed since (nothing is written then), or when the run is not
        applied."""
        run = self.get(consolidation_id, actor_ids)
        outcome = RunOutcome(run)
        with self._held(run.actor_id):
            run = self.get(consolidation_id, actor_ids)
            outcome.run = run
            if run.status != "applied":
                raise Conflict(f"Consolidation '{consolidation_id}' is {run.status}, not applied.")
            changed = self.writer.revert(run)
            if changed:
                names = ", ".join(f"'{i}'" for i in changed[:10])
                more = f" and {len(changed) - 10} more" if len(changed) > 10 else ""
                raise Conflict(
                    f"Consolidation '{consolidation_id}' cannot be reverted: memories {names}"
                    f"{more} changed since it ran; nothing was reverted.",
                    details=[{"field": "memories", "problem": f"{i} changed"} for i in changed],
                )
            for step in run.steps:
                if step.status == "applied":
                    step.status = "reverted"
                    outcome.closed += int(step.after is not None)
            run.status = "reverted"
            self.records.save(run)
        return outcome

    def restore(self, memory_id: str) -> tuple[MemoryRecord, str | None]:
        """``StepWriter.restore`` of a version of the store (its actor found by id);
        ``MemoryNotFound`` for none, ``Conflict`` when it is current."""
        bucket = self._memories.reader.owner(memory_id)
        done = self.writer.restore(bucket, memory_id)
        if done is None:
            raise Conflict(f"Memory '{memory_id}' is current: there is nothing to restore.")
        return done

    # --- reading ---------------------------------------------------------------------------

    def get(self, consolidation_id: str, actor_ids: Sequence[str] | None) -> Consolidation:
        """The run, if of one of ``actor_ids`` (None: any actor); ``ConsolidationNotFound``."""
        run = self.records.load(consolidation_id)
        if run is None or (actor_ids is not None and run.actor_id not in actor_ids):
            raise ConsolidationNotFound(consolidation_id)
        return run

    # --- state and lock --------------------------------------------------------------------

    def _state(self, actor_id: str) -> str:
        return self._db.keys.actor(actor_bucket(actor_id)).consolidation

    def _state_del(self, actor_id: str, field: str) -> None:
        with database_errors():
            self._redis.hdel(self._state(actor_id), field)

    def _reset_since(self, actor_id: str, since: int) -> None:
        """Take the count the run answered for off the new-memory count (memories kept during
        the run count towards the next)."""
        with database_errors():
            left = int(self._redis.hincrby(self._state(actor_id), SINCE, -since))
            if left < 0:
                self._redis.hset(self._state(actor_id), SINCE, 0)

    def _arm(self, actor_id: str, seconds: float) -> None:
        due = self._clock.now() + timedelta(seconds=seconds)
        with database_errors():
            self._redis.hset(self._state(actor_id), ARMED, to_ms(due))
        self._scheduler.arm(self.target(actor_id), due)

    @contextmanager
    def _locked(self, actor_id: str) -> Iterator[bool]:
        """Hold the actor's consolidation lock (True) or say another holder has it."""
        key = self._db.keys.actor(actor_bucket(actor_id)).consolidation_lock
        token = secrets.token_hex(8)
        with database_errors():
            held = bool(self._redis.set(key, token, nx=True, ex=LOCK_SECONDS))
        try:
            yield held
        finally:
            if held:
                with database_errors():
                    self._unlock(keys=[key], args=[token])

    @contextmanager
    def _held(self, actor_id: str) -> Iterator[None]:
        """The actor's lock for apply, discard and revert, waited for up to
        ``LOCK_WAIT_SECONDS``; ``Conflict`` when a run keeps it."""
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            with self._locked(actor_id) as held:
                if held:
                    yield
                    return
            if time.monotonic() > deadline:
                raise Conflict(
                    "A consolidation of this actor is in progress; retry when it has finished."
                )
            time.sleep(0.05)
