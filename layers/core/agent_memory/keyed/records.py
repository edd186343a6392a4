"""How a keyed memory is kept: one entry of its namespace's ``items`` hash
(``database.keys.KeyedKeys``), in one place for Python and for the Lua of ``keyed.scripts``.

An entry is ``<created ms>:<ttl ms>:<json>`` then, when the memory has vectors, a line feed and
their float32 bytes (little-endian, ``vectors`` rows of ``dims``). The two numbers lead so that
the scripts read them with one pattern (``ENTRY_TIMES``) without decoding JSON: an upsert keeps
``created``, a read with ``refresh_ttl`` sets the expiry ``ttl`` ms on. JSON escapes every
control character, so the first line feed ends it. The expiry itself is the score in the
namespace's ``expiry`` sorted set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agent_memory.clock import from_ms
from agent_memory.keyed.models import KeyedMemoryView, KeyedRecord
from agent_memory.models import compact_json

ENTRY_TIMES = "^(%d+):(%d+):"
"""Lua pattern of an entry's two leading numbers: created (ms), ttl (ms)."""


def namespace_field(namespace: Sequence[str]) -> str:
    """A namespace as the registry's field names it: its compact JSON list (injective, and
    labels may hold any character)."""
    return compact_json(list(namespace))


def namespace_digest(namespace: Sequence[str]) -> str:
    """The SHA-256 (hex) of ``namespace_field``: what the namespace's key names carry."""
    return hashlib.sha256(namespace_field(namespace).encode("utf-8")).hexdigest()


def encode_entry(record: KeyedRecord, vectors: NDArray[np.float32] | None) -> bytes:
    """An entry without its two leading numbers (the put script adds them): the record's JSON
    and, with ``vectors`` (rows of unit length), a line feed and their bytes."""
    text = compact_json(record.model_dump()).encode("utf-8")
    if vectors is None or not len(vectors):
        return text
    return text + b"\n" + np.ascontiguousarray(vectors, dtype="<f4").tobytes()


class Entry:
    """A decoded entry: ``record``, ``created_ms``, ``ttl_ms`` and ``vectors`` (rows, or
    None without an index)."""

    __slots__ = ("created_ms", "record", "ttl_ms", "vectors")

    def __init__(self, raw: bytes) -> None:
        created, ttl, rest = raw.split(b":", 2)
        text, _, blob = rest.partition(b"\n")
        self.created_ms = int(created)
        self.ttl_ms = int(ttl)
        self.record = KeyedRecord.model_validate(json.loads(text))
        self.vectors: NDArray[np.float32] | None = None
        if self.record.vectors:
            self.vectors = np.frombuffer(blob, dtype="<f4").reshape(
                self.record.vectors, self.record.dims
            )

    def view(self, expires_ms: float, **scores: Any) -> KeyedMemoryView:
        """The answer's shape of the entry, expiring at ``expires_ms``."""
        record = self.record
        return KeyedMemoryView(
            namespace=record.namespace,
            key=record.key,
            value=record.value,
            created_at=from_ms(self.created_ms),
            updated_at=from_ms(record.updated_at),
            expires_at=from_ms(int(expires_ms)),
            **scores,
        )


def expiry_of(moment: datetime, ttl_ms: int) -> int:
    """The expiry (ms) of something kept or read at ``moment`` for ``ttl_ms``."""
    return int(moment.timestamp() * 1000) + ttl_ms
