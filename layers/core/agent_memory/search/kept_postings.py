"""The postings of an index read from its kept form, each word's made at its first use:
``KeptPostings``.

Why: a new container read a kept index by making every word's posting (its rows, and their
term frequencies: two ``array`` objects a word) before its first search, 12 ms of a 75 ms first
recall at 10,000 x 1,536 with a vocabulary of 5,000 words on this project's machine
(``bench/results/cold_start.md``), where a query uses a handful of words. Now the kept bytes stay
as they are read and a word's two arrays are made when the index first asks for them: by a
search for that word, or by everything at once for a change that needs every row's words or a
keep (``iter``). What the index sees is a list of arrays, as before.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, MutableSequence
from typing import Any, SupportsIndex, overload


class KeptPostings(MutableSequence["array[int]"]):
    """Word ``i``'s posting: the items ``starts[i]`` to ``starts[i + 1]`` of ``data``, read as
    an ``array`` of ``typecode`` (``"i"``: rows, ``"H"``: term frequencies) when first asked
    for, then kept (the same object each time, so a change made to it stays). ``append`` adds a
    new word's posting, made already; words are never removed or replaced (a word's posting
    changes in place). Errors: ``IndexError`` as a list's."""

    def __init__(self, data: bytes, starts: list[int], typecode: str) -> None:
        self._data = data
        self._starts = starts
        self._typecode = typecode
        self._width = array(typecode).itemsize
        self._words = len(starts) - 1
        self._made: dict[int, array[int]] = {}

    def __len__(self) -> int:
        return self._words

    def _posting(self, word: int) -> array[int]:
        made = self._made.get(word)
        if made is None:
            start, stop = self._starts[word], self._starts[word + 1]
            made = array(self._typecode)
            made.frombytes(self._data[start * self._width : stop * self._width])
            self._made[word] = made
        return made

    @overload
    def __getitem__(self, word: SupportsIndex) -> array[int]: ...

    @overload
    def __getitem__(self, word: slice) -> list[array[int]]: ...

    def __getitem__(self, word: Any) -> Any:
        if isinstance(word, slice):
            return [self._posting(at) for at in range(*word.indices(len(self)))]
        at = word.__index__()
        if at < 0:
            at += len(self)
        if not 0 <= at < len(self):
            raise IndexError("list index out of range")
        return self._posting(at)

    def __iter__(self) -> Iterator[array[int]]:
        return (self._posting(at) for at in range(len(self)))

    def __setitem__(self, word: Any, posting: Any) -> None:
        raise TypeError("a kept word's posting changes in place, it is not replaced")

    def __delitem__(self, word: Any) -> None:
        raise TypeError("words are not removed from postings")

    def insert(self, word: int, posting: array[int]) -> None:
        """Add a new word's posting, at the end only (``append``)."""
        if word != len(self):
            raise TypeError("words are added at the end")
        self._made[self._words] = posting
        self._words += 1
        self._starts.append(self._starts[-1])

    def entries(self) -> int:
        """How many items all the postings hold, without making those not made yet (as read,
        plus what the words made since gained or lost)."""
        starts = self._starts
        changed = sum(len(made) - (starts[at + 1] - starts[at]) for at, made in self._made.items())
        return starts[-1] + changed
