"""Pydantic models of stores: their settings (the product seed's settings table), provider
settings, the ``PUT`` body, the stored ``StoreConfig`` and the views of one store and of many.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_memory.database.keys import StoreKeys
from agent_memory.models import (
    AWS_REGION_PATTERN,
    RESERVED_TYPES,
    TYPE_NAME_PATTERN,
    Model,
    View,
    said,
)
from agent_memory.providers.endpoint_urls import check_endpoint_url
from agent_memory.providers.setting import ProviderSetting, Role
from agent_memory.stores.steering import (
    MAX_TYPE_EXAMPLES,
    ExtractionExample,
    ExtractionExamples,
    ExtractionInstructions,
    ProfileField,
    ProfileFields,
    TypeExample,
)
from agent_memory.webhooks.models import WebhookEndpoint, Webhooks

# --- stores ----------------------------------------------------------------------------------


class CustomType(Model):
    """A store-specific memory type: ``{"name": "order_issue", "description": "..."}``."""

    name: Annotated[str, StringConstraints(pattern=TYPE_NAME_PATTERN)] = Field(
        description="Lower-case letters, digits and '_', starting with a letter; 1-40 characters."
    )
    description: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    examples: Annotated[list[TypeExample], Field(max_length=MAX_TYPE_EXAMPLES)] | None = Field(
        None,
        description="Up to 3 short texts of memories of this type, shown to extraction with "
        "its description.",
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_TYPES:
            raise ValueError(f"'{value}' is a built-in type; custom types need another name")
        return value


# The settings' ranges, shared by the stored settings and the PUT body (so the OpenAPI document
# shows them on the body a client sends).
ExtractionDelaySeconds = Annotated[int, Field(ge=30, le=3600)]
SummarizeAfter = Annotated[int, Field(ge=1, le=1000)]
KeepRecent = Annotated[int, Field(ge=0, le=999)]
MAX_SESSION_TTL_SECONDS = 31_536_000
MAX_MEMORY_TTL_SECONDS = 315_360_000
SessionTtlSeconds = Annotated[int, Field(ge=60, le=MAX_SESSION_TTL_SECONDS)]
MemoryTtlSeconds = Annotated[int, Field(ge=60, le=MAX_MEMORY_TTL_SECONDS)]
IMPORT_CLOCK_SKEW_SECONDS = 86_400
"""How far past now plus the largest TTL an imported ``expires_at`` may be: an export's times
come from another clock. Later is refused, or an import could keep data for ever."""
DedupeThreshold = Annotated[float, Field(gt=0, le=1)]
CustomTypes = Annotated[list[CustomType], Field(max_length=3)]
Dimensions = Annotated[int, Field(ge=1, le=8192)]
RerankCandidates = Annotated[int, Field(ge=1, le=200)]
ConsolidateAfterMemories = Annotated[int, Field(ge=0, le=100_000)]
ConsolidationMode = Literal["apply", "review"]


class StoreSettings(Model):
    """The seed's settings table, with its defaults and the ranges this project enforces."""

    extraction_delay_seconds: ExtractionDelaySeconds = 300
    summarize_after: SummarizeAfter = 40
    keep_recent: KeepRecent = 12
    session_ttl_seconds: SessionTtlSeconds = 3600
    memory_ttl_seconds: MemoryTtlSeconds = 31_536_000
    dedupe_threshold: DedupeThreshold = 0.92
    custom_types: CustomTypes = Field(default_factory=list)
    redact_pii: bool = True
    # With redact_pii: whether a run of 13 to 19 digits without separators that passes the Luhn
    # check is a card number (docs/redaction.md); grouped card numbers are redacted either way.
    redact_card_digit_runs: bool = True
    # Endpoints told of the store's events (agent_memory.webhooks); up to five.
    webhooks: Webhooks = Field(default_factory=list)
    # What extraction is told (stores.steering): the operator's instructions and examples, and
    # the fields of an actor's profile it fills.
    extraction_instructions: ExtractionInstructions | None = None
    extraction_examples: ExtractionExamples = Field(default_factory=list)
    profile_fields: ProfileFields = Field(default_factory=list)
    # Consolidation (agent_memory.consolidation, docs/consolidation.md): a run after this many
    # new memories of an actor (0: only when asked for), its plan applied or kept for review.
    consolidate_after_memories: ConsolidateAfterMemories = 50
    consolidation_mode: ConsolidationMode = "apply"

    @field_validator("extraction_examples")
    @classmethod
    def _example_types(
        cls, value: list[ExtractionExample], info: ValidationInfo
    ) -> list[ExtractionExample]:
        custom = info.data.get("custom_types") or []
        types = {*RESERVED_TYPES, *(t.name for t in custom)}
        for at, example in enumerate(value):
            for place, memory in enumerate(example.memories):
                if memory.type not in types:
                    raise ValueError(
                        f"example {at}, memory {place}: type '{memory.type}' is not one of "
                        f"this store's types ({', '.join(sorted(types))})"
                    )
        return value

    @field_validator("profile_fields")
    @classmethod
    def _unique_fields(cls, value: list[ProfileField]) -> list[ProfileField]:
        names = [f.name for f in value]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"names the field '{repeated[0]}' twice; names must be unique")
        return value

    @field_validator("webhooks")
    @classmethod
    def _one_endpoint_per_url(cls, value: list[WebhookEndpoint]) -> list[WebhookEndpoint]:
        urls = [w.url for w in value]
        if len(set(urls)) != len(urls):
            raise ValueError("names an endpoint URL twice; give one endpoint all its events")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> StoreSettings:
        if self.keep_recent >= self.summarize_after:
            raise ValueError(
                f"keep_recent ({self.keep_recent}) must be below summarize_after "
                f"({self.summarize_after})"
            )
        if self.session_ttl_seconds <= self.extraction_delay_seconds:
            raise ValueError(
                f"session_ttl_seconds ({self.session_ttl_seconds}) must exceed "
                f"extraction_delay_seconds ({self.extraction_delay_seconds}), or sessions "
                "would expire before extraction reads them"
            )
        names = [t.name for t in self.custom_types]
        if len(set(names)) != len(names):
            raise ValueError("custom_types names must be unique")

        return self


LlmProvider = Literal["none", "openai", "anthropic", "bedrock", "custom"]
EmbedProvider = Literal["none", "openai", "bedrock", "custom"]
RerankProvider = Literal["none", "cohere", "voyage", "jina", "bedrock", "custom", "llm"]
AwsRegion = Annotated[
    str,
    StringConstraints(pattern=AWS_REGION_PATTERN, max_length=32),
    Field(description="An AWS region such as 'us-east-1', for the 'bedrock' providers."),
]
ModelName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
BaseUrl = Annotated[str, StringConstraints(min_length=1, max_length=2000)]


class ProviderSettings(Model):
    """Which language model and embedding model a store calls (DESIGN section 5).

    Custom base URLs must be clean public https URLs, unless validation runs with the context
    ``{"allow_private_endpoints": True}`` (the local stack's KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1),
    which admits plain http and private addresses so tests can use loopback servers."""

    llm_provider: LlmProvider = "none"
    llm_model: ModelName | None = None
    llm_base_url: BaseUrl | None = None
    embed_provider: EmbedProvider = "none"
    embed_model: ModelName | None = None
    embed_base_url: BaseUrl | None = None
    dimensions: Dimensions = 1536
    rerank_provider: RerankProvider = "none"
    rerank_model: ModelName | None = None
    rerank_base_url: BaseUrl | None = None
    # With a reranker: how many fused candidates a search or recall asks it to order
    # (memories.reranking); the top `limit` of its order are returned.
    rerank_candidates: RerankCandidates = 50
    # Where the 'bedrock' providers are called (providers.bedrock); kept when no provider is
    # 'bedrock' (it is not a secret, and switching back needs it again).
    aws_region: AwsRegion | None = None

    @model_validator(mode="after")
    def _coherent_providers(self, info: ValidationInfo) -> ProviderSettings:
        self._check_llm_reranker()
        for kind, provider, model, base_url in (
            ("llm", self.llm_provider, self.llm_model, self.llm_base_url),
            ("embed", self.embed_provider, self.embed_model, self.embed_base_url),
            ("rerank", self.rerank_provider, self.rerank_model, self.rerank_base_url),
        ):
            if provider == "llm":
                if base_url is not None:
                    raise ValueError(
                        "rerank_base_url is only used when rerank_provider is 'custom'"
                    )
                continue
            if provider != "none" and model is None:
                raise ValueError(f"{kind}_model is required when {kind}_provider is '{provider}'")
            if provider == "bedrock":
                self._check_bedrock(kind, base_url, info)
            elif provider == "custom":
                if base_url is None:
                    raise ValueError(
                        f"{kind}_base_url is required when {kind}_provider is 'custom'"
                    )
                _check_base_url(kind, base_url, info)
            elif base_url is not None:
                raise ValueError(f"{kind}_base_url is only used when {kind}_provider is 'custom'")
        if self.embed_provider == "bedrock" and self.embed_model is not None:
            from agent_memory.providers.bedrock import embed_model_problem

            problem = embed_model_problem(self.embed_model, self.dimensions)
            if problem is not None:
                raise ValueError(f"embed_model: {problem} (see the store's 'dimensions')")
        return self

    def _check_llm_reranker(self) -> None:
        """``rerank_provider 'llm'`` scores with the store's language model: it needs one, and
        its model is ``llm_model``."""
        if self.rerank_provider != "llm":
            return
        if self.llm_provider == "none":
            raise ValueError(
                "rerank_provider 'llm' scores with the store's language model: set "
                "llm_provider first"
            )
        if self.rerank_model is not None:
            raise ValueError(
                "rerank_model is not used when rerank_provider is 'llm' (llm_model is)"
            )

    def _check_bedrock(self, kind: str, base_url: str | None, info: ValidationInfo) -> None:
        """A 'bedrock' provider needs ``aws_region``; its base URL replaces Bedrock's address
        only on a stack that allows private endpoints (a loopback stand-in)."""
        if self.aws_region is None:
            raise ValueError(f"aws_region is required when {kind}_provider is 'bedrock'")
        if base_url is None:
            return
        if not (info.context or {}).get("allow_private_endpoints") and not (info.context or {}).get(
            "stored"
        ):
            raise ValueError(
                f"{kind}_base_url is only used with {kind}_provider 'bedrock' by a local "
                "stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 (Bedrock is called at "
                "its regional address)"
            )
        _check_base_url(kind, base_url, info)


def _check_base_url(kind: str, base_url: str, info: ValidationInfo) -> None:
    context = info.context or {}
    if not context.get("stored"):  # else checked when saved; calls check it again
        check_endpoint_url(
            f"{kind}_base_url",
            base_url,
            allow_private=bool(context.get("allow_private_endpoints")),
        )


class StorePut(Model):
    """Body of ``PUT .../agent-memory/{store}``. Omitted fields keep their value (or default).

    ``llm_api_key`` / ``embed_api_key`` / ``rerank_api_key`` are write-only; ``null`` removes a
    stored key.
    """

    llm_provider: LlmProvider | None = None
    llm_model: ModelName | None = None
    llm_base_url: BaseUrl | None = None
    llm_api_key: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, repr=False
    )
    embed_provider: EmbedProvider | None = None
    embed_model: ModelName | None = None
    embed_base_url: BaseUrl | None = None
    embed_api_key: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, repr=False
    )
    dimensions: Dimensions | None = None
    rerank_provider: RerankProvider | None = None
    rerank_model: ModelName | None = None
    rerank_base_url: BaseUrl | None = None
    rerank_api_key: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = Field(
        None, repr=False
    )
    rerank_candidates: RerankCandidates | None = None
    aws_region: AwsRegion | None = None
    extraction_delay_seconds: ExtractionDelaySeconds | None = None
    summarize_after: SummarizeAfter | None = None
    keep_recent: KeepRecent | None = None
    session_ttl_seconds: SessionTtlSeconds | None = None
    memory_ttl_seconds: MemoryTtlSeconds | None = None
    dedupe_threshold: DedupeThreshold | None = None
    custom_types: CustomTypes | None = None
    redact_pii: bool | None = None
    redact_card_digit_runs: bool | None = None
    webhooks: Webhooks | None = None
    extraction_instructions: ExtractionInstructions | None = None
    extraction_examples: ExtractionExamples | None = None
    profile_fields: ProfileFields | None = None
    consolidate_after_memories: ConsolidateAfterMemories | None = None
    consolidation_mode: ConsolidationMode | None = None


class StoreConfig(StoreSettings, ProviderSettings):
    """A store as kept in ``kividb:mem:@stores``; API keys only as ciphertext."""

    model_config = ConfigDict(extra="ignore")

    name: str
    # See database.keys.StoreKeys: new for every creation of a store under a name. "0" reads
    # documents written before incarnations existed (their old keys are not carried over).
    incarnation: str = "0"
    # See database.keys.MemoryIndexKeys: how many partitions the store-level memory indexes have. 1
    # reads documents of before partitions (whose indexes are the one partition's keys).
    memory_partitions: int = Field(default=1, ge=1)
    created_at: datetime
    updated_at: datetime
    llm_api_key_ciphertext: str | None = None
    embed_api_key_ciphertext: str | None = None
    rerank_api_key_ciphertext: str | None = None
    webhook_secret_ciphertext: str | None = None
    webhook_secret_created_at: datetime | None = None

    def keys(self) -> StoreKeys:
        """The Redis keys of this incarnation of the store (``database.keys.StoreKeys``), one
        object per incarnation in this process (its key names, the partitions' 256 among them,
        are built once and shared by the sessions, memories and indexes of every request)."""
        return _store_keys(self.name, self.incarnation, self.memory_partitions)

    def provider_setting(self, role: Role) -> ProviderSetting:
        """The store's ``role`` provider (``llm``, ``embed``, ``rerank``) as the provider
        factory reads it (``providers.factory``): its ``<role>_*`` settings and sealed key."""
        return ProviderSetting(
            role=role,
            provider=getattr(self, f"{role}_provider"),
            model=getattr(self, f"{role}_model"),
            base_url=getattr(self, f"{role}_base_url"),
            aws_region=self.aws_region,
            key=getattr(self, f"{role}_api_key_ciphertext"),
        )


@lru_cache(maxsize=1024)
def _store_keys(name: str, incarnation: str, memory_partitions: int) -> StoreKeys:
    return StoreKeys(name, incarnation, memory_partitions)


class StoreCounts(View):
    """Live sessions, live memories, and live sessions with messages extraction has not read."""

    sessions: int
    memories: int
    waiting_for_extraction: int


class StoreView(View):
    """What clients see of a store. Never carries an API key, only ``has_*_api_key``."""

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
    rerank_provider: RerankProvider = "none"
    rerank_model: str | None = None
    rerank_base_url: str | None = None
    has_rerank_api_key: bool = False
    rerank_candidates: int = 50
    aws_region: str | None = None
    extraction_delay_seconds: int
    summarize_after: int
    keep_recent: int
    session_ttl_seconds: int
    memory_ttl_seconds: int
    dedupe_threshold: float
    custom_types: list[CustomType]
    redact_pii: bool
    redact_card_digit_runs: bool
    webhooks: list[WebhookEndpoint] = Field(default_factory=list)
    has_webhook_secret: bool = False
    extraction_instructions: str | None = None
    extraction_examples: list[ExtractionExample] = Field(default_factory=list)
    profile_fields: list[ProfileField] = Field(default_factory=list)
    consolidate_after_memories: int = 50
    consolidation_mode: ConsolidationMode = "apply"
    created_at: datetime
    updated_at: datetime
    counts: StoreCounts | None = None
    last_extraction_at: datetime | None = None
    last_extraction_error: str | None = None


MAX_STORE_PAGE = 1_000
"""The most stores one page of a store listing holds (its ``limit``, by default this)."""
STORE_CURSOR_PATTERN = said(
    r"^[A-Za-z0-9_\-]{1,64}/[A-Za-z0-9_\-]{1,64}$", "the next_cursor the page before gave"
)
"""A store listing's cursor: ``<instance id>/<store>`` of the last store of the page before."""


class StoreList(View):
    """Answer of the store listings: a page of stores by instance then name (at most
    ``limit``, fewer when more would pass the answer's byte budget); ``next_cursor`` asks for
    the next page, null on the last."""

    stores: list[StoreView]
    next_cursor: str | None = Field(
        None, description="Pass as cursor for the next page; null on the last page."
    )


class UnreachableInstance(View):
    """An instance whose stores ``GET /agent-memory`` could not list, and why (the database
    could not be reached, refused, or did not answer in time)."""

    instance_id: str
    message: str


class OrganizationStoreList(StoreList):
    """Answer of ``GET /agent-memory``: the stores of every instance that answered, by instance
    then name, and the instances that did not (empty when all answered)."""

    unreachable: list[UnreachableInstance]
