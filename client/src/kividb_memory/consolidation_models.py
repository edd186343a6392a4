"""A consolidation run as the client reads it (``POST .../actors/{actor}/consolidate``,
``GET .../consolidations`` and ``.../consolidations/{id}``, and the answers of apply, discard
and revert; docs/consolidation.md); the conventions of ``kividb_memory.models`` hold (it
re-exports these)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from kividb_memory.model_bases import Answer

ConsolidationStatus = Literal[
    "queued", "running", "proposed", "applied", "discarded", "failed", "reverted"
]
"""Where a run is: ``proposed`` waits for apply or discard (a store in review mode)."""
StepAction = Literal["merge", "update", "drop"]
StepStatus = Literal["planned", "applied", "conflict", "discarded", "reverted"]


class StepMemory(Answer):
    """One memory a step reads or writes: its id, text, type, topics and when that version
    was last changed."""

    id: str
    text: str
    type: str
    topics: list[str] = Field(default_factory=list)
    updated_at: datetime


class ConsolidationStep(Answer):
    """One change of a plan: ``merge`` (``before``, two or more, become ``after``), ``update``
    (one becomes ``after``) or ``drop`` (one is retired, no ``after``); ``conflict`` says why
    it did not apply."""

    index: int
    action: StepAction
    status: StepStatus = "planned"
    reason: str | None = None
    before: list[StepMemory]
    after: StepMemory | None = None
    conflict: str | None = None


class ConsolidationCounts(Answer):
    """What a run read (``examined`` memories, ``groups`` = model calls), planned and did, and
    what of the model's plan it ignored."""

    examined: int = 0
    groups: int = 0
    planned: int = 0
    applied: int = 0
    conflicts: int = 0
    merged: int = 0
    updated: int = 0
    dropped: int = 0
    ignored_unknown_ids: int = 0
    ignored_merge_of_one: int = 0
    ignored_too_long: int = 0
    ignored_invalid: int = 0


class ConsolidationSummary(Answer):
    """A run without its steps (what ``list_consolidations`` gives): status, counts, model
    calls and tokens (``budget_tokens``: the prompt budget of one call)."""

    consolidation_id: str
    actor_id: str
    status: ConsolidationStatus
    trigger: Literal["request", "automatic"]
    mode: Literal["apply", "review"]
    created_at: datetime
    started_at: datetime | None = None
    planned_at: datetime | None = None
    finished_at: datetime | None = None
    last_error: str | None = None
    failures: int = 0
    retry_at: datetime | None = None
    counts: ConsolidationCounts = Field(default_factory=ConsolidationCounts)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    budget_tokens: int = 0


class Consolidation(ConsolidationSummary):
    """A run with its steps, each with the memories before and after."""

    steps: list[ConsolidationStep] = Field(default_factory=list)


class ConsolidationQueued(Answer):
    """Answer of ``consolidate``: the run queued (or the one already queued or running)."""

    consolidation_id: str
    status: ConsolidationStatus = "queued"


class ConsolidationList(Answer):
    """A page of the store's runs, newest first; ``next_offset`` is None on the last page."""

    consolidations: list[ConsolidationSummary]
    offset: int
    limit: int
    next_offset: int | None = None
