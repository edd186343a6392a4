"""A window of sorted sets split in partitions reads as the same window of one sorted set."""

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.database import partitions as partitioned
from agent_memory.database.partitions import merged_window
from tests.support.common import unique


@pytest.fixture
def place(client):
    """Key names on the test server (one hash tag, so a cluster run keeps them on one slot
    and the whole sorted set beside them), removed afterwards."""
    tag = unique("window")
    made: list[str] = []

    def key(name: str) -> str:
        made.append(f"test:{{{tag}}}:{name}")
        return made[-1]

    yield key
    if made:
        client.delete(*made)


def _fill(client, place, members: int, partitions: int, scores: int, seed: int):
    """``members`` members with integer scores in ``[0, scores)`` (ties when few), spread at
    random over ``partitions`` sorted sets; returns their keys and one set holding them all."""
    rng = random.Random(seed)
    keys = [place(f"p{p}") for p in range(partitions)]
    whole = place("whole")
    for i in range(members):
        member, score = f"mem_{rng.getrandbits(40):010x}_{i}", rng.randrange(scores)
        client.zadd(keys[rng.randrange(partitions)], {member: score})
        client.zadd(whole, {member: score})
    return keys, whole


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    members=st.integers(0, 120),
    partitions=st.integers(1, 9),
    scores=st.sampled_from([1, 3, 50, 10**13]),
    offset=st.integers(0, 130),
    count=st.integers(0, 30),
    deep=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_a_window_is_the_window_of_the_whole(
    client, place, members, partitions, scores, offset, count, deep, seed
):
    """Shallow windows merge the partitions' tops; deep ones (every window, when the bound is
    0) find their first score by bisection. Few distinct scores make many ties."""
    keys, whole = _fill(client, place, members, partitions, scores, seed)
    expected = client.zrevrange(whole, offset, offset + count - 1) if count else []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partitioned, "DIRECT_WINDOW", 0 if deep else partitioned.DIRECT_WINDOW)
        assert merged_window(client, keys, offset, count) == expected
    client.delete(*keys, whole)


def test_a_window_past_the_direct_bound_reads_the_whole_order(client, place):
    keys, whole = _fill(client, place, 3000, 16, 10**6, 7)
    for offset in (0, 990, 1500, 2990, 3000):
        expected = client.zrevrange(whole, offset, offset + 19)
        assert merged_window(client, keys, offset, 20) == expected, offset
