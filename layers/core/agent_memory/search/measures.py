"""The measures a result's score is made of (``search.scores``), read off an actor's index for
the memories a search ranked: their cosine with the query vector and their coverage of the
query's words. Callers hold the index's lock."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.columns import IndexColumns
from agent_memory.search.keyword import FIELD_WEIGHT
from agent_memory.search.query import Query, tokens_of
from agent_memory.search.scores import idf
from agent_memory.search.tokenizer import FIELD_MARK


def cosines(
    index: IndexColumns, vector: NDArray[np.float32], memory_ids: Sequence[str]
) -> dict[str, float]:
    """The cosine of each memory of ``memory_ids`` that the index holds with the unit
    ``vector``: exact from an exact index, from the int8 codes of a compact one (off by at most
    a few thousandths; ``ActorIndexes.rescore`` gives exact ones)."""
    rows = [(i, index.rows[i]) for i in memory_ids if i in index.rows]
    if not rows:
        return {}
    picked = np.array([row for _, row in rows], dtype=np.intp)
    if index.compact:
        codes = index.codes_for(picked).astype(np.float32)
        values = (codes @ vector) * index.scales[picked]
    else:
        values = index.matrix[picked] @ vector
    return {memory_id: float(v) for (memory_id, _), v in zip(rows, values.tolist(), strict=True)}


def coverages(
    index: IndexColumns, query: Query | str, memory_ids: Sequence[str]
) -> dict[str, float]:
    """``search.scores.coverage`` of each memory of ``memory_ids`` that the index holds, for
    ``query`` (its tokens, ``search.query.tokens_of``), the words weighted by their rarity among the
    index's memories' texts. A word a memory holds only in its topics or metadata values
    (``search.tokenizer.field_tokens``) counts ``FIELD_WEIGHT`` of its weight, as in keyword
    ranking. Each row's token ids (``ActorIndex.row_tokens``) say which query words it holds, a
    few lookups a row; an index read from its kept form, which has not rebuilt them, looks the
    rows up in the query words' postings instead."""
    rows = {i: index.rows[i] for i in memory_ids if i in index.rows}
    if not rows:
        return {}
    count = len(index.rows)
    words: list[tuple[int | None, int | None, float]] = []  # (text id, field id, idf) held
    total = 0.0
    for token in set(tokens_of(query)):
        token_id = index.vocabulary.get(token)
        df = len(index.posting_rows[token_id]) if token_id is not None else 0
        weight = idf(count, df)
        total += weight
        field_id = index.vocabulary.get(FIELD_MARK + token)
        held_id = token_id if df else None
        if held_id is not None or field_id is not None:
            words.append((held_id, field_id, weight))
    if total <= 0.0:
        return dict.fromkeys(rows, 0.0)
    if index.tokens_unknown:
        return _coverages_from_postings(index, rows, words, total)
    covered = {}
    for memory_id, row in rows.items():
        held = index.row_tokens[row]
        tokens = set(held) if held is not None else set()
        found = 0.0
        for token_id, field_id, weight in words:
            if token_id in tokens:
                found += weight
            elif field_id in tokens:
                found += FIELD_WEIGHT * weight
        covered[memory_id] = found / total
    return covered


def _coverages_from_postings(
    index: IndexColumns,
    rows: dict[str, int],
    words: list[tuple[int | None, int | None, float]],
    total: float,
) -> dict[str, float]:
    picked = np.array(list(rows.values()), dtype=np.int32)
    covered = np.zeros(picked.size, dtype=np.float64)
    for token_id, field_id, weight in words:
        in_text = np.zeros(picked.size, dtype=np.bool_)
        if token_id is not None:
            in_text = np.isin(picked, np.frombuffer(index.posting_rows[token_id], dtype=np.int32))
        covered += weight * in_text
        if field_id is not None:
            in_fields = np.isin(picked, np.frombuffer(index.posting_rows[field_id], dtype=np.int32))
            covered += FIELD_WEIGHT * weight * (in_fields & ~in_text)
    shares = (covered / total).tolist()
    return {memory_id: float(c) for memory_id, c in zip(rows, shares, strict=True)}
