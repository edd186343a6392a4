"""The measures of ``bench.prefix_cache``, on contexts recall renders (``render_context``):
the prefix share, the older layout, and what OpenAI's and Anthropic's published caching rules
serve. The replay itself runs with ``make bench-prefix-cache``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, strategies as st

from agent_memory.memories.models import MemoryView
from agent_memory.memories.recall import MEMORIES_HEADING, render_context
from agent_memory.sessions.models import Message
from bench.prefix_cache import (
    anthropic_cached_tokens,
    blocks,
    common_prefix,
    older_layout,
    openai_cached_tokens,
    prefix_share,
    tokens,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
texts = st.text(min_size=1, max_size=300)


def memory_view(text: str) -> MemoryView:
    return MemoryView(
        id="m1",
        text=text,
        type="semantic",
        actor_id="u",
        topics=[],
        metadata={},
        importance=None,
        confidence=None,
        created_at=START,
        updated_at=START,
        expires_at=START,
        source=None,
        valid_from=START,
    )


def _messages(contents: list[str]) -> list[Message]:
    return [
        Message(
            seq=n + 1,
            role="user" if n % 2 == 0 else "assistant",
            content=text,
            created_at=START + timedelta(minutes=n),
        )
        for n, text in enumerate(contents)
    ]


@given(st.text(max_size=200), st.text(max_size=200))
def test_the_common_prefix_is_the_longest(a, b):
    n = common_prefix(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]


@given(
    st.one_of(st.none(), texts),
    st.lists(texts, min_size=1, max_size=30),
    st.lists(texts, max_size=12),
    st.lists(texts, max_size=12),
    texts,
)
def test_a_turn_keeps_the_previous_context_up_to_its_memories(
    summary, said, memories_before, memories_now, new_message
):
    """Recall's order: one more message and other memories keep everything before the
    previous turn's memories (the issue's promise); the older order has the same lines."""
    before_messages = _messages(said)
    now_messages = _messages([*said, new_message])
    before = render_context(summary, [memory_view(t) for t in memories_before], before_messages)
    now = render_context(summary, [memory_view(t) for t in memories_now], now_messages)
    stable = before.split("\n\n" + MEMORIES_HEADING)[0]
    assert now.startswith(stable)
    assert prefix_share(before, now) >= len(stable.encode()) / len(now.encode()) - 1e-9
    older = older_layout(now)  # the same lines, memories before messages
    assert sorted(older.split("\n")) == sorted(now.split("\n"))
    if memories_now:
        assert older.index(MEMORIES_HEADING) < older.index("## Recent messages")
    assert 0 <= prefix_share(before, now) <= 1


@given(st.integers(0, 200_000), st.integers(0, 200_000))
def test_openai_serves_from_1024_tokens_in_steps_of_128(shared_chars, extra):
    shared = "x" * shared_chars
    served = openai_cached_tokens(shared + "a" * extra, shared + "b" * extra)
    held = tokens(shared)
    if held < 1024:
        assert served == 0
    else:
        assert (served - 1024) % 128 == 0 and held - 128 < served <= held


def test_anthropic_serves_only_a_prefix_written_at_a_breakpoint_within_20_blocks():
    line = "- a line of forty characters, give or take\n"
    header = [f"{n:04d} " + line for n in range(120)]  # about 1,500 tokens
    turn = lambda extra: "".join(header + extra) + "\n" + MEMORIES_HEADING + '\n- [fact] "x"'  # noqa: E731
    written: set[str] = set()
    assert anthropic_cached_tokens(turn([]), written) == 0  # nothing written before
    assert len(written) == 1
    # the previous breakpoint was on the last header line: its prefix is served
    assert anthropic_cached_tokens(turn(["one more\n"]), written) == tokens("".join(header))
    far = [f"new {n}\n" for n in range(25)]  # the last breakpoint is 25 blocks back
    assert anthropic_cached_tokens(turn(["one more\n", *far]), written) == 0
    small: set[str] = set()
    anthropic_cached_tokens("short\n" + MEMORIES_HEADING, small)
    assert small == set()  # under 1,024 tokens nothing is written


@given(st.lists(st.text(alphabet="abc \n", max_size=30), max_size=10))
def test_blocks_join_to_the_context(lines):
    context = "\n".join(lines)
    parts, breakpoint = blocks(context)
    assert "".join(parts) == context
    assert 0 <= breakpoint < len(parts)
