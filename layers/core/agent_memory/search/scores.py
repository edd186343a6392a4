"""Scores that mean something: a search result's ``score`` in [0, 1], comparable across queries
and modes, from two measures of the memory against the query.

- ``similarity``: the cosine of the query's and the memory's vectors (-1 to 1), when the search
  has a query vector (semantic and hybrid modes);
- ``coverage``: how much of the query's words the memory holds, each word weighted by its
  rarity among the actor's memories (its BM25 inverse document frequency; a word no memory holds
  weighs the most), 0 to 1. A question naming someone or something the memories never mention
  covers little, whatever else it shares with them.

``score`` is a logistic function of them (``relevance``): the estimated probability that the
memory holds what the query asks, as measured on LoCoMo (``bench/retrieval_scores.py`` chooses
the coefficients on conversations A, conv-26 ... conv-43: for hybrid, the weight of coverage
against the cosine that best tells questions the store can answer from questions about another
conversation; then, per mode, a logistic regression of relevance over the top 20 results of A's
own questions, a memory counting as relevant when it cites an evidence turn; B is reported,
never fitted). So 0.5 means that, on that benchmark, half the results scored 0.5 held the
answer; most results of a search hold none, so most scores are low, and a score of 0.3 is a
strong match. A semantic search's score rises with the cosine alone (its order is the
cosine's), a keyword search's with coverage alone, a hybrid search's with both (its order stays
the fusion's, so a result may score above one ranked before it); a reranked result's score is
the reranker's relevance. ``min_score`` (``DEFAULT_MIN_SCORE``, 0, unless the request says)
drops results scoring below it.

The cosine depends on the embedding model: the coefficients are measured with
``all-MiniLM-L6-v2`` (384 dimensions). A model whose unrelated texts sit at higher cosines
scores them higher; a store using one can pass its own ``min_score`` (docs/retrieval.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

# Chosen on LoCoMo's conversations A by ``make bench-retrieval`` (bench/retrieval_scores.py;
# bench/results/retrieval.md, "Scores and min_score").
HYBRID = (4.532, 0.906, -5.931)
"""``(cosine, coverage, intercept)`` weights when both measures are known."""
SEMANTIC = (3.568, -5.174)
"""``(cosine, intercept)`` weights for a semantic search."""
KEYWORD = (3.886, -4.240)
"""``(coverage, intercept)`` weights for a keyword search."""
RECOMMENDED_MIN_SCORE = 0.030
"""A ``min_score`` for stores embedding with a model like ``all-MiniLM-L6-v2``: the largest (to
0.001) that keeps 95% of the hybrid hits of LoCoMo A's questions, with the time signal in the
ranking (``memories.ranking.TIME_BOOST``, which lifts memories whose text matches less: 0.037
before it); there 95% of the questions asked of another conversation come back empty (B: 98% of
hits kept, 98% empty). Not the default: see ``DEFAULT_MIN_SCORE``."""
DEFAULT_MIN_SCORE = 0.0
"""The ``min_score`` of a search or recall that gives none: every result of the top ``limit``.
The cosine depends on the embedding model, and a threshold measured with one model would
silently drop relevant memories of a model whose related texts sit at lower cosines (OpenAI's
``text-embedding-3`` models put paraphrases lower than MiniLM does); a caller that knows its
model passes ``min_score`` (``RECOMMENDED_MIN_SCORE`` for MiniLM-like ones)."""


def idf(count: int, df: int) -> float:
    """BM25's inverse document frequency of a word held by ``df`` of ``count`` memories
    (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009,
    with the +1 that keeps it positive, as Lucene does): ``log(1 + (count - df + 0.5) / (df +
    0.5))``; a word no memory holds weighs the most."""
    return math.log(1.0 + (count - df + 0.5) / (df + 0.5))


def coverage(
    query_words: Iterable[str], memory_words: set[str], df: Mapping[str, int], count: int
) -> float:
    """The share of the query's distinct words (``search.tokenizer.query_tokens``) that a
    memory holds, each weighted by ``idf(count, df[word])``: 0 (none, or no words) to 1 (all)."""
    words = set(query_words)
    weights = {word: idf(count, df.get(word, 0)) for word in words}
    total = sum(weights.values())
    if total <= 0.0:
        return 0.0
    return sum(w for word, w in weights.items() if word in memory_words) / total


def _logistic(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def relevance(similarity: float | None, covered: float | None) -> float:
    """The score of a memory, on [0, 1], from the measures a search has: both (hybrid), the
    cosine alone (semantic) or coverage alone (keyword; also a hybrid search without a query
    vector). Neither gives 0."""
    if similarity is not None and covered is not None:
        a, b, c = HYBRID
        return _logistic(a * similarity + b * covered + c)
    if similarity is not None:
        a, c = SEMANTIC
        return _logistic(a * similarity + c)
    if covered is not None:
        b, c = KEYWORD
        return _logistic(b * covered + c)
    return 0.0
