"""The warm container's cache of actor indexes: a bounded LRU counted in bytes."""

from __future__ import annotations

import threading
from collections import OrderedDict

from agent_memory.search.index import ActorIndex


class IndexCache:
    """A bounded LRU of ``ActorIndex`` by key, counted in bytes (DESIGN section 7: the warm
    container's vector cache is bounded, default 256 MB, least recently used actors first)."""

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, ...], ActorIndex] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> ActorIndex | None:
        """The index cached under ``key`` (now the most recently used), or None."""
        with self._lock:
            index = self._entries.get(key)
            if index is not None:
                self._entries.move_to_end(key)
            return index

    def put(self, key: tuple[str, ...], index: ActorIndex) -> None:
        """Cache ``index`` under ``key``, then evict the least recently used indexes while
        the estimated total (``ActorIndex.nbytes``) is over ``max_bytes`` (never the last)."""
        with self._lock:
            self._entries[key] = index
            self._entries.move_to_end(key)
            self._evict()

    def resized(self) -> None:
        """Evict as ``put`` does, after a cached index grew in place (``ActorIndex.go_exact``)."""
        with self._lock:
            self._evict()

    def _evict(self) -> None:
        total = sum(i.nbytes for i in self._entries.values())
        while total > self.max_bytes and len(self._entries) > 1:
            _, evicted = self._entries.popitem(last=False)
            total -= evicted.nbytes

    @property
    def nbytes(self) -> int:
        """The estimated bytes of every cached index."""
        with self._lock:
            return sum(i.nbytes for i in self._entries.values())
