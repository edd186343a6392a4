"""Keyword search over an actor's index (``search.index.ActorIndex``): which memories hold the
query's words, and how well.

Okapi BM25 with k1 = 1.2, b = 0.75 and the non-negative idf
``ln(1 + (N - df + 0.5) / (df + 0.5))`` (Robertson and Zaragoza, "The Probabilistic
Relevance Framework: BM25 and Beyond", 2009), over the tokens of ``tokenizer``; a memory's
topics and metadata values count too, weighted below its text, in the manner of BM25F
(Robertson, Zaragoza and Taylor, "Simple BM25 extension to multiple weighted fields", CIKM
2004): per query word, the text's length-normalised frequency plus ``FIELD_WEIGHT`` if the
fields hold the word (once, however often: repeating a word in metadata earns nothing;
divided by the text's length norm when that is above 1, never raised by a short text) go
through BM25's saturation once, with the idf of the memories holding the word in either. So a
field alone adds at most ``FIELD_WEIGHT`` of one occurrence, and a memory holding the word once
in a text up to ``(1 / FIELD_WEIGHT - 1 + b) / b`` times the average length (5 with 0.25 and
b = 0.75) ranks above every memory holding it only in its fields. Fields add nothing to a
memory's length. Where no memory's fields hold a query word, it scores exactly as in plain
BM25.

The index keeps the postings (text tokens, and field tokens behind ``tokenizer.FIELD_MARK``);
this module reads them. Callers hold the index's lock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from agent_memory.search.columns import IndexColumns
from agent_memory.search.fusion import Hit
from agent_memory.search.masks import eligible, top
from agent_memory.search.selection import Selection
from agent_memory.search.tokenizer import FIELD_MARK

K1 = 1.2
B = 0.75
FIELD_WEIGHT = 0.25
"""What a query word held in a memory's topics or metadata values counts, against one occurrence
in its text (BM25F's field weight): below the text, since a field names what a memory is about
or where it came from, not what it says, and low enough that a memory naming the word in a text
up to 5 times the actor's average length ranks above every memory holding it only in a field.
On LoCoMo, with each memory's speaker (and its cited turn ids) as metadata, the weights from
0 to 2 moved keyword hit@10 by at most 0.006 and hybrid by 0.001, since LoCoMo's texts already
name the speaker (bench/results/retrieval.md, "Fields")."""


def keyword_hits(
    index: IndexColumns,
    tokens: Sequence[str],
    limit: int,
    now_ms: int,
    types: Selection | Sequence[str] | None,
) -> list[Hit]:
    """The ``limit`` best memories by BM25 of the query's ``tokens`` (``query_tokens``; a
    search's ``search.query.Query.tokens``), best first, among those ``types`` selects (as
    ``semantic``); memories sharing no token with the query are not returned."""
    size = len(index.ids)
    count = len(index.rows)
    if size == 0 or count == 0:
        return []
    avgdl = max(index.total_len / count, 1e-9)
    scores = np.zeros(size, dtype=np.float32)
    matched = np.zeros(size, dtype=np.bool_)
    for token in set(tokens):
        token_id = index.vocabulary.get(token)
        field_id = index.vocabulary.get(FIELD_MARK + token)
        if field_id is not None and index.posting_rows[field_id]:
            _add_bm25f(index, token_id, field_id, count, avgdl, scores, matched)
            continue
        if token_id is None or not index.posting_rows[token_id]:
            continue
        # Views of the C arrays, released when this loop moves on (an array that exports
        # its buffer cannot grow; updates hold the same lock as this search).
        rows = np.frombuffer(index.posting_rows[token_id], dtype=np.int32)
        tf = np.frombuffer(index.posting_tfs[token_id], dtype=np.uint16).astype(np.float32)
        df = rows.size
        idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * index.doclen[rows] / avgdl)
        scores[rows] += idf * tf * (K1 + 1.0) / (tf + norm)
        matched[rows] = True
    return top(scores, eligible(index, now_ms, types) & matched, limit, index.ids)


def _add_bm25f(
    index: IndexColumns,
    token_id: int | None,
    field_id: int,
    count: int,
    avgdl: float,
    scores: NDArray[np.float32],
    matched: NDArray[np.bool_],
) -> None:
    """Add one query word's BM25F score (the module docstring) to ``scores``, for a word
    some memory's fields hold; rows that hold it in their text alone score as in BM25."""
    pseudo = np.zeros(scores.size, dtype=np.float32)  # the weighted, normalised frequency
    if token_id is not None and index.posting_rows[token_id]:
        rows = np.frombuffer(index.posting_rows[token_id], dtype=np.int32)
        tf = np.frombuffer(index.posting_tfs[token_id], dtype=np.uint16).astype(np.float32)
        pseudo[rows] = tf / (1.0 - B + B * index.doclen[rows] / avgdl)
    rows = np.frombuffer(index.posting_rows[field_id], dtype=np.int32)
    norm = np.maximum(1.0 - B + B * index.doclen[rows] / avgdl, 1.0)
    pseudo[rows] += FIELD_WEIGHT / norm
    held = np.flatnonzero(pseudo)
    df = held.size
    idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
    frequency = pseudo[held]
    scores[held] += idf * frequency * (K1 + 1.0) / (frequency + K1)
    matched[held] = True
