"""A keyed search's candidates, read in chunks so that its memory stays bounded whatever the
number of keyed memories under its prefix (issue 32: 8,000 values of 60 KB loaded at once
peaked a worker at 1,071 MB).

Two passes. The first reads each namespace's live keys (names and expiries only), then their
entries ``CHUNK`` at a time: each is decoded, filtered and ranked, and only a small candidate
(its rank, namespace, key and expiry) is kept, for the ``offset + limit`` best; the entry
itself is dropped before the next chunk is read. The second reads the page's entries again by
key (one pipeline) and answers them as they are then: a memory deleted, expired or changed so
that it no longer matches between the two passes is left out of the page, and one changed is
answered as changed (its scores computed again). So a search holds at most ``CHUNK`` decoded
entries, ``2 * (offset + limit) + CHUNK`` candidates and its page at once (docs/limits.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis
from numpy.typing import NDArray

from agent_memory.database.client import database_errors
from agent_memory.database.keys import KeyedKeys
from agent_memory.keyed.filters import matches
from agent_memory.keyed.records import Entry

CHUNK = 64
"""Entries read and decoded at once: with values of at most 64 KB
(``keyed.models.MAX_VALUE_BYTES``), about 4 MB of entries, about 20 MB once decoded."""

Ranked = tuple[Entry, float, dict[str, Any]]
"""An entry of the page, its expiry (ms) and its scores (``similarity`` and ``score`` with a
query, none without)."""


@dataclass(frozen=True)
class Candidate:
    """A memory that may be on the page: ``order`` (smaller first), where it is, its expiry."""

    order: tuple[Any, ...]
    namespace: tuple[str, ...]
    key: str
    expiry: float


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def scores_of(entry: Entry, query: NDArray[np.float32] | None) -> dict[str, Any] | None:
    """``entry``'s scores against ``query`` (the best of its vectors), ``{}`` without a query,
    or None when it cannot be ranked by ``query`` (no vectors, or of another size)."""
    if query is None:
        return {}
    if entry.vectors is None or entry.vectors.shape[1] != query.shape[0]:
        return None
    similarity = float(np.clip(np.max(entry.vectors @ query), -1.0, 1.0))
    return {"similarity": similarity, "score": (1.0 + similarity) / 2.0}


def _order(entry: Entry, scores: dict[str, Any]) -> tuple[Any, ...]:
    """Answer order: most similar first with a query, else newest first; ties by namespace
    and key."""
    record = entry.record
    first = -scores["similarity"] if scores else -record.updated_at
    return (first, tuple(record.namespace), record.key)


class Search:
    """One search's reads on ``client`` (a client that answers bytes); ``keys_of`` gives a
    namespace's keys. Errors: ``DatabaseUnavailable``."""

    def __init__(
        self,
        client: redis.Redis,
        keys_of: Callable[[Sequence[str]], KeyedKeys],
        now_ms: int,
        where: Any,
        query: NDArray[np.float32] | None,
    ) -> None:
        self._redis = client
        self._keys_of = keys_of
        self._now_ms = now_ms
        self._where = where
        self._query = query
        self.matched = 0
        """How many entries matched the filter and could be ranked (counted by ``best``)."""

    def best(self, namespaces: Sequence[tuple[str, ...]], most: int) -> list[Candidate]:
        """The ``most`` first candidates of ``namespaces`` in answer order (first pass)."""
        kept: list[Candidate] = []
        for entry, expiry in self._entries(namespaces):
            scores = self._admitted(entry)
            if scores is None:
                continue
            self.matched += 1
            record = entry.record
            kept.append(
                Candidate(_order(entry, scores), tuple(record.namespace), record.key, expiry)
            )
            if len(kept) > 2 * most + CHUNK:
                kept.sort(key=lambda c: c.order)
                del kept[most:]
        kept.sort(key=lambda c: c.order)
        return kept[:most]

    def page(self, chosen: Sequence[Candidate]) -> list[Ranked]:
        """The entries of ``chosen`` as they are now, in its order, each with its expiry and
        scores; those gone, expired or no longer matching left out (second pass)."""
        if not chosen:
            return []
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            for candidate in chosen:
                keys = self._keys_of(candidate.namespace)
                pipe.hget(keys.items, candidate.key)
                pipe.zscore(keys.expiry, candidate.key)
            replies = pipe.execute()
        found: list[Ranked] = []
        for raw, expiry in zip(replies[::2], replies[1::2], strict=True):
            if raw is None or expiry is None or float(expiry) <= self._now_ms:
                continue
            entry = Entry(raw)
            scores = self._admitted(entry)
            if scores is not None:
                found.append((entry, float(expiry), scores))
        return found

    def _admitted(self, entry: Entry) -> dict[str, Any] | None:
        """``entry``'s scores when it matches the filter and can be ranked, else None."""
        if not matches(entry.record.value, self._where):
            return None
        return scores_of(entry, self._query)

    def _entries(self, namespaces: Sequence[tuple[str, ...]]) -> Iterator[tuple[Entry, float]]:
        """Every live entry of ``namespaces`` with its expiry (ms), ``CHUNK`` read at a time."""
        for namespace in namespaces:
            keys = self._keys_of(namespace)
            with database_errors():
                found: Any = self._redis.zrangebyscore(
                    keys.expiry, f"({self._now_ms}", "+inf", withscores=True
                )
            live: list[tuple[str, float]] = [(_text(m), float(e)) for m, e in found]
            del found
            for start in range(0, len(live), CHUNK):
                chunk = live[start : start + CHUNK]
                with database_errors():
                    raws: Any = self._redis.hmget(keys.items, [member for member, _ in chunk])
                for (_, expiry), raw in zip(chunk, raws, strict=True):
                    if raw is not None:
                        yield Entry(raw), expiry
