"""Extraction: the unread messages of a session become long-term memories of its actor.

The unread messages are read in chunks (``session_state.CHUNK_MESSAGES`` / ``CHUNK_CHARS``), one
model call each, the model shown the actor's related memories with their ids (``Memories.related``);
the answer (``background.prompts.ExtractionAnswer``) is checked item by item, kept as the session's
``pending`` answer, then kept with ``Memories.add_many`` (redacted, embedded, deduplicated), and
only then does the cursor (``read_seq``) move (``sessions.scripts.ADVANCE``). A run that fails after
the model answered keeps ``pending`` and, run again, keeps those memories under the same ids instead
of asking again, so extracting the same messages twice can never keep a memory twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agent_memory.background.prompts import (
    MAX_KNOWN_MEMORIES,
    ExtractionAnswer,
    Steering,
    extraction_prompt,
    profile_answer,
)
from agent_memory.background.runs import RunBudget, RunReport
from agent_memory.background.session_state import SessionState
from agent_memory.clock import from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import actor_bucket, actor_tag
from agent_memory.database.scripts import load_script
from agent_memory.errors import ValidationFailed
from agent_memory.memories.models import MemoryIn
from agent_memory.memories.profile_models import ProfileSource, ProfileValue
from agent_memory.memories.profiles import Profiles
from agent_memory.memories.records import StoredSource
from agent_memory.memories.service import Memories
from agent_memory.observability import logger
from agent_memory.providers.language_models import LanguageModel
from agent_memory.sessions import scripts
from agent_memory.sessions.models import Message
from agent_memory.sessions.records import SessionFields
from agent_memory.stores.models import StoreConfig
from agent_memory.webhooks.events import kept_events

EXTRACTION_MAX_TOKENS = 4_096


class Extraction:
    """The extraction step of a run on ``state``'s session, with the store's ``memories`` and
    language ``model``, within ``budget``. Errors: ``ModelAnswerInvalid``, ``ValidationFailed``
    (a store without an embedding model), provider and database errors."""

    def __init__(
        self,
        state: SessionState,
        store: StoreConfig,
        memories: Memories,
        model: LanguageModel,
        budget: RunBudget,
    ) -> None:
        self._state = state
        self._store = store
        self._memories = memories
        self._profiles = Profiles(memories.db)
        self._model = model
        self._budget = budget
        self._advance = load_script(state.client, scripts.ADVANCE)
        self._caught_up = load_script(state.client, scripts.CAUGHT_UP)

    def extract(self, upto: int, report: RunReport) -> None:
        """Extract messages up to ``upto`` (inclusive), one chunk (one model call) at a time."""
        state = self._state
        while True:
            record = state.record(
                SessionFields.read_seq,
                SessionFields.seq,
                SessionFields.summary,
                SessionFields.pending,
                SessionFields.actor_id,
                SessionFields.created_at,
            )
            read = record.read_seq
            pending = json.loads(record.pending) if record.pending else None
            if pending is not None and pending.get("from") != read + 1:
                pending = None  # left by a range the cursor has since passed
            if pending is None and read >= min(upto, record.seq):
                return
            if pending is not None:
                first, last, items = pending["from"], pending["to"], pending["memories"]
                profile = pending.get("profile") or {}
                report.read_messages += last - read
            else:
                chunk = state.chunk(read, min(upto, record.seq))
                if not chunk:
                    return
                first, last = read + 1, chunk[-1].seq
                items, profile = self._ask(chunk, record.summary, record.actor_id, report)
                answer = _dump({"from": first, "to": last, "memories": items, "profile": profile})
                if not state.set_field(SessionFields.pending, answer):
                    return  # the session is gone
                report.read_messages += len(chunk)
            self._keep(items, record.actor_id, (str(record.created_at), first, last), report)
            self._keep_profile(profile, record.actor_id, (first, last), report)
            with database_errors():
                moved, caught_up, expires = self._advance(
                    keys=[state.keys.meta], args=[read, last, to_ms(state.now()), state.life]
                )
                if int(moved) and int(caught_up):
                    self._caught_up(
                        keys=[state.store_keys.unread_sessions],
                        args=[state.session_id, expires],
                    )
            if not int(moved):
                return  # deleted, or another run moved the cursor: stop here

    def _ask(
        self,
        messages: Sequence[Message],
        summary: str | None,
        actor: str | None,
        report: RunReport,
    ) -> tuple[list[dict[str, Any]], dict[str, ProfileValue]]:
        """Ask the model for the memories of ``messages``, showing it the actor's current
        memories most related to them (``Memories.related``, at most ``MAX_KNOWN_MEMORIES``)
        with their ids, the store's steering (``prompts.Steering``: instructions, examples,
        profile fields) and the actor's profile as known now; the answer's items, checked
        (``ExtractionAnswer``): ``supersedes`` only when it names a memory shown (and no earlier
        item named it), ``messages`` only the numbers among those read, a type the store does
        not have as ``semantic``; and its profile values, checked (``prompts.profile_answer``;
        none for a session without an actor)."""
        self._budget.check()
        known = self._memories.related(actor, [m.content for m in messages], MAX_KNOWN_MEMORIES)
        fields = self._store.profile_fields if actor is not None else []
        now = self._profiles.read(actor) if fields and actor is not None else {}
        steering = Steering.of(self._store, {name: e.value for name, e in now.items()})
        if not fields:
            steering = replace(steering, profile_fields=())
        system, user = extraction_prompt(
            messages, summary, self._store.custom_types, known, steering
        )
        completion = self._model.complete_json(system, user, max_tokens=EXTRACTION_MAX_TOKENS)
        report.count(completion)
        extracted, dropped = ExtractionAnswer.read(completion.data).items()
        report.dropped += dropped
        profile, dropped_values = profile_answer(completion.data, fields)
        report.profile_dropped += dropped_values
        allowed = self._memories.types
        shown = {m.id for m in known}
        replaced: set[str] = set()
        read = {m.seq for m in messages}
        not_shown = 0
        items = []
        for memory in extracted:
            supersedes = memory.supersedes
            if supersedes is not None and (supersedes not in shown or supersedes in replaced):
                not_shown += 1
                supersedes = None
            if supersedes is not None:
                replaced.add(supersedes)
            seqs = [n for n in memory.messages or () if n in read]
            items.append(
                {
                    "text": memory.text,
                    # A type the store does not have (models invent "preference") is kept as
                    # the general kind rather than lost.
                    "type": memory.type if memory.type in allowed else "semantic",
                    "topics": memory.topics,
                    "supersedes": supersedes,
                    "occurred_at": memory.occurred_at,
                    "messages": seqs or None,
                }
            )
        if not_shown:
            # Counts only: the answer may hold the conversation's text.
            logger.warning(
                "extraction answer named memories to supersede that were not shown to it "
                "(or twice); those items were kept as plain memories",
                extra={"ignored_supersedes": not_shown},
            )
            report.ignored_supersedes += not_shown
        return items, profile

    def _keep_profile(
        self,
        values: dict[str, ProfileValue],
        actor: str | None,
        read: tuple[int, int],
        report: RunReport,
    ) -> None:
        """Set the profile values of one extraction call (``Profiles.change``, by
        ``extraction`` of this session's messages ``read``, first to last), counted and told
        (``profile.updated``) when some changed; nothing for a session without an actor."""
        if not values or actor is None:
            return
        first, last = read
        source = ProfileSource(
            by="extraction", session_id=self._state.session_id, first_seq=first, last_seq=last
        )
        changed = self._profiles.change(actor, values, source)
        if changed:
            report.profile_updated += len(changed)
            report.events.append(
                ("profile.updated", {"actor_id": actor, "fields": changed, "by": "extraction"})
            )

    def _keep(
        self,
        items: Sequence[dict[str, Any]],
        actor: str | None,
        source: tuple[str, int, int],
        report: RunReport,
    ) -> None:
        """Keep the memories of the messages ``source`` names (the session's ``created_at``,
        first and last message) with ``Memories.add_many``: redacted, embedded in one batch,
        each deduplicated against the actor's memories, including the ones kept just before it,
        under ids derived from the session, its start and the range (a session deleted and
        started again under the same id starts anew, and so gets other ids). An item that is
        not a valid memory (``MemoryIn``) is dropped and counted, never retried."""
        if not items:
            return
        if self._store.embed_provider == "none":
            raise ValidationFailed(
                "Extracted memories must be embedded and this store has no embedding model; "
                "set embed_provider ('openai' or 'custom') on the store."
            )
        bodies, ids, sources = [], [], []
        _, first, last = source
        for index, item in enumerate(items):
            occurred = item.get("occurred_at")
            try:
                body = MemoryIn(
                    text=item["text"],
                    type=item["type"],
                    topics=item["topics"],
                    actor_id=actor,
                    supersedes=item.get("supersedes"),
                    occurred_at=from_ms(occurred) if occurred is not None else None,
                )
            except PydanticValidationError:
                report.dropped += 1
                continue
            bodies.append(body)
            ids.append(self._memory_id(source, index, actor_bucket(actor)))
            seqs = item.get("messages")
            sources.append(
                StoredSource(
                    session_id=self._state.session_id, first_seq=first, last_seq=last, seqs=seqs
                )
            )
        for kept in self._memories.add_many(bodies, sources, ids):
            if kept.duplicate:
                report.deduplicated += 1
            else:
                report.kept += 1
                report.redacted += sum(kept.redactions.values())
                report.superseded += kept.superseded is not None
                report.events.extend(kept_events(kept.memory, kept.superseded))
            if kept.supersede_refused is not None:
                report.ignored_supersedes += 1

    def _memory_id(self, source: tuple[str, int, int], index: int, bucket: str) -> str:
        """The id of the ``index``-th memory one extraction call kept from ``source``: the same
        whenever the call is made again, and carrying the actor's tag
        (``database.keys.actor_tag``)."""
        started, first, last = source
        seed = "\x00".join(
            [
                self._store.incarnation,
                self._state.session_id,
                started,
                str(first),
                str(last),
                str(index),
            ]
        )
        return "mem_" + actor_tag(bucket) + hashlib.sha256(seed.encode()).hexdigest()[:16]


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
