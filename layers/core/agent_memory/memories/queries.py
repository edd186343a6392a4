"""How a read's request becomes a ``search.selection.Selection``: a listing's query parameters
(``listing_selection``) and a search body (``search_selection``), with their own errors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jiter
from pydantic import TypeAdapter, ValidationError as PydanticValidationError

from agent_memory.clock import to_ms
from agent_memory.errors import ValidationFailed
from agent_memory.memories.models import MAX_TOPIC_CHARS, MAX_TOPICS, Metadata, SearchRequest
from agent_memory.search.selection import Selection

_METADATA: TypeAdapter[dict[str, Any]] = TypeAdapter(Metadata)


def listing_selection(
    *,
    include_superseded: bool = False,
    as_of: datetime | None = None,
    topics: str | None = None,
    metadata: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
) -> Selection:
    """The ``Selection`` of a listing's query parameters. ``topics`` is comma-separated (at
    most ``MAX_TOPICS`` of at most ``MAX_TOPIC_CHARS`` characters; a topic holding a comma can
    only be asked for by search); ``metadata`` is a JSON object (strict JSON, the limits of a
    memory's metadata). ``ValidationFailed`` names ``query.topics`` or ``query.metadata``."""

    def ms(moment: datetime | None) -> int | None:
        return to_ms(moment) if moment is not None else None

    wanted = None
    if topics is not None:
        wanted = tuple(t.strip() for t in topics.split(",") if t.strip())
        if not wanted or len(wanted) > MAX_TOPICS or any(len(t) > MAX_TOPIC_CHARS for t in wanted):
            problem = (
                f"1 to {MAX_TOPICS} comma-separated topics of at most {MAX_TOPIC_CHARS} "
                "characters each"
            )
            raise ValidationFailed(
                f"'topics' must be {problem}.",
                details=[{"field": "query.topics", "problem": f"must be {problem}"}],
            )
    pairs = None
    if metadata is not None:
        try:
            value = _METADATA.validate_python(
                jiter.from_json(metadata.encode(), allow_inf_nan=False, catch_duplicate_keys=True)
            )
        except (ValueError, PydanticValidationError) as exc:
            problem = 'must be a JSON object such as {"team": "ops"} (at most 4,096 bytes)'
            raise ValidationFailed(
                "'metadata' must be a JSON object of the top-level keys and values to match.",
                details=[{"field": "query.metadata", "problem": problem}],
            ) from exc
        pairs = tuple(value.items()) or None
    return Selection(
        include_superseded=include_superseded,
        as_of=ms(as_of),
        topics=wanted,
        metadata=pairs,
        created_after=ms(created_after),
        created_before=ms(created_before),
        occurred_after=ms(occurred_after),
        occurred_before=ms(occurred_before),
    )


def search_selection(request: SearchRequest) -> Selection:
    """The ``Selection`` of a search body."""

    def ms(moment: datetime | None) -> int | None:
        return to_ms(moment) if moment is not None else None

    return Selection(
        types=tuple(request.types) if request.types else None,
        include_superseded=request.include_superseded,
        as_of=ms(request.as_of),
        topics=tuple(request.topics) if request.topics else None,
        metadata=tuple(request.metadata.items()) if request.metadata else None,
        created_after=ms(request.created_after),
        created_before=ms(request.created_before),
        occurred_after=ms(request.occurred_after),
        occurred_before=ms(request.occurred_before),
    )
