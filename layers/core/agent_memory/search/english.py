"""English word forms for BM25: a light stemmer and the stop words dropped from queries.

- ``stem``: step 1 of Porter's suffix-stripping algorithm (M. F. Porter, "An algorithm for suffix
  stripping", Program 14(3), 1980), which removes the inflectional endings: plurals (``-s``,
  ``-es``, ``-ies``), ``-ed``, ``-ing`` (restoring ``-e`` or undoubling a consonant where the
  paper says so) and turns a final ``y`` after a vowel-bearing stem into ``i``. So ``groups``,
  ``grouped`` and ``grouping`` all give ``group``, ``hoping`` and ``hope`` give ``hope``.
  Step 1 alone keeps the ``-e`` it restores where the base word has none: ``eating`` gives
  ``eate`` (1b's ``AT -> ATE``, the rule of ``conflated -> conflate``) while ``eat`` stays
  ``eat``, so the two do not find each other (``heated``/``heat``, ``treating``/``treat``
  likewise). That is the paper's step 1 output; its step 5a, left out with steps 2 to 5, is
  what removes that ``e`` (m = 1, no ``*o``).
  Porter's steps 2 to 5 (derivational suffixes: ``-ational``, ``-ness``, ``-ment``...) are left
  out: on LoCoMo (``bench/retrieval.py`` in-process, with the stop words below) the full Porter2
  algorithm of the ``snowballstemmer`` package gave hybrid hit@10 0.725 against 0.724 for step
  1 alone, keyword hit@10 0.654 against 0.652, but costs about 25 us a word against about 1 us
  (and a dependency).
- ``STOP_WORDS``: the Snowball project's English stop word list
  (https://snowballstem.org/algorithms/english/stop.txt, Martin Porter, BSD licence), plus the
  pieces our tokenizer makes of its contractions (``don't`` gives ``don`` and ``t``): ``s``,
  ``t``, ``d``, ``ll``, ``m``, ``re``, ``ve``, as NLTK's English list also has them.

Words are stemmed only when they are ASCII letters (the rules are English ones); anything else
(digits, ``ord-2291``, other scripts) is left as it is.
"""

from __future__ import annotations

_STOP_LIST = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
    she her hers herself it its itself they them their theirs themselves what which who whom
    this that these those am is are was were be been being have has had having do does did
    doing would should could ought i'm you're he's she's it's we're they're i've you've we've
    they've i'd you'd he'd she'd we'd they'd i'll you'll he'll she'll we'll they'll isn't
    aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't won't wouldn't shan't
    shouldn't can't cannot couldn't mustn't let's that's who's what's here's there's when's
    where's why's how's a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very
    s t d ll m re ve
"""
STOP_WORDS = frozenset(_STOP_LIST.split())
"""Dropped from queries (not from memories), unless a query holds nothing else."""

_VOWELS = frozenset("aeiou")
_STEMMED_ENDINGS = ("s", "d", "g", "y")
"""Every rule of step 1 removes or rewrites one of these final letters."""


def _shape(word: str) -> str:
    """``word`` as a string of ``c`` (consonant) and ``v`` (vowel), with Porter's ``y`` rule:
    ``y`` is a vowel after a consonant, else a consonant."""
    letters = []
    consonant = False
    for i, ch in enumerate(word):
        if ch in _VOWELS:
            consonant = False
        elif ch == "y":
            consonant = i == 0 or not consonant
        else:
            consonant = True
        letters.append("c" if consonant else "v")
    return "".join(letters)


def _measure(shape: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``[C](VC){m}[V]``."""
    return shape.count("vc")


def _ends_cvc(word: str, shape: str) -> bool:
    """Porter's ``*o``: ends consonant-vowel-consonant, the last not ``w``, ``x`` or ``y``."""
    return shape.endswith("cvc") and word[-1] not in "wxy"


def stem(word: str) -> str:
    """Porter's step 1 (1a, 1b, 1c) on a lower-case ASCII word; other words are returned as
    they are, and so are words of one or two letters."""
    if len(word) <= 2 or not word.endswith(_STEMMED_ENDINGS):
        return word
    if not (word.isascii() and word.isalpha()):
        return word
    # Step 1a: plurals.
    if word.endswith("sses") or word.endswith("ies"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    shape = _shape(word)
    # Step 1b: -eed, -ed, -ing.
    removed = False
    if word.endswith("eed"):
        if _measure(shape[:-3]) > 0:
            word, shape = word[:-1], shape[:-1]
    elif word.endswith("ed") and "v" in shape[:-2]:
        word, shape, removed = word[:-2], shape[:-2], True
    elif word.endswith("ing") and "v" in shape[:-3]:
        word, shape, removed = word[:-3], shape[:-3], True
    if removed:
        if word.endswith(("at", "bl", "iz")):
            word += "e"
        elif len(word) >= 2 and word[-1] == word[-2] and shape[-1] == "c":
            if word[-1] not in "lsz":
                word, shape = word[:-1], shape[:-1]
        elif _measure(shape) == 1 and _ends_cvc(word, shape):
            word += "e"
        shape = _shape(word)
    # Step 1c: y -> i after a stem with a vowel.
    if word.endswith("y") and "v" in shape[:-1]:
        word = word[:-1] + "i"
    return word
