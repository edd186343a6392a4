"""What ``MemoryClient`` and ``AsyncMemoryClient`` share: the request-body helpers, the
configuration of a client (``_Base``), and ``UNSET``, the default of ``update_memory``'s
fields."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx
import pydantic

from kividb_memory import _http, models as m

T = TypeVar("T", bound=pydantic.BaseModel)


class _Unset:
    """The default of ``update_memory``'s fields: not sent (``None`` is sent as ``null``)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _patch(**fields: Any) -> m.MemoryPatch:
    return m.MemoryPatch.model_validate(
        {name: value for name, value in fields.items() if value is not UNSET}
    )


def _memory(
    text: str,
    actor_id: str | None,
    type: str | None,
    topics: Sequence[str] | None,
    vector: Sequence[float] | None,
    metadata: Mapping[str, Any] | None,
    importance: float | None,
    confidence: float | None,
    supersedes: str | None = None,
    occurred_at: datetime | str | None = None,
) -> m.MemoryIn:
    return m.MemoryIn(
        supersedes=supersedes,
        occurred_at=occurred_at,
        text=text,
        actor_id=actor_id,
        type=type,
        topics=list(topics) if topics is not None else None,
        vector=list(vector) if vector is not None else None,
        metadata=dict(metadata) if metadata is not None else None,
        importance=importance,
        confidence=confidence,
    )


def _search(
    query: str,
    mode: m.SearchMode,
    actor_id: str | None,
    types: Sequence[str] | None,
    limit: int | None,
    query_vector: Sequence[float] | None,
    filters: Mapping[str, Any],
    rerank: bool | None = None,
    min_score: float | None = None,
) -> m.SearchRequest:
    given = dict(filters)
    if given.get("topics") is not None:
        given["topics"] = list(given["topics"])
    if given.get("metadata") is not None:
        given["metadata"] = dict(given["metadata"])
    return m.SearchRequest(
        query=query,
        mode=mode,
        actor_id=actor_id,
        types=list(types) if types is not None else None,
        limit=limit,
        query_vector=list(query_vector) if query_vector is not None else None,
        rerank=rerank,
        min_score=min_score,
        **given,
    )


def _session_import(session: Mapping[str, Any]) -> m.SessionImport:
    """A ``SessionImport`` from an exported session's fields (``session_id`` and
    ``next_after_seq``, which it has no place for, left out)."""
    fields = {k: v for k, v in session.items() if k not in ("session_id", "next_after_seq")}
    return m.SessionImport.model_validate(fields)


def _batch(memories: Sequence[m.ImportedMemory | Mapping[str, Any]]) -> m.MemoryImportBatch:
    return m.MemoryImportBatch(
        memories=[
            memory
            if isinstance(memory, m.ImportedMemory)
            else m.ImportedMemory.model_validate(memory)
            for memory in memories
        ]
    )


When = datetime | str | None
"""A time: a ``datetime`` (naive ones are UTC) or ISO 8601 text."""


def _filters(**given: Any) -> dict[str, Any]:
    """The memory filters of a search or a listing, by name (``None``: not given)."""
    return given


class _Base:
    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float | httpx.Timeout | None,
        max_retries: int,
        max_retry_wait: float,
    ) -> None:
        self._config = _http.resolve_config(base_url, api_key, max_retries, max_retry_wait)
        if timeout is None:
            self._timeout = _http.DEFAULT_TIMEOUT
        elif isinstance(timeout, httpx.Timeout):
            self._timeout = timeout
        else:
            self._timeout = httpx.Timeout(timeout)

    @property
    def base_url(self) -> str:
        """The API's base URL, without a trailing ``/``."""
        return self._config.base_url

    def __repr__(self) -> str:
        shown = _http.shown_url(self._config.base_url)
        return f"{type(self).__name__}(base_url={shown!r}, api_key='***')"
