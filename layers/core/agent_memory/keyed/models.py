"""Request and answer models of keyed memories (``/keyed-memories`` routes), with the limits
they check, and the record kept in the database (``KeyedRecord``).

Namespaces are lists of labels, as LangGraph's stores take them: each label a non-empty string
without ``.`` (LangGraph refuses ``.`` in labels, ``langgraph.store.base._validate_namespace``,
because stores join labels with it; here it is what lets a namespace travel in one query
parameter, ``a.b``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    model_validator,
)

from agent_memory.models import (
    MAX_QUERY_CHARS,
    Model,
    View,
    compact_json,
    json_depth,
    problem_in_words,
)

MAX_LABELS = 20
MAX_LABEL_CHARS = 256
MAX_KEY_CHARS = 1_024
MAX_VALUE_BYTES = 65_536
MAX_VALUE_DEPTH = 32
MAX_TEXTS = 32
MAX_TEXT_CHARS = 8_000
MAX_FILTER_CONDITIONS = 32
MAX_FILTER_PATH_CHARS = 256
MAX_SEARCH_LIMIT = 1_000
MAX_SEARCH_OFFSET = 10_000
MAX_NAMESPACE_LIMIT = 1_000
MAX_NAMESPACE_OFFSET = 1_000_000
MAX_TTL_SECONDS = 315_360_000
"""Ten years: the longest ``ttl_seconds`` (the store's ``memory_ttl_seconds`` has the same
bound)."""
WILDCARD = "*"
"""In a namespace listing's ``prefix`` or ``suffix``: any one label (as LangGraph's
``MatchCondition`` reads it)."""


def _label(value: str) -> str:
    if "." in value:
        raise ValueError("a namespace label cannot contain '.'")
    return value


Label = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS), AfterValidator(_label)
]
Namespace = Annotated[list[Label], Field(min_length=1, max_length=MAX_LABELS)]
NamespacePrefix = Annotated[list[Label], Field(max_length=MAX_LABELS)]
Key = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)]


def _small_value(value: dict[str, Any]) -> dict[str, Any]:
    size = len(compact_json(value).encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise ValueError(f"value is {size} bytes of JSON; at most {MAX_VALUE_BYTES}")
    if json_depth(value) > MAX_VALUE_DEPTH:
        raise ValueError(f"value nests deeper than {MAX_VALUE_DEPTH} levels")
    return value


Value = Annotated[dict[str, Any], AfterValidator(_small_value)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]
TtlSeconds = Annotated[float, Field(gt=0, le=MAX_TTL_SECONDS)]


class KeyedMemoryPut(Model):
    """Body of ``PUT .../keyed-memories``: keep ``value`` under ``(namespace, key)``, replacing
    what was there (its ``created_at`` stays).

    Found by meaning through ``vectors`` (each of the store's dimensions), or ``texts`` the
    store embeds, or, with neither, the value's JSON text when the store has an embedding model;
    ``index: false`` keeps it out of searches by meaning. ``ttl_seconds``: it expires that long
    after this write (or its last read with ``refresh_ttl``); the store's ``memory_ttl_seconds``
    when left out."""

    namespace: Namespace
    key: Key
    value: Value
    texts: list[Text] | None = Field(None, min_length=1, max_length=MAX_TEXTS)
    vectors: list[list[float]] | None = Field(None, min_length=1, max_length=MAX_TEXTS)
    index: bool = True
    ttl_seconds: TtlSeconds | None = None

    @model_validator(mode="after")
    def _one_way_to_index(self) -> KeyedMemoryPut:
        if self.texts is not None and self.vectors is not None:
            raise ValueError("give texts or vectors, not both")
        if not self.index and (self.texts is not None or self.vectors is not None):
            raise ValueError("index is false: give neither texts nor vectors")
        return self


class KeyedSearchRequest(Model):
    """Body of ``POST .../keyed-memories/search``. Without ``query`` (or ``query_vector``) the
    matches come newest first (``updated_at``); with one, most similar first, and only keyed
    memories kept with an index. ``filter`` maps a dotted path in the value to a JSON value it
    must equal, or to operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``)."""

    namespace_prefix: NamespacePrefix = Field(default_factory=list)
    filter: dict[str, Any] | None = Field(None, max_length=MAX_FILTER_CONDITIONS)
    query: Annotated[str, StringConstraints(min_length=1, max_length=MAX_QUERY_CHARS)] | None = None
    query_vector: list[float] | None = Field(None, max_length=8192)
    limit: int = Field(10, ge=1, le=MAX_SEARCH_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_SEARCH_OFFSET)
    refresh_ttl: bool = False


class NamespacesRequest(Model):
    """Body of ``POST .../keyed-memories/namespaces``: the namespaces that hold keyed memories,
    in label order; ``prefix`` / ``suffix`` match whole labels, ``*`` any one label;
    ``max_depth`` cuts longer ones to that many labels (each cut namespace listed once)."""

    prefix: list[Label] | None = Field(None, max_length=MAX_LABELS)
    suffix: list[Label] | None = Field(None, max_length=MAX_LABELS)
    max_depth: int | None = Field(None, ge=1, le=MAX_LABELS)
    limit: int = Field(100, ge=1, le=MAX_NAMESPACE_LIMIT)
    offset: int = Field(0, ge=0, le=MAX_NAMESPACE_OFFSET)


class KeyedMemoryView(View):
    """A keyed memory as answered. ``score`` (0 to 1, higher is closer) and ``similarity``
    (the cosine of the closest of its vectors to the query, -1 to 1) only in a search by
    meaning."""

    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    score: float | None = None
    similarity: float | None = None


class KeyedSearchResult(View):
    """Answer of a keyed search: ``items`` best (or newest) first. ``items_omitted`` says how
    many of the page's ``limit`` were left out to keep the answer under its byte budget
    (``answers``); ``next_offset`` is the ``offset`` that asks for the matches after these, null
    when there are none (or they lie past the deepest offset, ``MAX_SEARCH_OFFSET``)."""

    items: list[KeyedMemoryView]
    items_omitted: int = Field(
        0,
        description="Matches of this page's limit left out to keep the answer under its byte "
        "budget (0 when none were); ask again with next_offset for them.",
    )
    next_offset: int | None = Field(
        None, description="The offset of the next page; null when no match is left."
    )


class NamespaceList(View):
    """Answer of a namespace listing: ``next_offset`` is the ``offset`` of the next page (the
    page was cut by ``limit`` or by the answer's byte budget), null on the last."""

    namespaces: list[list[str]]
    next_offset: int | None = Field(
        None, description="The offset of the next page; null on the last."
    )


class KeyedRecord(BaseModel):
    """A keyed memory's JSON as stored (``keyed.records``): times in ms since the epoch;
    ``dims`` and ``vectors`` say how the float32 bytes after the JSON's line split."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    namespace: list[str]
    key: str
    value: dict[str, Any]
    updated_at: int
    dims: int = 0
    vectors: int = 0


_NAMESPACE = TypeAdapter(Namespace)


def namespace_from_query(text: str, field: str = "query.namespace") -> list[str]:
    """A namespace written as one query parameter, its labels joined by ``.`` (``a.b`` is
    ``["a", "b"]``); ``ValidationFailed`` naming ``field`` when a label is empty or too long, or
    there are too many."""
    from pydantic import ValidationError

    from agent_memory.errors import ValidationFailed

    try:
        return _NAMESPACE.validate_python(text.split("."))
    except ValidationError as exc:
        problem = problem_in_words(exc.errors()[0])
        raise ValidationFailed(
            f"'{field.removeprefix('query.')}' is labels joined by '.', each 1 to "
            f"{MAX_LABEL_CHARS} characters, at most {MAX_LABELS}: {problem}.",
            details=[{"field": field, "problem": problem}],
        ) from exc
