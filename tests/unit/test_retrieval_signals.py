"""The retrieval benchmark's signal rows (``bench.retrieval_signals``): LoCoMo's session dates,
the time boost over the store's fusion, and the entity rule of the experiment."""

from datetime import UTC, datetime

from agent_memory.search.fusion import Hit, fuse
from agent_memory.search.when import time_window
from bench.retrieval_signals import EntityIndex, boosted, entities, entity_boosted, session_dates

MAY = int(datetime(2023, 5, 8, tzinfo=UTC).timestamp() * 1000)
JULY = int(datetime(2023, 7, 1, tzinfo=UTC).timestamp() * 1000)


def test_session_dates_are_read_from_locomos_own_format():
    dates = session_dates(
        {
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_12_date_time": "10:37 am on 27 June,  2023",
            "session_1": [],
        }
    )
    assert dates == {
        1: datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        12: datetime(2023, 6, 27, 10, 37, tzinfo=UTC),
    }


def test_the_time_boost_lifts_the_windows_memories_and_nothing_without_a_window():
    semantic = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.3)]
    keyword = [Hit("a", 5.0), Hit("c", 1.0)]
    occurred = {"a": JULY, "b": JULY, "c": MAY}
    window = time_window("what happened in May 2023?", datetime(2024, 1, 1, tzinfo=UTC))
    assert [h.memory_id for h in boosted(semantic, keyword, occurred, window, 3.0, 2)] == ["c", "a"]
    plain = boosted(semantic, keyword, occurred, None, 3.0, 3)
    assert plain == fuse(semantic, keyword, 3)


def test_entities_are_names_and_numbers_less_the_words_a_sentence_starts_with():
    assert entities("What did Caroline see at the Pride Parade in 2023?") == {
        "caroline",
        "pride parade",
        "pride",
        "parade",
        "2023",
    }
    assert entities("she went home") == frozenset()


def test_the_entity_boost_favours_the_memory_naming_the_rare_entity():
    texts = {"x": "Caroline went to Sweden", "y": "Caroline likes tea", "z": "Caroline runs"}
    index = EntityIndex(list(texts.values()))
    hits = [Hit("y", 1.0), Hit("z", 0.9), Hit("x", 0.5)]
    found = entity_boosted(hits, texts, index, "Did Caroline go to Sweden?", 1.0, 1)
    assert [h.memory_id for h in found] == ["x"]
