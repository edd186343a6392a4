"""The recall context string an agent passes as its system prompt."""

from datetime import UTC, datetime

from agent_memory.memories.models import MemoryView
from agent_memory.memories.recall import EMPTY_CONTEXT, render_context
from agent_memory.sessions.models import Message

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _message(seq, role, content, name=None):
    return Message(seq=seq, role=role, content=content, name=name, created_at=WHEN)


def _memory(text, type_):
    return MemoryView(
        id="m1",
        text=text,
        type=type_,
        actor_id="u",
        topics=[],
        metadata={},
        importance=None,
        confidence=None,
        created_at=WHEN,
        updated_at=WHEN,
        expires_at=WHEN,
        source=None,
        valid_from=WHEN,
    )


def test_empty_memory_says_so():
    assert render_context(None, [], []) == EMPTY_CONTEXT


def test_sections_run_from_what_changes_least_profile_summary_messages_memories():
    text = render_context(
        "They talked about a trip.",
        [_memory("Deploys to eu-west-1", "semantic"), _memory("Migrated the cache", "episodic")],
        [_message(1, "user", "hello", "Caroline"), _message(2, "assistant", "hi")],
        profile={"name": "Caroline", "pets": ["Oscar", 'a "cat"'], "age": 31, "vegan": True},
    )
    profile = text.index("## About the user")
    summary = text.index("## Summary of the earlier conversation")
    memories = text.index("## Long-term memories about the user")
    messages = text.index("## Recent messages")
    assert profile < summary < messages < memories
    assert '- name: "Caroline"\n- pets: "Oscar", "a \\"cat\\""\n- age: 31\n- vegan: true' in text
    assert '## Summary of the earlier conversation\n"They talked about a trip."' in text
    assert '- [semantic] "Deploys to eu-west-1"' in text
    assert '- [episodic] "Migrated the cache"' in text  # no event date known: no date
    assert '[2023-05-08 13:56] user "Caroline": "hello"\n[2023-05-08 13:56] assistant: "hi"' in text


def test_only_messages_gives_only_the_messages_section():
    text = render_context(None, [], [_message(1, "user", "hello")])
    assert "## Recent messages" in text
    assert "## Summary" not in text and "## Long-term" not in text


def test_a_memory_is_labelled_with_the_date_of_its_event_not_the_day_it_was_kept():
    ran = _memory("Ran a 10k", "episodic").model_copy(
        update={"occurred_at": datetime(2023, 5, 1, tzinfo=UTC)}
    )
    fact = _memory("Is vegetarian", "semantic").model_copy(
        update={"occurred_at": datetime(2023, 4, 30, 23, 0, tzinfo=UTC)}
    )
    text = render_context(None, [ran, fact], [])
    assert '- [episodic, 2023-05-01] "Ran a 10k"' in text
    assert '- [semantic, 2023-04-30] "Is vegetarian"' in text
    assert "2023-05-08" not in text  # the day both were kept
