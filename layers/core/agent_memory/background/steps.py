"""The two steps of a background run on one session, extraction and summarization, and the
session state they share; ``background.SessionWork`` is the run that takes them (lock, quiet
period, outcomes, arming the next run; see its module for the session fields).

Extraction reads the unread messages in chunks (``CHUNK_MESSAGES`` / ``CHUNK_CHARS``), asks the
model for their memories (showing it the actor's related ones), checks the answer's items and
keeps them with ``Memories.add_many``, then moves the cursor (``_ADVANCE``). Summarization folds
the oldest messages into the summary (``_FOLD``), never past the cursor. Each step checks the
run's time (``RUN_BUDGET_SECONDS``) before it calls the model. Separate from ``background``
because these are what a run does with the messages; that module is when and how a run goes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from agent_memory.background.prompts import (
    MAX_KNOWN_MEMORIES,
    MAX_MEMORIES_PER_RUN,
    MAX_MEMORY_CHARS,
    extraction_prompt,
    message_line,
    summary_prompt,
)
from agent_memory.background.scheduler import ExtractionTarget, Scheduler
from agent_memory.clock import Clock, from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.keys import SessionKeys, actor_bucket, actor_tag
from agent_memory.database.scripts import load_script
from agent_memory.errors import ModelAnswerInvalid, ValidationFailed
from agent_memory.memories.models import MAX_TOPIC_CHARS, MAX_TOPICS, MemoryIn
from agent_memory.memories.records import StoredSource
from agent_memory.memories.writes import Memories
from agent_memory.models import UtcDatetime, is_blank
from agent_memory.providers.language_models import Completion, LanguageModel
from agent_memory.sessions.models import Message
from agent_memory.sessions.service import SessionMeta, decode_member, live_meta
from agent_memory.stores.models import StoreConfig

# The background run's one log (``agent_memory.background``), whichever of its modules writes.
logger = logging.getLogger("agent_memory.background")

CHUNK_MESSAGES = 100
CHUNK_CHARS = 40_000
"""One model call reads at most this many messages / characters of message lines as the prompt
shows them (escapes included; at least one message, whose text ``render.quote`` cuts at
``MAX_QUOTED_CHARS``), so a 1,000-message session is extracted and summarized in bounded steps."""
MAX_SUMMARY_CHARS = 8_000
RUN_BUDGET_SECONDS = 110.0
"""No new step starts after a run has worked this long: the function's timeout is 300 s, and a
step (one embedding batch of the messages to find the actor's related memories, a model answer,
asked for at most twice, then one embedding batch of the memories) makes at most four provider
calls of at most 45 s each (``Runtime.background_provider_client``'s deadline): 110 + 180 =
290, which leaves 10 s for the database writes. The run arms its own continuation instead."""
EXTRACTION_MAX_TOKENS = 4_096
SUMMARY_MAX_TOKENS = 2_048

# Every script below takes the session's life (its ``created_at`` when the run began) and does
# nothing when the session now is another one: deleted (only a tombstone left), expired, or
# deleted and started again under the same id while the run worked.

# KEYS: meta. ARGV: expected read_seq, new read_seq, now_ms, life. Moves the extraction cursor
# and clears the pending answer; returns {moved (1/0), caught_up (1/0), expires_at}.
_ADVANCE = """
local read = tonumber(redis.call('HGET', KEYS[1], 'read_seq') or '0')
if read ~= tonumber(ARGV[1]) or redis.call('HGET', KEYS[1], 'created_at') ~= ARGV[4] then
  return {0, 0, 0}
end
redis.call('HSET', KEYS[1], 'read_seq', ARGV[2])
redis.call('HDEL', KEYS[1], 'pending')
local seq = tonumber(redis.call('HGET', KEYS[1], 'seq') or '0')
local caught_up = 0
if seq <= tonumber(ARGV[2]) then caught_up = 1 end
return {1, caught_up, redis.call('HGET', KEYS[1], 'expires_at') or '0'}
"""

# KEYS: meta, messages. ARGV: expected folded_seq, fold_to, summary, life. Replaces the summary
# and removes the folded messages in one step, if nothing else folded meanwhile and extraction
# has read them; returns 1 when done.
_FOLD = """
local folded = tonumber(redis.call('HGET', KEYS[1], 'folded_seq') or '0')
local read = tonumber(redis.call('HGET', KEYS[1], 'read_seq') or '0')
local to = tonumber(ARGV[2])
if folded ~= tonumber(ARGV[1]) or read < to then return 0 end
if redis.call('HGET', KEYS[1], 'created_at') ~= ARGV[4] then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', to)
redis.call('HSET', KEYS[1], 'summary', ARGV[3], 'folded_seq', ARGV[2])
return 1
"""

# KEYS: the store's unread set. ARGV: session id, the expiry the session had when extraction
# caught up. An append after that raised the score (expiries only grow), so it stays.
_CAUGHT_UP = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""

# KEYS: lock. ARGV: token. Releases the lock only if it is still ours.
_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: meta. ARGV: life, 'set' or 'del', then field, value, ... ('set') or fields ('del').
# Changes the session's fields only while it is the same session (see above).
IF_LIVE = """
if redis.call('HGET', KEYS[1], 'created_at') ~= ARGV[1] then return 0 end
local rest = {}
for i = 3, #ARGV do rest[#rest + 1] = ARGV[i] end
if ARGV[2] == 'set' then redis.call('HSET', KEYS[1], unpack(rest))
else redis.call('HDEL', KEYS[1], unpack(rest)) end
return 1
"""


class OutOfTime(Exception):
    """The run's time is up (``RUN_BUDGET_SECONDS``); raised between steps only."""


@dataclass
class RunReport:
    """What one run did; the background handler turns it into metrics and a log line."""

    session_id: str
    outcome: str = "done"
    """``done``, ``rearmed`` (fired before the session was quiet), ``early`` (a run asked for
    nothing while the session's schedule is still to come), ``busy`` (another run has the
    session), ``gone`` (no such session or store), ``no_model`` or ``failed``."""
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

    def count(self, completion: Completion) -> None:
        """Add one model call and its token counts."""
        self.model_calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens


class SessionSteps:
    """The steps of a background run on one session of one store (the base of
    ``background.SessionWork``, which holds the parameters' description), and the session's
    state: its fields change only while it is the session the run began with (``_life``)."""

    _started: float
    """``time.monotonic()`` when the run began (``SessionWork.run`` sets it)."""

    def __init__(
        self,
        client: redis.Redis,
        store: StoreConfig,
        memories: Memories,
        model: LanguageModel | None,
        scheduler: Scheduler,
        clock: Clock,
        target: ExtractionTarget,
    ) -> None:
        self._redis = client
        self._store = store
        self._memories = memories
        self._model = model
        self._scheduler = scheduler
        self._clock = clock
        self._target = target
        self._store_keys = store.keys()
        self._keys: SessionKeys = self._store_keys.session(target.session_id)
        self._advance = load_script(client, _ADVANCE)
        self._fold = load_script(client, _FOLD)
        self._caught_up = load_script(client, _CAUGHT_UP)
        self._unlock = load_script(client, _UNLOCK)
        self._if_live = load_script(client, IF_LIVE)
        self._life = ""  # the session's created_at when the run began

    def _check_time(self) -> None:
        """Raise ``OutOfTime`` once the run has worked ``RUN_BUDGET_SECONDS``: each model call
        has its own budget, and a run of many calls must end inside the function's timeout."""
        if time.monotonic() - self._started > RUN_BUDGET_SECONDS:
            raise OutOfTime

    # --- extraction --------------------------------------------------------------------------

    def _extract(self, upto: int, report: RunReport) -> None:
        """Extract messages up to ``upto`` (inclusive), one chunk (one model call) at a time."""
        while True:
            with database_errors():
                read_raw, seq_raw, summary, pending_raw, actor, created = self._redis.hmget(
                    self._keys.meta,
                    ["read_seq", "seq", "summary", "pending", "actor_id", "created_at"],
                )
            read = int(read_raw or 0)
            pending = json.loads(pending_raw) if pending_raw else None
            if pending is not None and pending.get("from") != read + 1:
                pending = None  # left by a range the cursor has since passed
            if pending is None and read >= min(upto, int(seq_raw or 0)):
                return
            if pending is not None:
                first, last, items = pending["from"], pending["to"], pending["memories"]
                report.read_messages += last - read
            else:
                chunk = self._chunk(read, min(upto, int(seq_raw or 0)))
                if not chunk:
                    return
                first, last = read + 1, chunk[-1].seq
                items = self._ask_for_memories(chunk, _text(summary), _text(actor), report)
                if not self._set_field("pending", _dump({"from": first, "to": last,
                                                          "memories": items})):  # fmt: skip
                    return  # the session is gone
                report.read_messages += len(chunk)
            self._keep(items, _text(actor), (str(created), first, last), report)
            with database_errors():
                moved, caught_up, expires = self._advance(
                    keys=[self._keys.meta], args=[read, last, to_ms(self._now()), self._life]
                )
                if int(moved) and int(caught_up):
                    self._caught_up(
                        keys=[self._store_keys.unread_sessions],
                        args=[self._target.session_id, expires],
                    )
            if not int(moved):
                return  # deleted, or another run moved the cursor: stop here

    def _chunk(self, read: int, upto: int) -> list[Message]:
        """The messages after ``read`` up to ``upto`` that one model call reads (at most
        ``CHUNK_MESSAGES``, and ``CHUNK_CHARS`` of message lines as the prompt shows them, with
        their escapes: at least one, which ``render.quote`` bounds); empty when none."""
        with database_errors():
            members = self._redis.zrangebyscore(
                self._keys.messages, f"({read}", upto, start=0, num=CHUNK_MESSAGES
            )
        messages = [decode_member(str(m)) for m in members]
        picked: list[Message] = []
        chars = 0
        for message in messages:
            chars += len(message_line(message)) + 1
            if picked and chars > CHUNK_CHARS:
                break
            picked.append(message)
        return picked

    def _ask_for_memories(
        self,
        messages: Sequence[Message],
        summary: str | None,
        actor: str | None,
        report: RunReport,
    ) -> list[dict[str, Any]]:
        """Ask the model for the memories of ``messages``, showing it the actor's current
        memories most related to them (``Memories.related``, at most ``MAX_KNOWN_MEMORIES``)
        with their ids; the answer's items, checked: ``supersedes`` only when it names a memory
        shown (and no earlier item named it), ``occurred_at`` as ms when it is an ISO 8601 date
        or time (else dropped), ``messages`` only the numbers among those read."""
        assert self._model is not None
        self._check_time()
        known = self._memories.related(actor, [m.content for m in messages], MAX_KNOWN_MEMORIES)
        system, user = extraction_prompt(messages, summary, self._store.custom_types, known)
        completion = self._model.complete_json(system, user, max_tokens=EXTRACTION_MAX_TOKENS)
        report.count(completion)
        listed = completion.data.get("memories")
        if not isinstance(listed, list):
            raise ModelAnswerInvalid(
                "The model's answer has no 'memories' list (expected "
                '{"memories": [{"text", "type", "topics", "occurred_at"?, "supersedes"?}]}).'
            )
        items = []
        allowed = self._memories.types
        shown = {m.id for m in known}
        replaced: set[str] = set()
        read = {m.seq for m in messages}
        not_shown = 0
        report.dropped += max(0, len(listed) - MAX_MEMORIES_PER_RUN)
        for item in listed[:MAX_MEMORIES_PER_RUN]:
            text = item.get("text") if isinstance(item, dict) else item
            if not isinstance(text, str) or is_blank(text):
                report.dropped += 1
                continue
            fields = item if isinstance(item, dict) else {}
            kind = fields.get("type")
            supersedes = fields.get("supersedes")
            if supersedes is not None and (supersedes not in shown or supersedes in replaced):
                not_shown += 1
                supersedes = None
            if supersedes is not None:
                replaced.add(supersedes)
            items.append(
                {
                    "text": text.strip()[:MAX_MEMORY_CHARS],
                    # A type the store does not have (models invent "preference") is kept as
                    # the general kind rather than lost.
                    "type": kind if kind in allowed else "semantic",
                    "topics": _topics(fields.get("topics")),
                    "supersedes": supersedes,
                    "occurred_at": _moment(fields.get("occurred_at")),
                    "messages": _seqs(fields.get("messages"), read),
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
        return items

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
            sources.append(StoredSource(session_id=self._target.session_id, first_seq=first,
                                        last_seq=last, seqs=seqs))  # fmt: skip
        for kept in self._memories.add_many(bodies, sources, ids):
            if kept.duplicate:
                report.deduplicated += 1
            else:
                report.kept += 1
                report.redacted += sum(kept.redactions.values())
                report.superseded += kept.superseded is not None
            if kept.supersede_refused is not None:
                report.ignored_supersedes += 1

    def _memory_id(self, source: tuple[str, int, int], index: int, bucket: str) -> str:
        """The id of the ``index``-th memory one extraction call kept from ``source``: the same
        whenever the call is made again, and carrying the actor's tag (``keys.actor_tag``)."""
        started, first, last = source
        seed = "\x00".join(
            [self._store.incarnation, self._target.session_id, started, str(first), str(last),
             str(index)]
        )  # fmt: skip
        return "mem_" + actor_tag(bucket) + hashlib.sha256(seed.encode()).hexdigest()[:16]

    # --- summarization -----------------------------------------------------------------------

    def _summarize(self, report: RunReport) -> None:
        """Fold the oldest ``verbatim - keep_recent`` messages (as counted now) into the
        summary, in chunks of at most ``CHUNK_MESSAGES`` / ``CHUNK_CHARS``, each one model call
        given the summary so far. Messages appended meanwhile stay verbatim."""
        with database_errors():
            seq_raw, folded_raw = self._redis.hmget(self._keys.meta, ["seq", "folded_seq"])
        seq, folded = int(seq_raw or 0), int(folded_raw or 0)
        if seq - folded <= self._store.summarize_after:
            return
        target = seq - self._store.keep_recent
        self._extract(target, report)  # never fold what extraction has not read
        while folded < target:
            with database_errors():
                summary = self._redis.hget(self._keys.meta, "summary")
            chunk = self._chunk(folded, target)
            if not chunk:
                return
            last = chunk[-1].seq
            assert self._model is not None
            self._check_time()
            system, user = summary_prompt(chunk, _text(summary))
            completion = self._model.complete_json(system, user, max_tokens=SUMMARY_MAX_TOKENS)
            report.count(completion)
            new_summary = completion.data.get("summary")
            if not isinstance(new_summary, str) or not new_summary.strip():
                raise ModelAnswerInvalid(
                    'The model\'s answer has no "summary" text (expected {"summary": "..."}).'
                )
            with database_errors():
                done = self._fold(
                    keys=[self._keys.meta, self._keys.messages],
                    args=[folded, last, new_summary.strip()[:MAX_SUMMARY_CHARS], self._life],
                )
            if not int(done):
                return  # deleted, or another run folded meanwhile
            report.folded_messages += last - folded
            folded = last

    # --- session state -----------------------------------------------------------------------

    def _meta(self) -> SessionMeta | None:
        with database_errors():
            raw = self._redis.hgetall(self._keys.meta)
        fields = {str(k): str(v) for k, v in raw.items()}
        return live_meta(self._target.session_id, fields, to_ms(self._now()))

    def _set_field(self, *pairs: str) -> bool:
        with database_errors():
            args = [self._life, "set", *pairs]
            return bool(self._if_live(keys=[self._keys.meta], args=args))

    def _hdel(self, *fields: str) -> None:
        with database_errors():
            self._if_live(keys=[self._keys.meta], args=[self._life, "del", *fields])

    def _now(self) -> datetime:
        return self._clock.now()


def _text(value: object) -> str | None:
    """A text field of a hash read with a ``str`` client (None when absent or empty)."""
    return str(value) if value else None


def _topics(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    topics = []
    for topic in value:
        if isinstance(topic, str) and topic.strip():
            topics.append(topic.strip().lower()[:MAX_TOPIC_CHARS])
    return topics[:MAX_TOPICS]


_MOMENT: TypeAdapter[Any] = TypeAdapter(UtcDatetime)


def _moment(value: object) -> int | None:
    """An answer's ``occurred_at`` as ms: an ISO 8601 date (midnight UTC) or date and time
    between 1900 and 9000 (``models.UtcDatetime``); anything else is no date (None)."""
    if not isinstance(value, str):
        return None
    try:
        return to_ms(_MOMENT.validate_python(value.strip()))
    except PydanticValidationError:
        return None


def _seqs(value: object, read: set[int]) -> list[int] | None:
    """An answer's ``messages``: the numbers among the messages read, in order, once each;
    None when it names none of them."""
    if not isinstance(value, list):
        return None
    seqs = sorted(
        {n for n in value if isinstance(n, int) and not isinstance(n, bool) and n in read}
    )
    return seqs or None


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
