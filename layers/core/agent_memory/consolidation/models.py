"""A consolidation run as kept and as clients see it (one schema: the record is the view),
and the answers of the consolidation routes.

A run is kept in its actor's slot (``database.keys.ActorKeys.consolidations``: run id ->
``Consolidation`` JSON), so that forgetting the actor forgets its runs in the same place,
and listed store-wide through ``StoreKeys.consolidations``.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Literal

from pydantic import Field

from agent_memory.database.keys import actor_tag
from agent_memory.models import View, said

ConsolidationStatus = Literal[
    "queued", "running", "proposed", "applied", "discarded", "failed", "reverted"
]
CONSOLIDATION_STATUSES: tuple[str, ...] = (
    "queued",
    "running",
    "proposed",
    "applied",
    "discarded",
    "failed",
    "reverted",
)
StepAction = Literal["merge", "update", "drop"]
StepStatus = Literal["planned", "applied", "conflict", "discarded", "reverted"]
CONSOLIDATION_ID_PATTERN = said(
    r"^con_[0-9a-f]{20}$", "a consolidation id: 'con_' and 20 lower-case hexadecimal digits"
)


def new_consolidation_id(bucket: str) -> str:
    """``con_``, the actor bucket's tag (4 hex digits, ``database.keys.actor_tag``) and 16
    random hex digits."""
    return "con_" + actor_tag(bucket) + secrets.token_hex(8)


class StepMemory(View):
    """One memory a step reads or writes: its id, text, type and topics, and when that
    version was last changed (a step whose memory changed since is a conflict)."""

    id: str
    text: str
    type: str
    topics: list[str] = Field(default_factory=list)
    updated_at: datetime


class ConsolidationStep(View):
    """One change of a plan: ``merge`` (``before``, two or more, become ``after``),
    ``update`` (one becomes ``after``) or ``drop`` (one is retired, no ``after``)."""

    index: int
    action: StepAction
    status: StepStatus = "planned"
    reason: str | None = None
    before: list[StepMemory]
    after: StepMemory | None = None
    conflict: str | None = Field(
        None, description="Why the step did not apply (its memories changed since the plan)."
    )


class ConsolidationCounts(View):
    """What a run read, planned and did, and what of the model's plan it ignored."""

    examined: int = Field(0, description="Current memories of the actor the run read.")
    groups: int = Field(0, description="Related sets sent to the model (one call each).")
    planned: int = 0
    applied: int = 0
    conflicts: int = 0
    merged: int = Field(0, description="Memories replaced by merges.")
    updated: int = 0
    dropped: int = 0
    ignored_unknown_ids: int = Field(
        0, description="Steps naming an id not shown in that set (another actor's included)."
    )
    ignored_merge_of_one: int = 0
    ignored_too_long: int = Field(0, description="Steps whose text is over the memory limit.")
    ignored_invalid: int = Field(
        0, description="Steps that were not steps, lacked a text, or named an id twice."
    )


class ConsolidationSummary(View):
    """A run without its steps (what the listing shows)."""

    consolidation_id: str
    actor_id: str
    status: ConsolidationStatus
    trigger: Literal["request", "automatic"]
    mode: Literal["apply", "review"]
    created_at: datetime
    started_at: datetime | None = None
    planned_at: datetime | None = Field(None, description="When the plan was complete.")
    finished_at: datetime | None = None
    last_error: str | None = None
    failures: int = 0
    retry_at: datetime | None = Field(None, description="When a failed run is tried again.")
    counts: ConsolidationCounts = Field(default_factory=ConsolidationCounts)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    budget_tokens: int = Field(0, description="The prompt budget of one model call (tokens).")


class Consolidation(ConsolidationSummary):
    """A run with its steps, each with the memories before and after."""

    steps: list[ConsolidationStep] = Field(default_factory=list)

    def summary(self) -> ConsolidationSummary:
        """The run without its steps."""
        return ConsolidationSummary.model_validate(self.model_dump(exclude={"steps"}))


class ConsolidationQueued(View):
    """Answer of ``POST .../actors/{actor_id}/consolidate`` (202)."""

    consolidation_id: str
    status: ConsolidationStatus = "queued"


class ConsolidationList(View):
    """A page of the store's runs, newest first (``GET .../consolidations``)."""

    consolidations: list[ConsolidationSummary]
    offset: int
    limit: int
    next_offset: int | None = None
