"""Pydantic models of long-term memory and recall: the bodies of ``POST .../memories``,
``PATCH`` and search, the memory views, and recall's request and answer, with the limits they
check (``MAX_MEMORY_CHARS``, ``MAX_TOPICS``, metadata size and depth, ``MAX_VERSIONS``).

Separate from ``agent_memory.models``, which holds what every package shares (identifiers,
times, the ``Model`` / ``View`` bases, text that shows nothing, the error shape);
the same conventions hold here: field names follow DESIGN.md section 2, request models forbid
unknown fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

import jiter
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from agent_memory.answers import MIN_ANSWER_BYTES
from agent_memory.errors import ValidationFailed
from agent_memory.models import (
    DEFAULT_PAGE,
    MAX_QUERY_CHARS,
    MEMORY_ID_PATTERN,
    ActorId,
    Model,
    SearchMode,
    SessionId,
    UtcDatetime,
    View,
    compact_json,
    is_blank,
    json_depth,
)
from agent_memory.sessions.models import Message

MAX_MEMORY_CHARS = 8_000
MAX_TOPICS = 10
MAX_TOPIC_CHARS = 64
MAX_METADATA_BYTES = 4_096
MAX_METADATA_DEPTH = 5
MAX_VERSIONS = 50

Topic = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TOPIC_CHARS)]
MemoryId = Annotated[str, StringConstraints(pattern=MEMORY_ID_PATTERN)]
UnitInterval = Annotated[float, Field(ge=0, le=1)]
MemoryText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_MEMORY_CHARS)]


def _small_metadata(value: dict[str, Any]) -> dict[str, Any]:
    try:
        text = compact_json(value)
    except ValueError as exc:
        raise ValueError("metadata numbers must be finite") from exc
    size = len(text.encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise ValueError(f"metadata is {size} bytes of JSON; at most {MAX_METADATA_BYTES}")
    if json_depth(value) > MAX_METADATA_DEPTH:
        raise ValueError(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels")
    return value


Metadata = Annotated[dict[str, Any], AfterValidator(_small_metadata)]
_METADATA: TypeAdapter[dict[str, Any]] = TypeAdapter(Metadata)


def _not_blank(value: str) -> str:
    if is_blank(value):
        raise ValueError("must not be blank")
    return value


VisibleMemoryText = Annotated[MemoryText, AfterValidator(_not_blank)]
"""A memory's text as every route that keeps one checks it (add, change, import): 1 to
``MAX_MEMORY_CHARS`` characters, at least one of them visible (``agent_memory.models.is_blank``)."""


def _query_topics(value: object) -> object:
    """A listing's ``topics`` query parameter (comma-separated) as topics; ``ValidationFailed``
    naming ``query.topics`` unless 1 to ``MAX_TOPICS`` of at most ``MAX_TOPIC_CHARS``
    characters (a topic holding a comma can only be asked for by search)."""
    if not isinstance(value, str):
        return value
    wanted = tuple(t.strip() for t in value.split(",") if t.strip())
    if not wanted or len(wanted) > MAX_TOPICS or any(len(t) > MAX_TOPIC_CHARS for t in wanted):
        problem = (
            f"1 to {MAX_TOPICS} comma-separated topics of at most {MAX_TOPIC_CHARS} characters each"
        )
        raise ValidationFailed(
            f"'topics' must be {problem}.",
            details=[{"field": "query.topics", "problem": f"must be {problem}"}],
        )
    return wanted


def _query_metadata(value: object) -> object:
    """A listing's ``metadata`` query parameter (a strict JSON object) as a dict;
    ``ValidationFailed`` naming ``query.metadata`` for anything else (or past a memory's
    metadata limits)."""
    if not isinstance(value, str):
        return value
    try:
        parsed = _METADATA.validate_python(
            jiter.from_json(value.encode(), allow_inf_nan=False, catch_duplicate_keys=True)
        )
    except (ValueError, ValidationError) as exc:
        problem = 'must be a JSON object such as {"team": "ops"} (at most 4,096 bytes)'
        raise ValidationFailed(
            "'metadata' must be a JSON object of the top-level keys and values to match.",
            details=[{"field": "query.metadata", "problem": problem}],
        ) from exc
    return parsed


class MemoryFilters(BaseModel):
    """The eight filters that a listing (``GET .../memories``, its query parameters) and a
    search (``SearchRequest``, its body) share, and that the store's reads turn into one
    ``search.selection.Selection`` (``memories.queries.selection_of``). Times are UTC;
    ``topics`` selects memories with at least one of them; ``metadata`` those whose metadata has
    each top-level key with an equal value (JSON equality). A listing's ``topics`` (comma-
    separated) and ``metadata`` (a JSON object) arrive as text and are read here:
    ``ValidationFailed`` naming ``query.topics`` / ``query.metadata``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    include_superseded: bool = False
    as_of: datetime | None = None
    topics: Annotated[tuple[str, ...] | None, BeforeValidator(_query_topics)] = None
    metadata: Annotated[dict[str, Any] | None, BeforeValidator(_query_metadata)] = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None


@dataclass(frozen=True)
class MemoryPage:
    """Which page of a listing: from ``offset``, at most ``limit`` memories, of one actor and
    one type when given (``GET .../memories``)."""

    offset: int = 0
    limit: int = DEFAULT_PAGE
    actor_id: str | None = None
    type: str | None = None


class MemoryIn(Model):
    """Body of ``POST .../memories``. ``type`` is checked against the store's types by the
    core (the model does not know the store); ``vector`` is required when the store has no
    embedding model."""

    text: VisibleMemoryText
    type: Annotated[str, StringConstraints(min_length=1, max_length=40)] = "semantic"
    actor_id: ActorId | None = None
    topics: list[Topic] = Field(default_factory=list, max_length=MAX_TOPICS)
    metadata: Metadata = Field(default_factory=dict)
    importance: UnitInterval | None = None
    confidence: UnitInterval | None = None
    vector: list[float] | None = Field(None, max_length=8192)
    supersedes: MemoryId | None = Field(
        None,
        description="The id of a current memory of the same actor that this one replaces: "
        "it stops being current (valid_until) in the same atomic step as this one is kept.",
    )
    occurred_at: UtcDatetime | None = Field(
        None, strict=False, description="When the event the memory tells of happened."
    )


class MemoryPatch(Model):
    """Body of ``PATCH .../memories/{memory}``: the fields to change (at least one)."""

    text: VisibleMemoryText | None = None
    type: Annotated[str, StringConstraints(min_length=1, max_length=40)] | None = None
    topics: list[Topic] | None = Field(None, max_length=MAX_TOPICS)
    metadata: Metadata | None = None
    importance: UnitInterval | None = None
    vector: list[float] | None = Field(None, max_length=8192)

    @model_validator(mode="after")
    def _something(self) -> MemoryPatch:
        if not self.model_fields_set - {"vector"}:
            raise ValueError("give at least one of text, type, topics, metadata, importance")
        for field in ("text", "type", "topics", "metadata", "vector"):
            if field in self.model_fields_set and getattr(self, field) is None:
                raise ValueError(f"{field} cannot be null (importance may be, to clear it)")
        return self


class MemorySource(View):
    """Where a memory came from: the session extraction read it in; the messages (by ``seq``)
    that extraction call read, ``first_seq`` to ``last_seq``; and ``seqs``, the messages the
    model said the memory comes from (within that range), when it said; or the consolidation
    run or the restore that wrote it."""

    session_id: str | None = None
    first_seq: int | None = Field(None, description="The first message the extraction read.")
    last_seq: int | None = Field(None, description="The last message the extraction read.")
    seqs: list[int] | None = Field(
        None, description="The messages the memory comes from, as the model named them."
    )
    consolidation_id: str | None = Field(
        None, description="The consolidation run that wrote this memory (merge or update)."
    )
    restored_from: str | None = Field(
        None, description="The version a restore brought back (POST .../restore)."
    )


class MemoryVersion(View):
    """The memory as it was before a change made at ``changed_at``."""

    text: str
    type: str
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    changed_at: datetime


class MemoryLink(View):
    """One memory of a chain of memories that replaced one another (``MemoryView.chain``)."""

    id: str
    text: str
    valid_from: datetime
    valid_until: datetime | None


class MemoryView(View):
    """A memory as the API shows it (``score`` in search results, ``versions`` and ``chain``
    on ``GET``). A memory is current while ``valid_until`` is null; one that another memory
    replaced (``superseded_by``) has ``valid_until``, the moment it was replaced."""

    id: str
    text: str
    type: str
    actor_id: str | None
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    confidence: float | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    source: MemorySource | None
    occurred_at: datetime | None = Field(
        None, description="When the event happened, when known (null: unknown)."
    )
    valid_from: datetime = Field(description="When the memory became current (when it was kept).")
    valid_until: datetime | None = Field(
        None, description="When another memory replaced it; null while it is current."
    )
    supersedes: str | None = Field(None, description="The memory this one replaced.")
    superseded_by: str | None = Field(None, description="The memory that replaced this one.")
    score: float | None = Field(
        None,
        description="In search and recall results: how relevant the memory is to the query, 0 "
        "to 1, comparable across queries and modes (docs/retrieval.md): the estimated "
        "probability that it holds what the query asks, or the reranker's relevance when "
        "reranked.",
    )
    similarity: float | None = Field(
        None,
        description="In search and recall results with a query vector: the cosine of the "
        "query's and the memory's vectors (-1 to 1).",
    )
    duplicate: bool | None = None
    versions: list[MemoryVersion] | None = None
    chain: list[MemoryLink] | None = Field(
        None,
        description="On GET: every memory of its chain still kept, oldest first, this one "
        "included (what it replaced, what replaced it).",
    )
    chain_omitted: int | None = Field(
        None,
        description="On GET: the memories of its chain farthest from this one left out to "
        "keep the answer under its byte budget (0 when none were); GET one of the ends shown "
        "for those beyond it.",
    )
    versions_omitted: int | None = Field(
        None,
        description="On GET: the oldest versions left out to keep the answer under its byte "
        "budget, after the chain was cut to this memory alone (0 when none were).",
    )


class MemoryList(View):
    """A page of memories, newest first; ``next_offset`` is null on the last page; ``total``
    is how many live memories match the listing's filters, over all its pages."""

    memories: list[MemoryView]
    next_offset: int | None
    total: int = Field(
        description="Live memories matching the filters (actor_id, type), over all pages."
    )


MinScore = Annotated[
    float | None,
    Field(
        ge=0,
        le=1,
        description="Leave out results scoring below this; null or 0 keeps every result of "
        "the top limit. 0.03 keeps 95% of hits and drops 95% of questions a store cannot "
        "answer on LoCoMo with all-MiniLM-L6-v2 embeddings (docs/retrieval.md).",
    ),
]
"""The ``min_score`` of a search or recall body (``search.scores``)."""


ReferenceTime = Annotated[
    UtcDatetime | None,
    Field(
        strict=False,
        description="When the query is asked: relative times in it ('last week', 'two days "
        "ago', 'in October') are resolved against this. Default: now for a search, the "
        "session's latest message for a recall.",
    ),
]
TimeFilter = Annotated[
    bool,
    Field(
        description="true: keep only memories whose occurred_at is inside the time the query "
        "names (time_window); false (default): those rank higher, the rest still count.",
    ),
]


class TimeWindowView(View):
    """The time a query names (``search.when``): ``[start, end)`` and the words it was read
    from."""

    start: datetime
    end: datetime
    said: str


class SearchRequest(Model):
    """Body of ``POST .../memories/search``. Without ``actor_id`` the whole store is searched."""

    query: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS), AfterValidator(_not_blank)
    ]
    mode: SearchMode = "hybrid"
    actor_id: ActorId | None = None
    types: list[Annotated[str, StringConstraints(min_length=1, max_length=40)]] | None = Field(
        None, max_length=5
    )
    limit: int = Field(10, ge=1, le=100)
    query_vector: list[float] | None = Field(None, max_length=8192)
    include_superseded: bool = Field(
        False, description="Also memories that another memory replaced (valid_until set)."
    )
    as_of: UtcDatetime | None = Field(
        None,
        strict=False,
        description="What was current at this time: valid_from <= as_of < valid_until "
        "(null: still current) and as_of < expires_at.",
    )
    topics: list[Topic] | None = Field(
        None, max_length=MAX_TOPICS, description="Only memories with at least one of these."
    )
    metadata: Metadata | None = Field(
        None,
        description="Only memories whose metadata has each of these top-level keys with an "
        "equal value (JSON equality).",
    )
    created_after: UtcDatetime | None = Field(
        None, strict=False, description="Only memories kept at or after this time."
    )
    created_before: UtcDatetime | None = Field(
        None, strict=False, description="Only memories kept before this time."
    )
    occurred_after: UtcDatetime | None = Field(
        None, strict=False, description="Only memories whose event happened at or after this."
    )
    occurred_before: UtcDatetime | None = Field(
        None, strict=False, description="Only memories whose event happened before this."
    )
    rerank: bool = Field(
        True,
        description="false: skip the store's reranker for this search (rerank_provider); "
        "the fused order is returned.",
    )
    min_score: MinScore = None
    reference_time: ReferenceTime = None
    time_filter: TimeFilter = False
    time_ranking: bool = Field(
        True,
        description="false: a time the query names does not change the ranking (time_window "
        "still says what was read, and time_filter still applies).",
    )

    @property
    def filters(self) -> MemoryFilters:
        """The search's filters, as a listing's are read (``MemoryFilters``)."""
        return MemoryFilters(
            include_superseded=self.include_superseded,
            as_of=self.as_of,
            topics=tuple(self.topics) if self.topics else None,
            metadata=self.metadata or None,
            created_after=self.created_after,
            created_before=self.created_before,
            occurred_after=self.occurred_after,
            occurred_before=self.occurred_before,
        )


class SearchResult(View):
    """Answer of a search: memories best first, each with its ``score``; ``memories_omitted``
    says how many of the lowest ranked were left out to keep the answer under its byte
    budget (``answers``)."""

    memories: list[MemoryView]
    memories_omitted: int = Field(
        0,
        description="The lowest ranked results left out to keep the answer under its byte "
        "budget (0 when none were); the memory listing (GET .../memories), with filters, reads "
        "every memory.",
    )
    reranked: bool | None = Field(
        None,
        description="true: the store's reranker ordered these memories (each score is its "
        "relevance); false: it failed or ran out of time and the fused order was kept; null: "
        "the store has no reranker, or the request asked for none.",
    )
    time_window: TimeWindowView | None = Field(
        None,
        description="The time the query names, whose memories ranked higher (or, with "
        "time_filter, the only ones kept); null when it names none.",
    )


class ActorForgotten(View):
    """Answer of forgetting an actor: how many memories were deleted, and how many fields of
    its profile."""

    actor_id: str
    deleted: int
    profile_fields_deleted: int = 0


# --- recall ----------------------------------------------------------------------------------


class RecallRequest(Model):
    """Body of ``POST .../recall``."""

    session_id: SessionId
    query: (
        Annotated[
            str,
            StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS),
            AfterValidator(_not_blank),
        ]
        | None
    ) = None
    actor_id: ActorId | None = None
    limit: int = Field(10, ge=1, le=100)
    query_vector: list[float] | None = Field(None, max_length=8192)
    types: list[Annotated[str, StringConstraints(min_length=1, max_length=40)]] | None = Field(
        None, max_length=5, description="Only memories of these types."
    )
    max_bytes: int | None = Field(
        None,
        ge=MIN_ANSWER_BYTES,
        description="The most this answer may weigh, in bytes of its JSON in UTF-8 written "
        "once more as a JSON string (as Lambda carries it); the oldest messages, then the "
        "lowest ranked memories, are left out to fit. The server's own budget applies when "
        "it is lower.",
    )
    rerank: bool = Field(
        True, description="false: skip the store's reranker for this recall (rerank_provider)."
    )
    min_score: MinScore = None
    reference_time: ReferenceTime = None
    time_filter: TimeFilter = False


class RecallView(View):
    """Answer of recall: summary, verbatim messages, relevant memories and a ready context.
    ``messages_omitted`` and ``memories_omitted`` say how many were left out to keep the
    answer under its byte budget (``answers``): the oldest messages first, then the lowest
    ranked memories."""

    session_id: str
    actor_id: str | None
    summary: str | None
    messages: list[Message]
    memories: list[MemoryView]
    context: str
    messages_omitted: int = Field(
        0,
        description="The oldest verbatim messages left out to keep the answer under its byte "
        "budget (0 when none were); GET the session with before_seq set to the first "
        "message's seq to read them.",
    )
    memories_omitted: int = Field(
        0,
        description="The lowest ranked memories left out to keep the answer under its byte "
        "budget, after every message was (0 when none were).",
    )
    reranked: bool | None = Field(
        None,
        description="As in a search's answer: whether the store's reranker ordered memories.",
    )
    time_window: TimeWindowView | None = Field(
        None, description="As in a search's answer: the time the query names."
    )
    profile: dict[str, str | float | int | bool | list[str]] | None = Field(
        None,
        description="The actor's profile: each of the store's profile_fields that holds a "
        "value (null when the store declares none or there is no actor); also the first "
        "section of the context.",
    )
