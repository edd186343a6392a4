"""Which of an actor's current memories a consolidation run shows the model together.

Two memories are *related* when they say the same words (the same normalized text), or when
one is among the other's ``NEIGHBOURS`` nearest by cosine and either their cosine is at least
``RELATED_COSINE`` or their word sets overlap by at least ``RELATED_WORDS`` (Jaccard). Related
memories are joined into clusters (connected components); a memory related to none is left
out (there is nothing to merge it with, and a call per lone memory would cost one call per
memory). The clusters are then packed into *sets*, one model call each, first-fit by size,
so that each set holds at most ``MAX_SET_MEMORIES`` memories and its prompt fits the token
budget (``consolidation_budget``); a cluster larger than a set is cut into sets in its order.

Cost: the nearest neighbours are found by blocks of ``BLOCK_ROWS`` rows of one matrix product
(n x n x dimensions multiply-adds, in float32), then only k pairs per memory are compared by
words, so grouping grows with n squared in arithmetic but linearly in memory and in calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

NEIGHBOURS = 8
"""Nearest memories (by cosine) of each memory that are checked for being related."""
RELATED_COSINE = 0.82
"""Cosine at or above which two neighbours are related."""
RELATED_WORDS = 0.5
"""Word-set overlap (Jaccard) at or above which two neighbours are related."""
MAX_SET_MEMORIES = 40
"""Memories one model call is shown at most."""
BUDGET_TOKENS = 4_000
"""Prompt tokens one consolidation call may take at most (system prompt included), by the
estimate ``estimate_tokens``; with ``MAX_SET_MEMORIES`` this keeps a call well inside every
supported model's context and its answer short."""
CHARS_PER_TOKEN = 4
"""Characters per token of the estimate (OpenAI's rule of thumb for English text)."""
BLOCK_ROWS = 512
_WORD = re.compile(r"\w+")
_PLAIN = frozenset(
    {"the", "a", "an", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "are"}
    | {"was", "were", "be", "been", "has", "have", "had", "it", "its", "that", "this", "they"}
    | {"their", "them", "he", "she", "his", "her", "user", "said"}
)


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` takes by the estimate: its characters over ``CHARS_PER_TOKEN``, up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def words(text: str) -> frozenset[str]:
    """The lower-cased words of ``text`` without plain ones (for the overlap)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _PLAIN)


def normalized(text: str) -> str:
    """``text`` lower-cased, its runs of space made one, without end punctuation."""
    return " ".join(text.lower().split()).rstrip(".!?")


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard overlap of two word sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


@dataclass(frozen=True)
class Candidate:
    """One current memory as grouping sees it: its text, its vector (unit length; None when
    the record has none) and ``tokens``, what its line in the prompt costs."""

    memory_id: str
    text: str
    vector: NDArray[np.float32] | None
    tokens: int


class _Joined:
    """Union-find over positions."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, at: int) -> int:
        while self.parent[at] != at:
            self.parent[at] = self.parent[self.parent[at]]
            at = self.parent[at]
        return at

    def join(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def clusters(candidates: Sequence[Candidate]) -> list[list[int]]:
    """The clusters of related candidates (positions), two or more each, in the order of
    their first member. Inside a cluster the members are in the order of a walk that goes
    from each memory to its most similar one not visited yet (depth first, the most similar
    neighbour first), so that a cluster cut into sets keeps the closest memories, the likely
    repeats of one fact, side by side."""
    n = len(candidates)
    joined = _Joined(n)
    links: dict[int, list[tuple[float, int]]] = {}

    def link(a: int, b: int, score: float) -> None:
        joined.join(a, b)
        links.setdefault(a, []).append((score, b))
        links.setdefault(b, []).append((score, a))

    first: dict[str, int] = {}
    for at, c in enumerate(candidates):
        key = normalized(c.text)
        if key in first:
            link(first[key], at, 2.0)  # the same words: closer than any cosine
        else:
            first[key] = at
    vectors = [(at, c.vector) for at, c in enumerate(candidates) if c.vector is not None]
    with_vectors = [at for at, _ in vectors]
    if len(with_vectors) > 1:
        matrix = np.stack([v for _, v in vectors]).astype(np.float32)
        k = min(NEIGHBOURS, len(with_vectors) - 1)
        word_sets = [words(candidates[at].text) for at in with_vectors]
        for start in range(0, len(with_vectors), BLOCK_ROWS):
            block = matrix[start : start + BLOCK_ROWS] @ matrix.T
            for row in range(block.shape[0]):
                block[row, start + row] = -2.0
            nearest = np.argpartition(-block, k - 1, axis=1)[:, :k]
            for row in range(block.shape[0]):
                i = start + row
                for j in nearest[row]:
                    j = int(j)
                    score = float(block[row, j])
                    if score >= RELATED_COSINE or (
                        overlap(word_sets[i], word_sets[j]) >= RELATED_WORDS
                    ):
                        link(with_vectors[i], with_vectors[j], score)
    members: dict[int, list[int]] = {}
    for at in range(n):
        members.setdefault(joined.find(at), []).append(at)
    return [_walk(m, links) for m in members.values() if len(m) > 1]


def _walk(members: list[int], links: dict[int, list[tuple[float, int]]]) -> list[int]:
    """``members`` (one cluster) in the order of ``clusters``' walk, from its first member."""
    order: list[int] = []
    seen: set[int] = set()
    stack = [members[0]]
    while stack:
        at = stack.pop()
        if at in seen:
            continue
        seen.add(at)
        order.append(at)
        # Pushed least similar first, so the most similar is visited next.
        for _, other in sorted(links.get(at, ()), key=lambda pair: (pair[0], -pair[1])):
            if other not in seen:
                stack.append(other)
    return order


def related_sets(candidates: Sequence[Candidate], room_tokens: int) -> list[list[int]]:
    """The sets of one model call each (positions): the clusters packed first-fit, largest
    first, each set at most ``MAX_SET_MEMORIES`` memories whose lines cost at most
    ``room_tokens`` (the budget less the prompt around them). A memory whose line alone is over
    ``room_tokens`` is left out; a cluster larger than a set is cut in its order."""
    pieces: list[list[int]] = []
    for cluster in clusters(candidates):
        piece: list[int] = []
        cost = 0
        for at in cluster:
            tokens = candidates[at].tokens
            if tokens > room_tokens:
                continue
            if len(piece) >= MAX_SET_MEMORIES or cost + tokens > room_tokens:
                pieces.append(piece)
                piece, cost = [], 0
            piece.append(at)
            cost += tokens
        if len(piece) > 1:
            pieces.append(piece)
    pieces.sort(key=len, reverse=True)
    sets: list[tuple[list[int], int]] = []
    for piece in pieces:
        cost = sum(candidates[at].tokens for at in piece)
        for at, (members, used) in enumerate(sets):
            if len(members) + len(piece) <= MAX_SET_MEMORIES and used + cost <= room_tokens:
                sets[at] = (members + piece, used + cost)
                break
        else:
            sets.append((list(piece), cost))
    return [members for members, _ in sets]
