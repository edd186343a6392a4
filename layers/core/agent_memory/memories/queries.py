"""How a read's filters become a ``search.selection.Selection``: ``selection_of`` of a
``MemoryFilters`` (a listing's query parameters or a search's body) and the types asked for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from agent_memory.clock import to_ms
from agent_memory.memories.models import MemoryFilters
from agent_memory.search.selection import Selection


def _ms(moment: datetime | None) -> int | None:
    return to_ms(moment) if moment is not None else None


def selection_of(filters: MemoryFilters, types: Sequence[str] | None = None) -> Selection:
    """The ``Selection`` of ``filters``, limited to ``types`` when given (times in ms)."""
    return Selection(
        types=tuple(types) if types else None,
        include_superseded=filters.include_superseded,
        as_of=_ms(filters.as_of),
        topics=filters.topics or None,
        metadata=tuple(filters.metadata.items()) if filters.metadata else None,
        created_after=_ms(filters.created_after),
        created_before=_ms(filters.created_before),
        occurred_after=_ms(filters.occurred_after),
        occurred_before=_ms(filters.occurred_before),
    )
