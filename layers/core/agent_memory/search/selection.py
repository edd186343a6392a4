"""Which memories a read considers: one rule for the in-memory index and for stored records.

A ``Selection`` says which of the live memories (not expired) a search, a listing or recall
looks at, before any ranking or paging, so a filter never drops results after the top ``limit``
was cut. The index applies it as a mask over its rows (``search.index.ActorIndex``), listings apply
``Selection.admits`` to stored records; both follow the definitions here.

Time (all in ms since the epoch, UTC):

- current: ``valid_until`` is null (no other memory replaced it). The default.
- ``include_superseded``: every kept memory, current or replaced.
- ``as_of = T``: what was current at ``T``: ``valid_from <= T < valid_until`` (a null
  ``valid_until`` is the end of time) and ``T < expires_at``. ``valid_from`` is when the
  memory was kept (its ``created_at``), so a memory kept after ``T`` is not returned, and one
  replaced at or before ``T`` is not either. Only memories still kept now can be returned:
  ``as_of`` reads history that is kept, it does not bring back forgotten or expired ones. With
  ``include_superseded`` as well, every memory kept at ``T`` (``valid_from <= T < expires_at``)
  is returned, whether or not it was current then.

Filters (all given ones must hold):

- ``types``: the memory's type is one of them;
- ``topics``: the memory has at least one of them (compared case-insensitively, by
  ``str.casefold``);
- ``metadata``: for every key given, the memory's metadata has that top-level key with an
  equal value (JSON equality: numbers by value, so ``1`` equals ``1.0``; objects whatever
  their key order; ``true`` is not ``1``);
- ``created_after`` <= ``created_at`` < ``created_before``, and the same for ``occurred_at``
  (a memory whose ``occurred_at`` is unknown never matches an ``occurred_*`` range).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NEVER = 2**63 - 1
"""``valid_until`` of a current memory in the index's int64 column."""
UNKNOWN = -(2**63)
"""``occurred_at`` of a memory whose event time is unknown, in the index's int64 column."""


def canonical(value: Any) -> str:
    """A JSON value as compact text with sorted keys, integral floats written as integers, so
    that two equal JSON values have equal texts (``1.0`` and ``1``; ``{"a":1,"b":2}`` in any
    key order)."""

    def normal(item: Any) -> Any:
        if isinstance(item, bool) or item is None or isinstance(item, str):
            return item
        if isinstance(item, float) and item.is_integer():
            return int(item)
        if isinstance(item, dict):
            return {str(k): normal(v) for k, v in item.items()}
        if isinstance(item, list | tuple):
            return [normal(v) for v in item]
        return item

    return json.dumps(normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def topic_term(topic: str) -> str:
    """The filter term of one topic."""
    return "t\x00" + topic.casefold()


def metadata_term(key: str, value: Any) -> str:
    """The filter term of one top-level metadata key and its value."""
    return "m\x00" + key + "\x00" + canonical(value)


def filter_terms(topics: Sequence[str], metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """Every filter term of a memory: its topics and its top-level metadata pairs."""
    terms = {topic_term(t) for t in topics}
    terms.update(metadata_term(k, v) for k, v in metadata.items())
    return tuple(sorted(terms))


@dataclass(frozen=True)
class RowFacts:
    """What the index keeps of a memory for selections, besides its type, creation and expiry:
    when it became current and stopped being so (``NEVER`` while current), when its event
    happened (``UNKNOWN``), and its ``filter_terms``; for keyword search, the tokens of its
    topics and metadata values (``search.tokenizer.field_tokens``)."""

    valid_from: int
    valid_until: int = NEVER
    occurred: int = UNKNOWN
    terms: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Selection:
    """Which live memories a read considers (see the module docstring). The default is every
    current memory of every type."""

    types: tuple[str, ...] | None = None
    include_superseded: bool = False
    as_of: int | None = None
    topics: tuple[str, ...] | None = None
    metadata: tuple[tuple[str, Any], ...] | None = None
    created_after: int | None = None
    created_before: int | None = None
    occurred_after: int | None = None
    occurred_before: int | None = None

    @property
    def topic_terms(self) -> tuple[str, ...]:
        """The filter terms of ``topics`` (any of them must match)."""
        return tuple(topic_term(t) for t in self.topics or ())

    @property
    def metadata_terms(self) -> tuple[str, ...]:
        """The filter terms of ``metadata`` (all of them must match)."""
        return tuple(metadata_term(k, v) for k, v in self.metadata or ())

    @property
    def wants_occurred(self) -> bool:
        """Whether an ``occurred_*`` range is given."""
        return self.occurred_after is not None or self.occurred_before is not None

    def admits(
        self,
        *,
        now_ms: int,
        memory_type: str,
        created: int,
        expires: int,
        facts: RowFacts,
    ) -> bool:
        """Whether one memory is selected (the rule the index applies to all its rows:
        ``search.index.ActorIndex``, in the same three parts)."""
        if expires <= now_ms or not self._admits_in_time(expires, facts):
            return False
        if self.types and memory_type not in self.types:
            return False
        return self._admits_ranges(created, facts) and self._admits_terms(facts)

    def _admits_in_time(self, expires: int, facts: RowFacts) -> bool:
        """Current (or kept, with ``include_superseded``), now or ``as_of``."""
        if self.as_of is None:
            return self.include_superseded or facts.valid_until == NEVER
        if not (facts.valid_from <= self.as_of < expires):
            return False
        return self.include_superseded or self.as_of < facts.valid_until

    def _admits_ranges(self, created: int, facts: RowFacts) -> bool:
        """Inside the ``created_*`` and ``occurred_*`` ranges."""
        if self.created_after is not None and created < self.created_after:
            return False
        if self.created_before is not None and created >= self.created_before:
            return False
        if not self.wants_occurred:
            return True
        return (
            facts.occurred != UNKNOWN
            and (self.occurred_after is None or facts.occurred >= self.occurred_after)
            and (self.occurred_before is None or facts.occurred < self.occurred_before)
        )

    def _admits_terms(self, facts: RowFacts) -> bool:
        """One of the ``topics`` and every ``metadata`` pair."""
        terms = set(facts.terms)
        if self.topics and not terms.intersection(self.topic_terms):
            return False
        return all(term in terms for term in self.metadata_terms)


CURRENT = Selection()
"""Every current memory (the default of every read)."""
