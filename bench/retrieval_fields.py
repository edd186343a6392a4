"""Fields in keyword search, measured in ``bench.retrieval``: how much a memory's topics and
metadata values, weighted below its text (``agent_memory.search.keyword.FIELD_WEIGHT``, BM25F),
help LoCoMo's questions.

LoCoMo's observations have no topics; what a memory of theirs can carry is who it is about (the
speaker whose observation it is) and, as an application keeping its own ids would, the turn ids
it cites. Two field sets are measured: the speaker alone, and the speaker with the turn ids
(words no question uses, except numbers: noise a store with ids in its metadata gets).

The benchmark's stores keep no metadata, so their rows are the text's alone. Here each
conversation's memories go into the store's own index (``ActorIndex``) in this process, once per
field set, and its keyword list is ranked at each of ``FIELD_WEIGHTS`` (0: fields count
nothing, plain BM25), by setting the module's ``FIELD_WEIGHT`` for the call. Each list is
reported alone and fused with the API's wide semantic list with the time boost
(``bench.retrieval_signals.boosted``, weight 2): the same approximation of the store's hybrid as
the other in-process rows, so the weight-0 row is the baseline the others compare with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from agent_memory.search import keyword as search_keyword
from agent_memory.search.columns import Known
from agent_memory.search.fusion import Hit
from agent_memory.search.index import ActorIndex
from agent_memory.search.keyword import FIELD_WEIGHT
from agent_memory.search.selection import RowFacts
from agent_memory.search.tokenizer import field_tokens
from bench.retrieval_signals import hit10_mean

FIELD_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)
FIELD_SETS = ("speaker", "speaker and turn ids")
KEYWORD_ROW = "keyword, fields ({}) {:g}"
HYBRID_ROW = "time boost 2 + fields ({}) {:g}"
_FAR = 2**62


@contextmanager
def field_weight(weight: float) -> Iterator[None]:
    """The store's ``FIELD_WEIGHT`` set to ``weight`` for the block (this process only)."""
    before = search_keyword.FIELD_WEIGHT
    search_keyword.FIELD_WEIGHT = weight
    try:
        yield
    finally:
        search_keyword.FIELD_WEIGHT = before


class FieldIndexes:
    """One conversation's memories in the store's index, once per field set: ``ids`` and
    ``texts`` of the memories, ``speakers`` (whose observation each is) and ``turns`` (the turn
    ids each cites), in the same order."""

    def __init__(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        speakers: Sequence[str],
        turns: Sequence[Sequence[str]],
    ) -> None:
        metadata: dict[str, list[dict[str, Any]]] = {
            "speaker": [{"speaker": s} for s in speakers],
            "speaker and turn ids": [
                {"speaker": s, "dia_ids": list(t)} for s, t in zip(speakers, turns, strict=True)
            ],
        }
        self._indexes: dict[str, ActorIndex] = {}
        ones = np.ones((len(ids), 1), dtype=np.float32)
        for name in FIELD_SETS:
            index = ActorIndex(dimensions=1)
            facts = [RowFacts(valid_from=0, fields=field_tokens([], m)) for m in metadata[name]]
            count = len(ids)
            index.add_many(
                list(ids),
                ones,
                list(texts),
                ["semantic"] * count,
                [0] * count,
                [_FAR] * count,
                Known(facts=facts),
            )
            self._indexes[name] = index

    def lists(self, query: str, limit: int) -> dict[tuple[str, float], list[Hit]]:
        """The keyword list of ``query`` (``limit`` hits) per field set and weight."""
        found = {}
        for name, index in self._indexes.items():
            for weight in FIELD_WEIGHTS:
                with field_weight(weight):
                    found[(name, weight)] = index.keyword(query, limit, 1, None)
        return found


def rows(
    lists: Mapping[tuple[str, float], list[Hit]],
    semantic: Sequence[Hit],
    boost: Callable[[Sequence[Hit], Sequence[Hit]], list[Hit]],
    limit: int,
) -> dict[str, list[Hit]]:
    """The rows of one question: each keyword list's best ``limit``, and ``boost`` (the time
    boost over the fusion) of the wide ``semantic`` list with it."""
    found = {}
    for (name, weight), keyword in lists.items():
        found[KEYWORD_ROW.format(name, weight)] = keyword[:limit]
        found[HYBRID_ROW.format(name, weight)] = boost(semantic, keyword)
    return found


def section(
    outcomes: Sequence[Any],
    first: set[str],
    hit_at: Callable[[Sequence[frozenset[str]], frozenset[str], int], float],
) -> list[str]:
    """The report's "Fields" section: every row on A, B and all, and the weight that the
    hybrid rows of split A would choose for each field set."""
    part_a = [o for o in outcomes if o.sample_id in first]
    part_b = [o for o in outcomes if o.sample_id not in first]
    mean = hit10_mean(hit_at)

    lines = [
        "",
        "## Fields",
        "",
        "A memory's topics and metadata values count in keyword search, weighted below its text "
        f"(`agent_memory.search.keyword.FIELD_WEIGHT`, BM25F; the store ships {FIELD_WEIGHT:g}). "
        "LoCoMo's "
        "memories have no topics: each is given, as metadata, its speaker, or its speaker and "
        "the turn ids it cites. The store's index ranks the keyword list in this process at each "
        "weight (0: fields count nothing), alone and fused with the API's semantic list with the "
        "time boost 2 (`bench.retrieval_fields`); compare each row with its weight-0 row.",
        "",
        "| row | hit@10 A | hit@10 B | hit@10 all |",
        "|---|---|---|---|",
    ]
    for name in FIELD_SETS:
        best = max(
            FIELD_WEIGHTS,
            key=lambda w: (round(mean(part_a, HYBRID_ROW.format(name, w)), 6), -w),
        )
        for template in (KEYWORD_ROW, HYBRID_ROW):
            for weight in FIELD_WEIGHTS:
                row = template.format(name, weight)
                values = [mean(part_a, row), mean(part_b, row), mean(outcomes, row)]
                chosen = " (best on A)" if template is HYBRID_ROW and weight == best else ""
                lines.append(f"| {row}{chosen} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    return lines
