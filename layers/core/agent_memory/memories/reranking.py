"""The rerank stage of a search or a recall: ``apply_reranker`` orders the fused candidates with the
store's reranker (``providers.rerankers.Reranker``) and keeps the best ``limit``.

A reranker is a paid, remote call that can fail or be slow; a search must still answer. So any
failure of the stage (the provider unreachable, out of time, refusing, answering something that
does not fit, a setting or key that cannot be used) keeps the fused order, cut to ``limit``,
and says so (``Found.reranked`` false). The failure is logged by its error code only (never a
provider's text, a query or a memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_memory.errors import AgentMemoryError
from agent_memory.memories.models import MemoryView, TimeWindowView
from agent_memory.observability import logger
from agent_memory.providers.rerankers import Reranker
from agent_memory.providers.secrets import SecretUnreadable
from agent_memory.search.when import TimeWindow


@dataclass(frozen=True)
class Found:
    """What a search or recall found: ``memories`` best first, and whether the store's reranker
    ordered them (``reranked``: True when it did, False when it failed and the fused order was
    kept, None when the store has no reranker or the call asked for none)."""

    memories: list[MemoryView]
    reranked: bool | None = None
    window: TimeWindow | None = None
    """The time the query named (``search.when``), if any."""

    @property
    def window_view(self) -> TimeWindowView | None:
        """``window`` as an answer shows it."""
        if self.window is None:
            return None
        return TimeWindowView(start=self.window.start, end=self.window.end, said=self.window.said)


def apply_reranker(
    reranker: Reranker, query: str, candidates: Sequence[MemoryView], limit: int
) -> Found:
    """The best ``limit`` of ``candidates`` (fused order, best first) as ``reranker`` orders
    them for ``query``, each with the reranker's relevance (in [0, 1]) as its ``score``; on any
    failure, the first ``limit`` candidates as they came, ``reranked`` False. No candidates
    sends nothing (``reranked`` True: there was nothing to order)."""
    if not candidates:
        return Found([], reranked=True)
    try:
        placed = reranker.rerank(query, [m.text for m in candidates], limit)
    except (AgentMemoryError, SecretUnreadable) as exc:
        code = getattr(exc, "code", type(exc).__name__)
        logger.warning(  # the code and count in the text too: the local stack prints no extra
            "rerank failed (%s, %d candidates); the fused order was kept",
            code,
            len(candidates),
            extra={"error": code, "candidates": len(candidates)},
        )
        return Found(list(candidates[:limit]), reranked=False)
    ordered = [
        candidates[p.index].model_copy(update={"score": round(p.relevance, 6)}) for p in placed
    ]
    return Found(ordered, reranked=True)
