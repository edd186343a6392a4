"""Export and import of a store's sessions, losslessly, for moving a store to another database
(``tools/transfer.py`` over the public API; docs/routes.md, "Export and import"). Its sibling
``memories.transfer`` moves the store's memories; the two share nothing but the cursor check
(``int_cursor``, here) and the rules below.

Export reads what is kept as it is kept: a session's whole state (its messages with their
sequence numbers, summary, extraction cursor and outcome). Import writes that state back under
the same ids, sequence numbers and times. Both are paged:

- ``SessionTransfer.ids`` pages the store's live session ids (ZSCAN of the expiry index: a
  session live for the whole listing is listed at least once; the tool drops repeats);
  ``export`` pages one session's messages by sequence number, each page within the answer's
  byte budget (``answers``); ``import_page`` writes one page.

Each page is one moment; a session written between its pages is whole as the last page's
state with the messages of every page after its ``folded_seq`` and up to its
``message_count`` (``tools/transfer_export.py`` assembles it so). An import checks every cursor,
sequence and time against the rest of the session, and ``pending`` against what background
extraction writes (``PendingAnswer``): a session imported is one that extraction can go on
with.

Import is idempotent: a session page written twice is kept once (a message is its sequence
number and content), and it never moves a session back (a counter or cursor only grows; a
summary, a pending answer and the extraction outcome are taken only from a state at least as
far as the one kept). It refuses (409) a session id that another session holds in the target
store, or a sequence number that holds another message there. Nothing is re-derived.

Keys: the same as the routes that write (``database/keys.py``); every script touches one slot, the
session's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from agent_memory.answers import DEFAULT_ANSWER_BUDGET, surely_fits, wire_bytes
from agent_memory.clock import from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.cursors import scan_cursor
from agent_memory.database.scripts import load_script
from agent_memory.errors import ActorMismatch, Conflict, SessionNotFound, ValidationFailed
from agent_memory.models import (
    EARLIEST,
    LATEST,
    MAX_MESSAGE_CHARS,
    MAX_RECENT,
    MEMORY_ID_PATTERN,
    ActorId,
    Model,
    UtcDatetime,
    View,
    problem_in_words,
)
from agent_memory.sessions import scripts
from agent_memory.sessions.models import MessageItem, Role, SpeakerName
from agent_memory.sessions.records import encode_message, live_meta, member_fields, message_member
from agent_memory.sessions.service import TOUCH_PRUNE_BATCH
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import (
    IMPORT_CLOCK_SKEW_SECONDS,
    MAX_SESSION_TTL_SECONDS,
)

MAX_EXPORT_MESSAGES = MAX_RECENT
"""Messages per session export page (1,000)."""
MAX_IMPORT_MESSAGES = 200
"""Messages per session import call: 200 of the longest (32,000 characters) are over the 1 MiB
body limit anyway, and the bound keeps the body of any one refused field under it, so that
a body that breaks it is a 422 naming the field, not a 413."""
MAX_SEQ = 10**15
"""The largest sequence number (and so ``message_count``, ``read_seq``, ``folded_seq``) an
import takes. The scripts hold a sequence number as a Lua number (a double) and as a sorted-set
score, exact up to 2**53 (about 9.007e15): this leaves room for the appends after it. A larger
one was kept as given, answered as -9223372036854775808, and made the session's next append a
500 (``HINCRBY`` of a count out of range)."""
MAX_SUMMARY_CHARS = 8_000
MAX_ERROR_CHARS = 2_000
MAX_PENDING_CHARS = 256_000
"""A pending extraction answer (the model's memories not all kept yet), as the session keeps
it: JSON of at most ``background.prompts.MAX_MEMORIES_PER_RUN`` (50) items of at most
``background.prompts.MAX_MEMORY_CHARS`` (2,000) characters of text and their topics, about 150,000
characters at most; the bound keeps a body that passes it well under the 1 MiB limit."""
MESSAGE_OVERHEAD_CHARS = 16
"""What an exported message holds besides its stored JSON (its sequence number and field
names, about 130 bytes as carried with the rest), counted as characters of text for
``answers.surely_fits``, which allows ``answers.MAX_EXPANSION`` bytes for each."""
PENDING_MEMORIES = 50
"""The most items a pending answer holds: ``background.prompts.MAX_MEMORIES_PER_RUN`` (this
package may not import ``background``; a unit test checks they agree)."""
PENDING_MEMORY_CHARS = 2_000
"""The longest text of a pending item: ``background.prompts.MAX_MEMORY_CHARS``."""
PENDING_TOPICS = 10
"""The most topics of a pending item: ``memories.models.MAX_TOPICS``."""
PENDING_TOPIC_CHARS = 64
"""The longest topic of a pending item: ``memories.models.MAX_TOPIC_CHARS``."""
PENDING_TYPE_CHARS = 40
"""The longest type name of a pending item (a store's custom type names are at most 40)."""


# --- models ------------------------------------------------------------------------------------


class SessionIdPage(View):
    """A page of the store's live session ids (in no order); ``next_cursor`` is null on the last
    page. A session live for the whole listing is on some page; one may be on two."""

    session_ids: list[str]
    next_cursor: str | None


class ExportedMessage(View):
    """A message as the session keeps it, with its sequence number."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime
    item: dict[str, Any] | None = None


class SessionExport(View):
    """A session's whole state and a page of its messages (those after ``after_seq``, oldest
    first). Messages up to ``folded_seq`` are in ``summary`` and no longer kept one by one;
    ``read_seq`` is how far extraction has read; ``failures``, ``last_error``, ``last_run_at``
    the outcome of its runs; ``pending`` an extraction answer not all kept yet (JSON, as kept).
    ``next_after_seq`` is the ``after_seq`` of the next page, null on the last."""

    session_id: str
    actor_id: str | None
    summary: str | None
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    read_seq: int
    folded_seq: int
    failures: int
    last_error: str | None
    last_run_at: datetime | None
    pending: str | None
    messages: list[ExportedMessage]
    next_after_seq: int | None


class PendingMemory(BaseModel):
    """One item of a pending extraction answer, as ``background.extraction`` writes it: the
    text (stripped, at most ``PENDING_MEMORY_CHARS``), the type, the topics, the memory it
    supersedes, when it happened (ms) and the messages it comes from (within the answer's
    ``from`` to ``to``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: Annotated[str, StringConstraints(min_length=1, max_length=PENDING_MEMORY_CHARS)]
    type: Annotated[str, StringConstraints(min_length=1, max_length=PENDING_TYPE_CHARS)]
    topics: list[
        Annotated[str, StringConstraints(min_length=1, max_length=PENDING_TOPIC_CHARS)]
    ] = Field(max_length=PENDING_TOPICS)
    supersedes: Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)] | None = None
    occurred_at: int | None = Field(None, ge=to_ms(EARLIEST), lt=to_ms(LATEST))
    messages: list[Annotated[int, Field(ge=1, le=MAX_SEQ)]] | None = Field(None, min_length=1)


class PendingAnswer(BaseModel):
    """A session's ``pending``: the memories the model returned for messages ``from`` to
    ``to`` that are not all kept yet (``{"from", "to", "memories"}``, as
    ``background.extraction`` writes it). A run of the session keeps them before it reads on,
    so one that is not of this shape (or whose ``from``/``to`` the session contradicts) would
    make every run of the session fail, or move its cursor past its messages."""

    model_config = ConfigDict(extra="forbid", strict=True)

    first: int = Field(alias="from", ge=1, le=MAX_SEQ)
    to: int = Field(ge=1, le=MAX_SEQ)
    memories: list[PendingMemory] = Field(max_length=PENDING_MEMORIES)


def pending_problem(pending: str, read_seq: int, message_count: int) -> str | None:
    """What is wrong with ``pending`` for a session whose extraction read ``read_seq`` of
    ``message_count`` messages (None when nothing): not ``PendingAnswer``, ``from`` other than
    ``read_seq + 1`` (the answer is of the messages after the cursor), ``to`` before ``from``
    or after ``message_count``, an item's ``messages`` outside ``from`` to ``to``."""
    try:
        answer = PendingAnswer.model_validate_json(pending)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = problem_in_words(first)
        return 'must be an extraction answer as exported, {"from", "to", "memories"}: ' + (
            f"{where}: {problem}" if where else problem
        )
    if answer.first != read_seq + 1:
        return f"from must be read_seq + 1 ({read_seq + 1}), the first message not read yet"
    if not answer.first <= answer.to <= message_count:
        return f"to must lie from {answer.first} (from) to {message_count} (message_count)"
    for at, item in enumerate(answer.memories):
        outside = [n for n in item.messages or () if not answer.first <= n <= answer.to]
        if outside:
            return f"memories.{at}.messages: {outside[0]} is outside from to to"
    return None


Problem = tuple[tuple[str | int, ...], str]
"""A field's location in a body and what is wrong with it."""


def invalid(title: str, problems: Sequence[Problem]) -> ValidationError:
    """A ``ValidationError`` naming each field of ``problems`` (``(location, problem)``): what
    a model's own check raises so that the answer's ``details`` name the field (a plain
    ``ValueError`` would name the whole body)."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError("inconsistent", problem), loc=loc, input=None)
            for loc, problem in problems
        ],
    )


class ImportedMessage(Model):
    """A message to import: an exported one (``ExportedMessage``), checked as an added one is."""

    seq: int = Field(ge=1, le=MAX_SEQ)
    role: Role
    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_MESSAGE_CHARS)]
    name: SpeakerName | None = None
    created_at: UtcDatetime = Field(strict=False)
    item: MessageItem | None = None


class SessionImport(Model):
    """Body of ``PUT .../import/sessions/{session}``: a ``SessionExport`` (its paging field
    left out) with a page of at most ``MAX_IMPORT_MESSAGES`` messages; send a long session's
    pages one after the other, each with the same state."""

    actor_id: ActorId | None = None
    summary: Annotated[str, StringConstraints(max_length=MAX_SUMMARY_CHARS)] | None = None
    message_count: int = Field(ge=1, le=MAX_SEQ)
    created_at: UtcDatetime = Field(strict=False)
    last_event_at: UtcDatetime = Field(strict=False)
    expires_at: UtcDatetime = Field(strict=False)
    read_seq: int = Field(0, ge=0, le=MAX_SEQ)
    folded_seq: int = Field(0, ge=0, le=MAX_SEQ)
    failures: int = Field(0, ge=0, le=1000)
    last_error: Annotated[str, StringConstraints(max_length=MAX_ERROR_CHARS)] | None = None
    last_run_at: UtcDatetime | None = Field(None, strict=False)
    pending: Annotated[str, StringConstraints(max_length=MAX_PENDING_CHARS)] | None = None
    messages: list[ImportedMessage] = Field(default_factory=list, max_length=MAX_IMPORT_MESSAGES)

    @model_validator(mode="after")
    def _consistent(self) -> SessionImport:
        problems = self.problems()
        if problems:
            raise invalid("SessionImport", problems)
        return self

    def problems(self) -> list[Problem]:
        """Each field that the rest of the session contradicts, with the problem: the cursors
        (``folded_seq <= read_seq <= message_count``), the times (``created_at <=
        last_event_at < expires_at``, a run within the session's life), the outcome of runs
        (``failures`` with their ``last_error``), ``pending`` (``pending_problem``) and each
        message's ``seq`` (once, after ``folded_seq`` and at most ``message_count``)."""
        count, read = self.message_count, self.read_seq
        problems: list[Problem] = []
        if read > count:
            problems.append((("read_seq",), f"must be at most message_count ({count})"))
        if self.folded_seq > read:
            problems.append(
                (
                    ("folded_seq",),
                    f"must be at most read_seq ({read}): no message "
                    "is folded before extraction read it",
                )
            )
        if self.pending is not None:
            problem = pending_problem(self.pending, read, count)
            if problem is not None:
                problems.append((("pending",), problem))
        return problems + self._time_problems() + self._message_problems()

    def _time_problems(self) -> list[Problem]:
        problems: list[Problem] = []
        if self.last_event_at < self.created_at:
            problems.append((("last_event_at",), "must not be before created_at"))
        if self.expires_at <= self.last_event_at:
            problems.append((("expires_at",), "must be after last_event_at"))
        if self.last_run_at is not None and not (
            self.created_at <= self.last_run_at < self.expires_at
        ):
            problems.append((("last_run_at",), "must lie from created_at to before expires_at"))
        if self.last_run_at is None and (self.failures or self.last_error is not None):
            problems.append(
                (
                    ("last_run_at",),
                    "must be given with failures or last_error (a run records when it ended)",
                )
            )
        if self.failures and self.last_error is None:
            problems.append(
                (
                    ("last_error",),
                    "must be given when failures is above 0 (a failed run records its error)",
                )
            )
        return problems

    def _message_problems(self) -> list[Problem]:
        low, high = self.folded_seq + 1, self.message_count
        problems: list[Problem] = []
        seen: dict[int, int] = {}
        for at, message in enumerate(self.messages):
            if message.seq in seen:
                problem = f"messages.{seen[message.seq]} has this seq already"
                problems.append((("messages", at, "seq"), problem))
            elif not low <= message.seq <= high:
                problem = f"must lie from folded_seq + 1 to message_count ({low} to {high})"
                problems.append((("messages", at, "seq"), problem))
            seen.setdefault(message.seq, at)
        return problems


class SessionImported(View):
    """Answer of a session import: the session's ``message_count`` and ``expires_at`` now, and
    how many of the page's messages it did not have yet (0 when the page was imported before)."""

    session_id: str
    message_count: int
    expires_at: datetime
    messages_added: int


@dataclass(frozen=True)
class SessionImportOutcome:
    """What ``SessionTransfer.import_page`` did: its answer, and the time to arm the session's
    extraction schedule for (its messages are not all read and nothing is armed), if any."""

    result: SessionImported
    arm_due: datetime | None


class SessionTransfer:
    """Export and import of one store's sessions. Errors: ``SessionNotFound``, ``Conflict``,
    ``ValidationFailed``, ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        client = db.client
        self._redis = client
        self._store = db.config
        self._keys = db.keys
        self._clock = db.clock
        self._export = load_script(client, scripts.EXPORT)
        self._import = load_script(client, scripts.IMPORT)
        self._touch = load_script(client, scripts.TOUCH)

    def ids(self, cursor: str | None, limit: int) -> SessionIdPage:
        """A page of live session ids (``ZSCAN`` of the store's expiry index, about ``limit``
        per page). ``ValidationFailed`` for a cursor that is not one of ours."""
        start = int_cursor(cursor)
        now_ms = to_ms(self._clock.now())
        with database_errors():
            after, pairs = self._redis.zscan(self._keys.session_expiry, start, count=limit)
        ids = sorted({str(member) for member, score in pairs if float(score) > now_ms})
        return SessionIdPage(session_ids=ids, next_cursor=str(after) if int(after) else None)

    def export(
        self, session_id: str, after_seq: int, limit: int, budget: int = DEFAULT_ANSWER_BUDGET
    ) -> SessionExport:
        """The session's state and its messages after ``after_seq`` (at most ``limit``, oldest
        first, and no more than keep the answer within ``budget`` bytes as Lambda carries it:
        ``answers.wire_bytes``; at least one), read in one step; ``SessionNotFound`` when it is
        not live. A ``pending`` answer the session's cursor has passed (``pending_problem``:
        extraction ignores it) is given as null, so that an export is always what an import
        takes."""
        keys = self._keys.session(session_id)
        with database_errors():
            flat, members, cut = self._export(keys=keys.all(), args=[after_seq, limit, budget])
        raw = dict(zip(flat[::2], flat[1::2], strict=True))
        meta = live_meta(session_id, raw, to_ms(self._clock.now()))
        if meta is None:
            raise SessionNotFound(session_id)
        stored = [str(m) for m in members[:limit]]
        messages = [ExportedMessage(**member_fields(m)) for m in stored]
        more = len(members) > limit or bool(int(cut))
        pending = meta.record.pending
        if pending is not None and pending_problem(pending, meta.read_seq, meta.message_count):
            pending = None
        page = SessionExport(
            session_id=session_id,
            actor_id=meta.actor_id,
            summary=meta.summary,
            message_count=meta.message_count,
            created_at=meta.created_at,
            last_event_at=meta.last_event_at,
            expires_at=meta.expires_at,
            read_seq=meta.read_seq,
            folded_seq=meta.folded_seq,
            failures=meta.failures,
            last_error=meta.last_error,
            last_run_at=meta.last_run_at,
            pending=pending,
            messages=[],
            next_after_seq=2**53,  # the widest cursor, while the page is measured
        )
        # Each message counted by its stored JSON, which holds every field (``item`` too: an
        # item's JSON text inside JSON weighs nearly twice its characters on the wire), and
        # is at least as long as the texts it holds.
        characters = sum(len(m) + MESSAGE_OVERHEAD_CHARS for m in stored) + sum(
            len(text or "") for text in (meta.summary, pending, meta.last_error, meta.actor_id)
        )
        if not surely_fits(characters + len(session_id), budget):
            kept = items_that_fit(page, messages, budget)
            more = more or kept < len(messages)
            messages = messages[:kept]
        return page.model_copy(
            update={"messages": messages, "next_after_seq": messages[-1].seq if more else None}
        )

    def import_page(self, session_id: str, body: SessionImport) -> SessionImportOutcome:
        """Write ``body`` (the session's state and a page of its messages) as session
        ``session_id``, creating it when the store has none of that id; idempotent (see the
        module docstring). ``Conflict`` when another live session holds the id (created at
        another time) or a sequence number holds another message, ``ActorMismatch`` (409
        ``actor_mismatch``) when the live session belongs to another actor;
        ``ValidationFailed`` when the session's time is up (``expires_at`` passed: nothing to
        keep) or is further than any store keeps a session (now plus the largest
        ``session_ttl_seconds`` and a day: later would keep it for ever)."""
        now = self._clock.now()
        now_ms = to_ms(now)
        if to_ms(body.expires_at) <= now_ms:
            raise ValidationFailed(
                "The session's expires_at has passed: there is nothing left to import.",
                details=[{"field": "expires_at", "problem": "must be in the future"}],
            )
        latest = now_ms + (MAX_SESSION_TTL_SECONDS + IMPORT_CLOCK_SKEW_SECONDS) * 1000
        if to_ms(body.expires_at) > latest:
            raise ValidationFailed(
                "The session's expires_at is further away than any store keeps a session.",
                details=[
                    {
                        "field": "expires_at",
                        "problem": f"must be at most "
                        f"{MAX_SESSION_TTL_SECONDS} s (the largest session_ttl_seconds) "
                        "and a day from now",
                    }
                ],
            )
        pairs: list[str | int] = []
        for message in body.messages:
            stored = encode_message(
                message.role,
                message.content,
                message.name,
                to_ms(message.created_at),
                message.item,
            )
            pairs += [message.seq, message_member(message.seq, stored)]
        model = self._store.llm_provider != "none"
        keys = self._keys.session(session_id)
        args: list[str | int] = [
            now_ms,
            to_ms(body.created_at),
            body.actor_id or "",
            body.message_count,
            body.read_seq,
            body.folded_seq,
            to_ms(body.last_event_at),
            to_ms(body.expires_at),
            body.summary or "",
            body.failures,
            str(to_ms(body.last_run_at)) if body.last_run_at else "",
            body.last_error or "",
            body.pending or "",
            self._store.extraction_delay_seconds * 1000 if model else "",
            *pairs,
        ]
        with database_errors():
            reply = self._import(keys=keys.all(), args=args)
        if int(reply[0]) == -1:
            raise Conflict(
                f"Session '{session_id}' of this store is another session (created at another "
                "time); delete it, or import into another store."
            )
        if int(reply[0]) == -2:
            raise Conflict(
                f"Message {int(reply[1])} of session '{session_id}' is another message in this "
                "store; nothing was written."
            )
        if int(reply[0]) == -3:  # as an append of another actor's messages is refused
            held = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
            raise ActorMismatch(session_id, held, body.actor_id or "")
        _, count, expires, arm, added = (int(v) for v in reply)
        unread = "1" if model and body.read_seq < count else "0"
        with database_errors():
            self._touch(
                keys=self._keys.session_indexes(),
                args=[to_ms(body.last_event_at), TOUCH_PRUNE_BATCH, session_id, expires, unread],
            )
        result = SessionImported(
            session_id=session_id,
            message_count=count,
            expires_at=from_ms(expires),
            messages_added=added,
        )
        return SessionImportOutcome(result, from_ms(arm) if arm else None)


def int_cursor(cursor: str | None) -> int:
    """The number in a paging cursor this API gave (0 for none; ``memories.transfer_export`` uses
    it for the HSCAN half of its cursors); ``ValidationFailed`` for any other text, or for a
    number that cannot be a SCAN cursor (``database.cursors``)."""
    if cursor is None:
        return 0
    number = scan_cursor(cursor)
    if number is None:
        raise ValidationFailed(
            "The cursor is not one this API gave.",
            details=[{"field": "cursor", "problem": "give the next_cursor of the page before"}],
        )
    return number


def items_that_fit(base: BaseModel, items: Sequence[BaseModel], budget: int) -> int:
    """How many of ``items``, from the first, the answer ``base`` (whose list of them is
    empty) holds within ``budget`` bytes as ``answers.wire_bytes`` measures it; at least one.
    Each item is measured once: JSON escaping is per character, so the answer's bytes are the
    empty answer's, each item's without its quotes, and a comma between two."""
    total = wire_bytes(base)
    for count, item in enumerate(items):
        total += wire_bytes(item) - 2 + (1 if count else 0)
        if total > budget:
            return max(count, 1)
    return len(items)
