"""What a background run reports, and how long it may work.

A run starts no new step (a model call) after its budget: the background function's remaining
time as Lambda reports it, less what one step may still take (``STEP_RESERVE_SECONDS``). A
step is one embedding batch of the messages to find the actor's related memories, a model
answer (asked for at most twice), then one embedding batch of the memories: at most four
provider calls of at most 45 s each (``edge.runtime.Runtime.background_provider_client``'s
deadline), 180 s, and 10 s for the database writes. With the function's 300 s timeout
(template.yaml) that leaves 110 s; a run out of time arms its own continuation instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_memory.providers.language_models import Completion

STEP_RESERVE_SECONDS = 190.0
"""What one step may take once it has started: four provider calls of 45 s and 10 s of
database writes."""
RUN_BUDGET_SECONDS = 110.0
"""The budget of a run when no remaining time is known (a caller outside Lambda): the 300 s
timeout less ``STEP_RESERVE_SECONDS``."""


class OutOfTime(Exception):
    """The run's time is up (``RunBudget``); raised between steps only."""


class RunBudget:
    """The time a run may start new steps in: ``seconds`` from now (``time.monotonic``)."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    @classmethod
    def from_remaining(cls, remaining_ms: int | None) -> RunBudget:
        """The budget of a run with ``remaining_ms`` left before the function's timeout
        (``LambdaContext.get_remaining_time_in_millis``): that, less ``STEP_RESERVE_SECONDS``
        (none left: the run starts no step and arms its continuation); ``RUN_BUDGET_SECONDS``
        when unknown (None)."""
        if remaining_ms is None:
            return cls(RUN_BUDGET_SECONDS)
        return cls(remaining_ms / 1000 - STEP_RESERVE_SECONDS)

    @property
    def ends_at(self) -> float:
        """When the function's time is up (``time.monotonic``): the budget plus what a step
        may still take; a run keeps trying to record its outcome until then."""
        return self._deadline + STEP_RESERVE_SECONDS

    def check(self) -> None:
        """``OutOfTime`` once the budget is spent: each model call has its own deadline, and a
        run of many calls must end inside the function's timeout."""
        if time.monotonic() > self._deadline:
            raise OutOfTime


@dataclass
class RunReport:
    """What one run did; the background handler turns it into metrics and a log line."""

    session_id: str
    outcome: str = "done"
    """``done``, ``rearmed`` (fired before the session was quiet), ``early`` (a run asked for
    nothing while the session's schedule is still to come), ``busy`` (another run has the
    session), ``gone`` (no such session or store), ``no_model``, ``continued`` (out of time,
    its continuation armed) or ``failed``."""
    read_messages: int = 0
    kept: int = 0
    deduplicated: int = 0
    redacted: int = 0
    folded_messages: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    schedule_calls: int = 0
    error: str | None = None
    rearmed_for: datetime | None = None
    dropped: int = 0
    """Items of a model answer that were not memories (no text) and were skipped."""
    superseded: int = 0
    """Memories kept that replaced a memory the model named (``supersedes``)."""
    ignored_supersedes: int = 0
    """``supersedes`` of an answer that named no memory shown to the model (or one another
    item of the same answer already replaced), or that could not be honoured at keep time
    (the memory was gone or replaced meanwhile): the item was kept as a plain memory."""

    profile_updated: int = 0
    """Fields of the actor's profile that extraction set to a new value."""
    profile_dropped: int = 0
    """Values of an answer's ``profile`` left out: a field the store does not declare, a value
    not of its field's type, or a ``profile`` that is not an object."""

    extraction_runs: int = 0
    """1 when the run read messages for extraction."""
    summarization_runs: int = 0
    """1 when the run folded messages into the summary."""
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list, repr=False)
    """The webhook events of what the run kept (``webhooks.events.kept_events``); memory
    texts, so never logged."""

    def count(self, completion: Completion) -> None:
        """Add one model call and its token counts."""
        self.model_calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
