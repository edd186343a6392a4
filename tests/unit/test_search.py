"""The in-memory index: exact cosine against a NumPy reference, BM25, tokens, fusion, LRU."""

import math
import re

import numpy as np
import pytest

from agent_memory.search import quantize as quantize, tokenizer as tokenizer
from agent_memory.search.cache import IndexCache
from agent_memory.search.columns import Known
from agent_memory.search.english import STOP_WORDS, stem
from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.index import ActorIndex
from agent_memory.search.tokenizer import query_tokens, tokenize

NOW = 1_700_000_000_000
LATER = NOW + 10**9


def _unit(rng, n, d):
    m = rng.standard_normal((n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _index(vectors, texts=None, types=None):
    index = ActorIndex(dimensions=vectors.shape[1])
    for i, v in enumerate(vectors):
        text = texts[i] if texts else f"memory {i}"
        index.upsert(f"m{i}", v, text, (types or {}).get(i, "semantic"), NOW, LATER)
    return index


def test_semantic_equals_the_exact_numpy_ranking():
    rng = np.random.default_rng(7)
    vectors = _unit(rng, 2000, 64)
    index = _index(vectors)
    for q in _unit(rng, 20, 64):
        expected = np.argsort(-(vectors @ q), kind="stable")[:10]
        hits = index.semantic(q, 10, NOW, None)
        assert [h.memory_id for h in hits] == [f"m{i}" for i in expected]
        assert hits[0].score == pytest.approx(float(vectors[expected[0]] @ q), abs=1e-5)


def test_removed_expired_and_filtered_memories_never_appear():
    rng = np.random.default_rng(1)
    vectors = _unit(rng, 50, 16)
    index = _index(vectors, types={3: "episodic"})
    index.remove("m0")
    index.upsert("short", vectors[0], "short lived", "semantic", NOW, NOW + 5)
    hits = index.semantic(vectors[0], 50, NOW + 10, None)
    ids = {h.memory_id for h in hits}
    assert "m0" not in ids and "short" not in ids and len(ids) == 49
    assert [h.memory_id for h in index.semantic(vectors[3], 5, NOW, ["episodic"])] == ["m3"]


def test_rows_are_reused_and_upsert_replaces():
    rng = np.random.default_rng(2)
    vectors = _unit(rng, 3, 8)
    index = _index(vectors)
    index.remove("m1")
    index.upsert("new", vectors[1], "again", "semantic", NOW, LATER)
    assert len(index) == 3 and len(index.ids) == 3
    index.upsert("new", vectors[2], "replaced text", "semantic", NOW, LATER)
    assert len(index) == 3
    assert index.keyword("again", 5, NOW, None) == []
    assert [h.memory_id for h in index.keyword("replaced", 5, NOW, None)] == ["new"]


def test_bm25_matches_the_formula():
    texts = ["the cat sat", "the dog sat on the mat", "a cat and a cat"]
    index = _index(np.eye(3, dtype=np.float32), texts)
    hits = index.keyword("cat", 3, NOW, None)
    assert [h.memory_id for h in hits] == ["m2", "m0"]
    n, df, avgdl = 3, 2, (3 + 6 + 5) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    tf, dl = 2, 5
    expected = idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert hits[0].score == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    ("text", "query", "found"),
    [
        ("Order ORD-2291 never arrived", "ORD-2291", True),
        ("write to a@b.c please", "a@b.c", True),
        ("contact [email] for help", "[email]", True),
        ("a note (with parens)", "(", False),
        ("use -x to skip", "-x", True),
        ('he said "hi"', '"', False),
        ("price is 5*3", "*", False),
        ("東京で寿司を食べた", "寿司", True),
        ("Café Müller", "CAFÉ", True),
        ("call my_func() now", "my_func()", True),
        ("Order ORD-2291 never arrived", "Where is my order ORD-2291?", True),
    ],
)
def test_query_characters_are_literal_words(text, query, found):
    index = _index(np.eye(1, dtype=np.float32), [text])
    hits = index.keyword(query, 5, NOW, None)
    assert bool(hits) is found


def test_tokens():
    assert "ord-2291" in tokenize("Order ORD-2291.")
    assert {"ord", "2291"} <= set(tokenize("ORD-2291"))
    assert "寿司" in tokenize("寿司を食べた")
    assert tokenize("(") == ["("]
    assert tokenize("Support groups, grouped.") == ["support", "group", "group"]
    assert tokenize("ORD-2291s") == ["ord", "2291s", "ord-2291s"]  # chunks are not stemmed


@pytest.mark.parametrize(
    ("word", "expected"),
    # The examples of Porter's paper (Program 14(3), 1980) for step 1.
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "ti"),
        ("caress", "caress"),
        ("cats", "cat"),
        ("feed", "feed"),
        ("agreed", "agree"),
        ("plastered", "plaster"),
        ("bled", "bled"),
        ("motoring", "motor"),
        ("sing", "sing"),
        ("conflated", "conflate"),
        ("troubled", "trouble"),
        ("sized", "size"),
        ("hopping", "hop"),
        ("tanned", "tan"),
        ("falling", "fall"),
        ("hissing", "hiss"),
        ("fizzed", "fizz"),
        ("failing", "fail"),
        ("filing", "file"),
        ("happy", "happi"),
        ("sky", "sky"),
        # 1b's AT -> ATE on a base word without an e: step 1's output (step 5a would drop the e).
        ("eating", "eate"),
        ("eat", "eat"),
        # Not English letters, or too short: as they are.
        ("niños", "niños"),
        ("2291s", "2291s"),
        ("is", "is"),
    ],
)
def test_stem_follows_porter_step_1(word, expected):
    assert stem(word) == expected


def test_word_forms_find_each_other():
    texts = ["Caroline joined a support group", "Melanie paints sunsets", "the weather"]
    index = _index(np.eye(3, dtype=np.float32), texts)
    assert [h.memory_id for h in index.keyword("groups", 5, NOW, None)] == ["m0"]
    assert [h.memory_id for h in index.keyword("painting a sunset", 5, NOW, None)] == ["m1"]


def test_stop_words_are_dropped_from_queries_unless_nothing_else_is_left():
    texts = ["the cat sat on the mat", "a dog barked", "what is it"]
    index = _index(np.eye(3, dtype=np.float32), texts)
    assert query_tokens("What did the dog do?") == ["dog"]
    assert [h.memory_id for h in index.keyword("What did the dog do?", 5, NOW, None)] == ["m1"]
    # Only stop words: they are kept, and find the memories that hold them.
    assert query_tokens("the") == ["the"]
    assert [h.memory_id for h in index.keyword("the", 5, NOW, None)] == ["m0"]
    assert {h.memory_id for h in index.keyword("What is it?", 5, NOW, None)} == {"m2"}
    assert {"the", "what", "s", "don't"} <= STOP_WORDS


def test_the_stem_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(tokenizer, "_STEM_CACHE", 3)
    tokenizer._STEMS.clear()
    assert tokenize("walks talked jumping running") == ["walk", "talk", "jump", "run"]
    assert len(tokenizer._STEMS) <= 3
    assert tokenize("walks") == ["walk"]


_OLD_CHUNKS = re.compile(r"(?<!\S)\S*[^\w\s]\S*")


@pytest.mark.parametrize(
    "text",
    [
        "a\u00a0b-c\u2003d!",
        "snake_case x_y! _",
        "x\x1cy-z",
        "é-à ü",
        "(",
        "--",
        "a - b",
        "寿司-bar",
    ],
)
def test_punctuated_chunks_are_the_whitespace_separated_chunks_with_a_symbol(text):
    """Tokens find chunks with ``str.split``: the same ones as ``_OLD_CHUNKS``, the regular
    expression they used before."""
    folded = text.casefold()
    expected = [c.strip(".,;:!?\"'") or c for c in _OLD_CHUNKS.findall(folded)]
    expected = [c for c in expected if not re.fullmatch(r"\w+", c)]
    words = set(re.findall(r"\w+", folded))
    chunks = [t for t in tokenizer._surface(text) if t not in words]
    assert chunks == expected


def test_fusion_rewards_agreement_and_keeps_single_mode_hits():
    semantic = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.1)]
    keyword = [Hit("b", 12.0), Hit("d", 3.0)]
    fused = fuse(semantic, keyword, 4)
    assert fused[0].memory_id == "b"
    assert {h.memory_id for h in fused} == {"a", "b", "c", "d"}
    assert fuse([], [], 5) == []


def test_cache_evicts_least_recently_used_past_its_budget():
    rng = np.random.default_rng(3)
    small = _index(_unit(rng, 10, 256))
    cache = IndexCache(max_bytes=small.nbytes * 2 + 10)
    for key in ("a", "b"):
        cache.put((key,), _index(_unit(rng, 10, 256)))
    cache.get(("a",))
    cache.put(("c",), _index(_unit(rng, 10, 256)))
    assert cache.get(("b",)) is None
    assert cache.get(("a",)) is not None and cache.get(("c",)) is not None


def _clustered(rng, n, d, centres=50, noise=0.35):
    centre = _unit(rng, centres, d)
    picks = rng.integers(0, centres, n)
    m = centre[picks] + noise * rng.standard_normal((n, d)).astype(np.float32) / np.sqrt(d)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("size", [3000, 25_000])  # int8 only; sign-bit pre-filter, then int8
def test_the_compact_form_keeps_the_exact_top_ten_among_its_candidates(size):
    rng = np.random.default_rng(11)
    vectors = _clustered(rng, size, 512)
    index = ActorIndex(dimensions=512, compact_above_bytes=1024)
    for i, v in enumerate(vectors):
        index.upsert(f"m{i}", v, "", "semantic", NOW, LATER)
    assert index.compact and not index.exact
    assert index.nbytes < vectors.nbytes  # smaller than the float32 matrix
    recalled = 0
    queries = _clustered(rng, 20, 512)
    for q in queries:
        exact = {f"m{i}" for i in np.argsort(-(vectors @ q))[:10]}
        candidates = index.semantic(q, 10, NOW, None)
        assert len(candidates) >= ActorIndex.candidates(10)  # more when scores are close
        recalled += len(exact & {h.memory_id for h in candidates})
    assert recalled / (10 * len(queries)) >= 0.97


def test_the_compact_form_forgets_and_filters_like_the_exact_one():
    rng = np.random.default_rng(12)
    vectors = _unit(rng, 200, 32)
    index = ActorIndex(dimensions=32, compact_above_bytes=1024)
    for i, v in enumerate(vectors):
        index.upsert(f"m{i}", v, "", "episodic" if i == 5 else "semantic", NOW, LATER)
    index.remove("m7")
    ids = {h.memory_id for h in index.semantic(vectors[7], 50, NOW, None)}
    assert "m7" not in ids
    assert [h.memory_id for h in index.semantic(vectors[5], 3, NOW, ["episodic"])] == ["m5"]


@pytest.mark.parametrize("compact", [False, True])
def test_bulk_adding_gives_the_same_index_as_adding_one_by_one(compact):
    rng = np.random.default_rng(13)
    vectors = _unit(rng, 300, 32)
    texts = [f"word{i % 7} shared text {i}" for i in range(300)]
    threshold = 1024 if compact else None
    one = ActorIndex(dimensions=32, compact_above_bytes=threshold)
    for i, v in enumerate(vectors):
        one.upsert(f"m{i}", v, texts[i], "semantic", NOW, LATER)
    bulk = ActorIndex(dimensions=32, compact_above_bytes=threshold)
    for start in (0, 120):
        part = slice(start, 120 if start == 0 else 300)
        n = len(range(300)[part])
        bulk.add_many(
            [f"m{i}" for i in range(300)[part]],
            vectors[part],
            texts[part],
            ["semantic"] * n,
            [NOW] * n,
            [LATER] * n,
        )
    assert bulk.compact == one.compact == compact
    q = vectors[3]
    assert bulk.semantic(q, 10, NOW, None) == one.semantic(q, 10, NOW, None)
    assert bulk.keyword("word3 text", 10, NOW, None) == one.keyword("word3 text", 10, NOW, None)


def test_large_compact_scoring_split_over_threads_gives_the_same_scores(monkeypatch):
    rng = np.random.default_rng(21)
    vectors = _unit(rng, 900, 64)
    codes, scales = quantize.quantize_rows(vectors)
    rows = rng.permutation(900)[:700]
    query = _unit(rng, 1, 64)[0]
    single = quantize.int8_scores(codes, scales, rows, query)
    monkeypatch.setattr(quantize, "PARALLEL_ABOVE", 100)
    monkeypatch.setattr(quantize, "_configured_threads", 3)  # KIVIDB_SEARCH_THREADS=3
    split = quantize.parallel_int8_scores(codes, scales, rows, query)
    assert quantize._pool is not None and quantize._pool_size == 2
    np.testing.assert_allclose(split, single, rtol=1e-5, atol=1e-6)  # BLAS blocks may round apart
    assert quantize.search_threads() == 3
    bits = np.packbits(vectors > 0, axis=1)
    query_bits = np.packbits(query > 0)
    np.testing.assert_array_equal(
        quantize.parallel(quantize.hamming, bits, query_bits),
        np.array([bin(int.from_bytes(row ^ query_bits, "big")).count("1") for row in bits]),
    )


def test_an_exact_scan_split_over_threads_ranks_as_numpy_does(monkeypatch):
    monkeypatch.setattr(quantize, "EXACT_PARALLEL_BYTES", 64)  # a handful of rows per thread
    monkeypatch.setattr(quantize, "_configured_threads", 3)  # KIVIDB_SEARCH_THREADS=3
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 500, 32)
    index = _index(vectors)
    assert index.exact
    for q in _unit(rng, 5, 32):
        expected = [f"m{i}" for i in np.argsort(-(vectors @ q), kind="stable")[:10]]
        assert [h.memory_id for h in index.semantic(q, 10, NOW, None)] == expected


def test_an_index_holds_the_records_it_is_given_until_they_change():
    rng = np.random.default_rng(9)
    index = ActorIndex(dimensions=8)
    vectors = _unit(rng, 3, 8)
    index.upsert(
        "a", vectors[0], "tea", "semantic", NOW, LATER, Known.one(record=b'{"text":"tea"}')
    )
    index.upsert("b", vectors[1], "coffee", "semantic", NOW, LATER)
    size = index.nbytes
    assert index.record_of("a") == b'{"text":"tea"}' and index.record_of("b") is None
    index.upsert(
        "a", vectors[0], "tea", "semantic", NOW, LATER, Known.one(record=b'{"text":"tea!!"}')
    )
    assert index.record_of("a") == b'{"text":"tea!!"}' and index.nbytes == size + 2
    index.close("a", NOW + 1)  # superseded: its stored record says so now, read it again
    assert index.record_of("a") is None and index.nbytes == size - 14
    index.upsert("c", vectors[2], "water", "semantic", NOW, LATER, Known.one(record=b"{}"))
    index.remove("c")
    assert index.record_of("c") is None and index.record_of("unknown") is None
