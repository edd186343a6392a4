"""A search's query as every stage of ranking reads it: ``Query``, made once per search.

Its text is tokenized once (``tokens``, ``search.tokenizer.query_tokens``), where each actor's
keyword ranking and each result's coverage read it; its unit vector (None for keyword only),
the time window it names (``search.when.time_window``, None for none) and the mode
(``SearchMode``) travel with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from agent_memory.models import SearchMode
from agent_memory.search.tokenizer import query_tokens
from agent_memory.search.when import TimeWindow


@dataclass(frozen=True)
class Query:
    """``text`` searched by ``mode``, with its unit ``vector`` (semantic and hybrid; None for
    keyword only) and the time ``window`` it names (None: none, or not used for ranking)."""

    text: str
    mode: SearchMode = "keyword"
    vector: NDArray[np.float32] | None = field(default=None, compare=False)
    window: TimeWindow | None = None
    tokens: tuple[str, ...] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", tuple(query_tokens(self.text)))

    @property
    def semantic(self) -> bool:
        """Whether the ranking reads vectors: a vector is given and the mode is not keyword."""
        return self.vector is not None and self.mode != "keyword"

    @property
    def keywords(self) -> bool:
        """Whether the ranking reads words: the mode is not semantic."""
        return self.mode != "semantic"


def tokens_of(query: Query | str) -> tuple[str, ...]:
    """The query's tokens: ``Query.tokens``, or those of a text (``query_tokens``)."""
    return query.tokens if isinstance(query, Query) else tuple(query_tokens(query))
