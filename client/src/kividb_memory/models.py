"""The API's request bodies and answers, as the client sends and reads them.

Names follow the API's OpenAPI document (``docs/openapi.json``, ``components.schemas``), field for
field; ``tests/unit/test_client_openapi.py`` fails when the two drift apart.

- Request models forbid unknown fields, so a misspelt name (``search_mode`` for ``mode``) is an
  error here instead of a field the server never sees. They check names and types only: ranges
  and lengths are the server's to enforce (a 422 :class:`~kividb_memory.ValidationError` names
  the field), so a server that widens a limit needs no new client.
- Response models ignore fields they do not know, so a newer server can add fields.
- Fields that carry secrets (``llm_api_key``, ``embed_api_key``) never appear in a ``repr`` or
  in a validation error's text.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from kividb_memory.consolidation_models import (
    Consolidation as Consolidation,
    ConsolidationCounts as ConsolidationCounts,
    ConsolidationList as ConsolidationList,
    ConsolidationQueued as ConsolidationQueued,
    ConsolidationStatus as ConsolidationStatus,
    ConsolidationStep as ConsolidationStep,
    ConsolidationSummary as ConsolidationSummary,
    StepAction as StepAction,
    StepMemory as StepMemory,
    StepStatus as StepStatus,
)
from kividb_memory.key_models import (
    KeyCreate as KeyCreate,
    KeyCreated as KeyCreated,
    KeyList as KeyList,
    KeyView as KeyView,
    StoreRefView as StoreRefView,
    StoreScope as StoreScope,
)
from kividb_memory.keyed_models import (
    KeyedMemoryPut as KeyedMemoryPut,
    KeyedMemoryView as KeyedMemoryView,
    KeyedSearchRequest as KeyedSearchRequest,
    KeyedSearchResult as KeyedSearchResult,
    NamespaceList as NamespaceList,
    NamespacesRequest as NamespacesRequest,
)
from kividb_memory.model_bases import (
    Answer as Answer,
    EmbedProvider as EmbedProvider,
    ExtractionState as ExtractionState,
    LlmProvider as LlmProvider,
    Request as Request,
    RerankProvider as RerankProvider,
    Role as Role,
    SearchMode as SearchMode,
)
from kividb_memory.operations_models import (
    DeliveryList as DeliveryList,
    DeliveryView as DeliveryView,
    WebhookEndpoint as WebhookEndpoint,
    WebhookSecret as WebhookSecret,
)
from kividb_memory.profile_models import (
    ExampleMemory as ExampleMemory,
    ExampleMessage as ExampleMessage,
    ExportedProfile as ExportedProfile,
    ExtractionExample as ExtractionExample,
    ImportedProfile as ImportedProfile,
    ImportedProfileEntry as ImportedProfileEntry,
    ImportedProfileSource as ImportedProfileSource,
    ProfileEntry as ProfileEntry,
    ProfileExportPage as ProfileExportPage,
    ProfileField as ProfileField,
    ProfileFieldType as ProfileFieldType,
    ProfileHistory as ProfileHistory,
    ProfileImportBatch as ProfileImportBatch,
    ProfileImportResult as ProfileImportResult,
    ProfilePatch as ProfilePatch,
    ProfileSource as ProfileSource,
    ProfileValue as ProfileValue,
    ProfileView as ProfileView,
)
from kividb_memory.transfer_models import (
    ExportedMemory as ExportedMemory,
    ExportedMessage as ExportedMessage,
    ExportedSource as ExportedSource,
    ExportedVersion as ExportedVersion,
    ImportedMemory as ImportedMemory,
    ImportedMessage as ImportedMessage,
    ImportedSource as ImportedSource,
    ImportedVersion as ImportedVersion,
    MemoryExportPage as MemoryExportPage,
    MemoryImportBatch as MemoryImportBatch,
    MemoryImportResult as MemoryImportResult,
    SessionExport as SessionExport,
    SessionIdPage as SessionIdPage,
    SessionImport as SessionImport,
    SessionImported as SessionImported,
)

# --- stores ----------------------------------------------------------------------------------


class CustomType(Answer):
    """A store-specific memory type: ``{"name": "order_issue", "description": "..."}``. Sent in
    ``StorePut.custom_types`` and read back in ``StoreView.custom_types``."""

    name: str
    description: str
    examples: list[str] | None = None


class StorePut(Request):
    """Body of ``PUT /instances/{instance_id}/agent-memory/{store}``: the settings to set.

    Only the fields given are sent (omitted ones keep their value, or the default for a new
    store); ``None`` given explicitly is sent as ``null``, which for ``llm_api_key`` and
    ``embed_api_key`` removes the stored key. The keys are write-only: no answer carries them,
    and they are left out of this model's ``repr`` and of its validation errors."""

    model_config = ConfigDict(extra="forbid", strict=True, hide_input_in_errors=True)

    llm_provider: LlmProvider | None = None
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key: str | None = Field(None, repr=False)
    embed_provider: EmbedProvider | None = None
    embed_model: str | None = None
    embed_base_url: str | None = None
    embed_api_key: str | None = Field(None, repr=False)
    dimensions: int | None = None
    rerank_provider: RerankProvider | None = None
    rerank_model: str | None = None
    rerank_base_url: str | None = None
    rerank_api_key: str | None = Field(None, repr=False)
    rerank_candidates: int | None = None
    aws_region: str | None = None
    extraction_delay_seconds: int | None = None
    summarize_after: int | None = None
    keep_recent: int | None = None
    session_ttl_seconds: int | None = None
    memory_ttl_seconds: int | None = None
    dedupe_threshold: float | None = Field(None, strict=False)  # 1 is a valid threshold too
    custom_types: list[CustomType] | None = None
    redact_pii: bool | None = None
    redact_card_digit_runs: bool | None = None
    webhooks: list[WebhookEndpoint] | None = None
    extraction_instructions: str | None = None
    extraction_examples: list[ExtractionExample] | None = None
    profile_fields: list[ProfileField] | None = None
    consolidate_after_memories: int | None = None
    consolidation_mode: Literal["apply", "review"] | None = None


class StoreCounts(Answer):
    """Live sessions, live memories, and live sessions with messages extraction has not read."""

    sessions: int
    memories: int
    waiting_for_extraction: int


class StoreView(Answer):
    """A store's settings (never its provider keys: ``has_llm_api_key`` and
    ``has_embed_api_key`` say whether it has them). ``counts`` and the last extraction's time
    and error come with ``get_store``."""

    name: str
    instance_id: str
    llm_provider: LlmProvider
    llm_model: str | None
    llm_base_url: str | None
    has_llm_api_key: bool
    embed_provider: EmbedProvider
    embed_model: str | None
    embed_base_url: str | None
    has_embed_api_key: bool
    dimensions: int
    rerank_provider: RerankProvider = "none"  # servers before rerankers had none
    rerank_model: str | None = None
    rerank_base_url: str | None = None
    has_rerank_api_key: bool = False
    rerank_candidates: int = 50
    aws_region: str | None = None  # the region of the 'bedrock' providers
    extraction_delay_seconds: int
    summarize_after: int
    keep_recent: int
    session_ttl_seconds: int
    memory_ttl_seconds: int
    dedupe_threshold: float
    custom_types: list[CustomType]
    redact_pii: bool
    redact_card_digit_runs: bool = True  # servers before it had no such setting
    webhooks: list[WebhookEndpoint] = Field(default_factory=list)
    has_webhook_secret: bool = False
    extraction_instructions: str | None = None
    extraction_examples: list[ExtractionExample] = Field(default_factory=list)
    profile_fields: list[ProfileField] = Field(default_factory=list)
    consolidate_after_memories: int = 50  # servers before consolidation: none
    consolidation_mode: Literal["apply", "review"] = "apply"
    created_at: datetime
    updated_at: datetime
    counts: StoreCounts | None = None
    last_extraction_at: datetime | None = None
    last_extraction_error: str | None = None


class StoreList(Answer):
    """Answer of ``GET /instances/{instance_id}/agent-memory``: a page of the instance's stores
    by name; ``next_cursor`` (the ``cursor`` of the next page) is None on the last."""

    stores: list[StoreView]
    next_cursor: str | None = None


class UnreachableInstance(Answer):
    """An instance whose stores ``GET /agent-memory`` could not list, and why."""

    instance_id: str
    message: str


class OrganizationStoreList(StoreList):
    """Answer of ``GET /agent-memory``: the stores of every instance that answered (by instance,
    then name) and the instances that did not (``[]`` when all did)."""

    unreachable: list[UnreachableInstance]


# --- working memory --------------------------------------------------------------------------


class EventIn(Request):
    """One message to add. ``created_at`` defaults to the time the server receives it; a
    ``datetime`` or ISO 8601 text. ``item``: a structured form kept exactly as given (a tool
    call, a tool result, a framework's own message dict; any JSON object); ``content`` may then
    be left out (the server shows the item's JSON text)."""

    role: Role
    content: str | None = None
    name: str | None = None
    created_at: datetime | str | None = None
    item: dict[str, Any] | None = None


class EventsRequest(Request):
    """Body of ``POST .../sessions/{session_id}/events``."""

    actor_id: str | None = None
    events: list[EventIn]


class EventsResult(Answer):
    """Answer of adding messages: how many were added and the session's ``message_count``."""

    session_id: str
    added: int
    message_count: int


class ExtractionQueued(Answer):
    """Answer of ``POST .../sessions/{session_id}/extract`` (202)."""

    session_id: str
    status: Literal["queued"] = "queued"


class Message(Answer):
    """A message kept verbatim. ``seq`` is its position in the session, from 1; ``item`` its
    structured form as it was given, or ``None``."""

    seq: int
    role: Role
    content: str
    name: str | None = None
    created_at: datetime
    item: dict[str, Any] | None = None


class PoppedMessage(Answer):
    """Answer of ``pop_message``: the message taken back (``None`` when the session kept none)
    and the session's ``message_count`` after it."""

    session_id: str
    message: Message | None
    message_count: int


class ExtractionStatus(Answer):
    """A session's background extraction: ``status``, the armed schedule's ``due_at``, the last
    run's time and error, and how many messages are ``unread``."""

    status: ExtractionState
    due_at: datetime | None = None
    last_run_at: datetime | None = None
    last_error: str | None = None
    unread: int


class SessionView(Answer):
    """A session: its summary, newest messages (oldest first), counts, times and extraction."""

    session_id: str
    actor_id: str | None
    summary: str | None
    messages: list[Message]
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    extraction: ExtractionStatus
    messages_omitted: int = 0
    """The oldest of the messages asked for left out to keep the answer under the server's
    byte budget; ``get_session(..., before_seq=messages[0].seq)`` reads them."""


class SessionSummary(Answer):
    """A session as the listing shows it."""

    session_id: str
    actor_id: str | None
    message_count: int
    created_at: datetime
    last_event_at: datetime
    expires_at: datetime
    extraction: ExtractionStatus


class SessionList(Answer):
    """A page of sessions, most recent first; ``next_offset`` is ``None`` on the last page."""

    sessions: list[SessionSummary]
    next_offset: int | None


# --- long-term memory ------------------------------------------------------------------------


class MemoryIn(Request):
    """Body of ``POST .../memories``. ``vector`` is needed when the store has no embedding
    model; ``type`` defaults to ``semantic`` on the server. ``supersedes``: the id of a current
    memory of the same actor that this one replaces; ``occurred_at``: when the event it tells
    of happened (a ``datetime`` or ISO 8601 text)."""

    text: str
    type: str | None = None
    actor_id: str | None = None
    topics: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = Field(None, strict=False)
    confidence: float | None = Field(None, strict=False)
    vector: list[float] | None = Field(None, strict=False)
    supersedes: str | None = None
    occurred_at: datetime | str | None = None


class MemoryPatch(Request):
    """Body of ``PATCH .../memories/{memory_id}``: only the fields given are sent
    (``importance=None`` clears it)."""

    text: str | None = None
    type: str | None = None
    topics: list[str] | None = None
    metadata: dict[str, Any] | None = None
    importance: float | None = Field(None, strict=False)
    vector: list[float] | None = Field(None, strict=False)


class MemorySource(Answer):
    """Where a memory came from: the session extraction read it in, the first and last message
    it read and the messages the model named (``seq`` numbers); or the consolidation run, or
    the version a restore brought back."""

    session_id: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    seqs: list[int] | None = None
    consolidation_id: str | None = None
    restored_from: str | None = None


class MemoryVersion(Answer):
    """A memory as it was before a change made at ``changed_at``."""

    text: str
    type: str
    topics: list[str]
    metadata: dict[str, Any]
    importance: float | None
    changed_at: datetime


class MemoryLink(Answer):
    """One memory of a chain of memories that replaced one another (``MemoryView.chain``)."""

    id: str
    text: str
    valid_from: datetime
    valid_until: datetime | None


class MemoryView(Answer):
    """A memory (``score`` in search results, ``duplicate`` when added, ``versions`` and
    ``chain`` on get). It is current while ``valid_until`` is ``None``; one that another memory
    replaced has ``superseded_by`` and ``valid_until``."""

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
    valid_from: datetime
    occurred_at: datetime | None = None
    valid_until: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    score: float | None = None
    """In search and recall results: relevance to the query, 0 to 1 (docs/retrieval.md)."""
    similarity: float | None = None
    """In search and recall results with a query vector: the cosine with it."""
    duplicate: bool | None = None
    versions: list[MemoryVersion] | None = None
    chain: list[MemoryLink] | None = None
    chain_omitted: int | None = None
    """On get: the memories of the chain farthest from this one left out to keep the answer
    under the server's byte budget."""
    versions_omitted: int | None = None
    """On get: the oldest versions left out for the same reason, once the chain was cut."""


class MemoryList(Answer):
    """A page of memories, newest first; ``total`` counts the live memories matching the
    filters over all pages; ``next_offset`` is ``None`` on the last page."""

    memories: list[MemoryView]
    next_offset: int | None
    total: int


class SearchRequest(Request):
    """Body of ``POST .../memories/search``. Without ``actor_id`` the whole store is searched;
    ``include_superseded`` adds memories another one replaced; ``as_of`` searches what was
    current at that time; ``topics`` (any of), ``metadata`` (equal top-level keys) and the
    half-open time ranges filter the memories before they are ranked."""

    query: str
    mode: SearchMode | None = None
    actor_id: str | None = None
    types: list[str] | None = None
    limit: int | None = None
    query_vector: list[float] | None = Field(None, strict=False)
    include_superseded: bool | None = None
    as_of: datetime | str | None = None
    topics: list[str] | None = None
    metadata: dict[str, Any] | None = None
    created_after: datetime | str | None = None
    created_before: datetime | str | None = None
    occurred_after: datetime | str | None = None
    occurred_before: datetime | str | None = None
    rerank: bool | None = None
    min_score: float | None = Field(None, strict=False)  # 0 and 1 are valid too
    reference_time: datetime | str | None = None
    time_filter: bool | None = None
    time_ranking: bool | None = None


class TimeWindowView(Answer):
    """The time a query names ("in May 2023", "last week"): ``[start, end)`` and the words it
    was read from."""

    start: datetime
    end: datetime
    said: str


class SearchResult(Answer):
    """Answer of a search: memories best first, each with its ``score``;
    ``memories_omitted``: the lowest ranked left out to keep the answer under the server's
    byte budget; ``reranked``: True when the store's reranker ordered them, False when it
    failed and the fused order was kept, None without a reranker."""

    memories: list[MemoryView]
    memories_omitted: int = 0
    reranked: bool | None = None
    time_window: TimeWindowView | None = None
    """The time the query names, whose memories ranked higher (None when it names none)."""


class ActorForgotten(Answer):
    """Answer of forgetting an actor: how many memories were deleted, and how many fields of
    its profile."""

    actor_id: str
    deleted: int
    profile_fields_deleted: int = 0


# --- recall ----------------------------------------------------------------------------------


class RecallRequest(Request):
    """Body of ``POST .../recall``."""

    session_id: str
    query: str | None = None
    actor_id: str | None = None
    limit: int | None = None
    query_vector: list[float] | None = Field(None, strict=False)
    types: list[str] | None = None
    max_bytes: int | None = None
    rerank: bool | None = None
    min_score: float | None = Field(None, strict=False)
    reference_time: datetime | str | None = None
    time_filter: bool | None = None


class RecallView(Answer):
    """Answer of recall: the session's summary and recent messages, the actor's relevant
    memories, and ``context``, all of it as one text ready to be a system prompt."""

    session_id: str
    actor_id: str | None
    summary: str | None
    messages: list[Message]
    memories: list[MemoryView]
    context: str
    messages_omitted: int = 0
    """The oldest messages left out to keep the answer under its byte budget (``get_session``
    with ``before_seq`` reads them)."""
    memories_omitted: int = 0
    """The lowest ranked memories left out for the same reason, after every message was."""
    reranked: bool | None = None
    """As a search's ``reranked``."""
    time_window: TimeWindowView | None = None
    """As a search's ``time_window``."""
    profile: dict[str, ProfileValue] | None = None
    """The actor's profile values (None when the store declares no profile field, or there
    is no actor); also the first section of ``context``."""


# --- errors ----------------------------------------------------------------------------------


class ErrorDetail(Answer):
    """One problem of a rejected request: the field path and what is wrong with it."""

    field: str
    problem: str


class ErrorBody(Answer):
    """The API's error shape: ``{"error", "message", "details"?}``."""

    error: str
    message: str
    details: list[ErrorDetail] | None = None


# --- usage ------------------------------------------------------------------------------------


class UsageDay(Answer):
    """One UTC day of use: requests (and by route), messages and memories added, memories
    superseded and deleted, background runs, and model tokens as the providers reported them."""

    date: date
    requests: int
    requests_by_route: dict[str, int]
    messages_added: int
    memories_added: int
    memories_superseded: int
    memories_deleted: int
    extraction_runs: int
    summarization_runs: int
    llm_input_tokens: int
    llm_output_tokens: int
    embedding_tokens: int
    rerank_calls: int = 0  # 0 from a server older than these counters
    rerank_documents: int = 0
    profile_updates: int = 0
    consolidation_runs: int = 0


class Holding(Answer):
    """What a store (or the organization's stores) holds now; ``bytes`` is Redis's estimate."""

    sessions: int
    messages: int
    memories: int
    bytes: int


class UsageReport(Answer):
    """Usage by day, oldest first, and what is held now; for the organization, the instances
    that could not be read for ``now``."""

    days: list[UsageDay]
    now: Holding
    unreachable: list[UnreachableInstance] = Field(default_factory=list)
