"""Extraction that updates memories, on a real Redis with loopback model servers.

The vegetarian story through extraction with the rule-based stand-in provider
(``tools.scripted_model``, speaking OpenAI's HTTP shapes): the newer diet fact supersedes the
older one, the unrelated fact stays current, the event date comes from "yesterday" and the
message's date, and the memory names the messages it came from. Then crafted answers: an id
that was not shown is ignored (and logged), as is a second item naming the same id, and a
shown memory superseded meanwhile leaves the new memory kept as a plain one.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta

from agent_memory.clock import to_ms
from agent_memory.memories.models import MemoryIn
from agent_memory.observability import logger
from agent_memory.search.selection import Selection
from tests.support.background import DIMS
from tests.support.model_servers import ScriptedChatServer
from tools.scripted_model import ScriptedServer


def _extract(world, session, *contents, actor="alice"):
    world.say(session, *contents, actor=actor)
    world.quiet()
    report = world.run(session)
    assert report.outcome == "done", report.error
    return report


def _current(world, actor="alice"):
    return world.memories.page(0, 100, actor, None).memories


def test_the_vegetarian_story_through_extraction(make_world, scripted):
    world = make_world(scripted, scripted)
    first = _extract(world, "s1", "I am vegetarian.", "I work at Northwind Labs.")
    assert (first.kept, first.superseded) == (2, 0)
    (old,) = [m for m in _current(world) if "vegetarian" in m.text]
    between = world.clock.moment
    world.clock.moment += timedelta(days=1)
    day = world.clock.moment
    second = _extract(world, "s2", "Hello again!", "Yesterday I started eating fish again.")
    assert (second.kept, second.superseded, second.ignored_supersedes) == (1, 1, 0)

    current = _current(world)
    diet = [m for m in current if "fish" in m.text or "vegetarian" in m.text]
    assert [m.text for m in diet] == [
        f"The user said on {day.date()}: Yesterday I started eating fish again."
    ]
    new = diet[0]
    yesterday = datetime.combine(day.date() - timedelta(days=1), datetime.min.time(), UTC)
    assert new.supersedes == old.id and new.occurred_at == yesterday
    assert any("Northwind" in m.text for m in current)
    assert new.source.session_id == "s2" and new.source.seqs == [2]
    assert (new.source.first_seq, new.source.last_seq) == (1, 2)

    history = world.memories.page(0, 100, "alice", None, Selection(include_superseded=True))
    closed = next(m for m in history.memories if m.id == old.id)
    assert closed.superseded_by == new.id and closed.valid_until == new.valid_from
    then = world.memories.page(0, 100, "alice", None, Selection(as_of=to_ms(between)))
    assert sorted(m.id for m in then.memories if "Northwind" not in m.text) == [old.id]
    # The second run showed the model the actor's memories, with their ids.
    assert scripted.model.counts["extract"] == 2


def test_a_plain_add_model_keeps_both_and_the_stale_fact_stays_current(make_world):
    plain = ScriptedServer(supersede=False, dimensions=DIMS)
    plain.start()
    try:
        world = make_world(plain, plain)
        _extract(world, "s1", "I am vegetarian.")
        world.clock.moment += timedelta(days=1)
        report = _extract(world, "s2", "I started eating fish again.")
        assert report.superseded == 0
        assert len(_current(world)) == 2  # what memory did before this issue
    finally:
        plain.shutdown()
        plain.server_close()


def test_only_the_named_memory_of_the_same_actor_is_superseded(make_world, scripted):
    world = make_world(scripted, scripted)
    first = world.clock.moment.date()
    _extract(world, "a1", "I am vegetarian.", "I love hiking.")
    _extract(world, "b1", "I am vegetarian.", actor="bob")
    world.clock.moment += timedelta(days=1)
    _extract(world, "a2", "I started eating fish again.")
    assert [m.text for m in _current(world, "bob")] == [
        f"The user said on {first}: I am vegetarian."
    ]
    assert sorted(m.text for m in _current(world)) == [
        f"The user said on {first}: I love hiking.",
        f"The user said on {world.clock.moment.date()}: I started eating fish again.",
    ]


def _answer_with(server, items):
    server.reply(json.dumps({"memories": items}))


def _shown_ids(request) -> list[str]:
    user = request.body["messages"][-1]["content"]
    return re.findall(r"^\[(mem_[0-9a-f]{20})\] ", user, flags=re.MULTILINE)


def test_a_supersedes_naming_a_memory_not_shown_is_ignored_and_logged(make_world, scripted, caplog):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        mine = world.memories.add(MemoryIn(text="I am vegetarian", actor_id="alice")).memory
        bobs = world.memories.add(MemoryIn(text="I am vegetarian", actor_id="bob")).memory
        _answer_with(
            model,
            [
                {
                    "text": "The user eats fish",
                    "type": "semantic",
                    "topics": [],
                    "supersedes": bobs.id,
                },
                {
                    "text": "The user eats eggs",
                    "type": "semantic",
                    "topics": [],
                    "supersedes": "mem_0123456789abcdef0123",
                },
                {
                    "text": "The user eats cheese",
                    "type": "semantic",
                    "topics": [],
                    "supersedes": mine.id,
                },
                {
                    "text": "The user eats tofu",
                    "type": "semantic",
                    "topics": [],
                    "supersedes": mine.id,
                },
            ],
        )
        with caplog.at_level(logging.WARNING, logger=logger.name):
            report = _extract(world, "s1", "I changed my diet.")
        assert _shown_ids(model.requests[-1]) == [mine.id]  # never another actor's
        assert (report.kept, report.superseded, report.ignored_supersedes) == (4, 1, 3)
        assert "not shown to it" in caplog.text and "fish" not in caplog.text
        current = {m.text: m for m in _current(world)}
        assert set(current) == {
            "The user eats fish",
            "The user eats eggs",
            "The user eats cheese",
            "The user eats tofu",
        }
        assert current["The user eats cheese"].supersedes == mine.id
        assert [m.id for m in _current(world, "bob")] == [bobs.id]  # untouched


def test_a_shown_memory_superseded_meanwhile_leaves_a_plain_memory(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        old = world.memories.add(MemoryIn(text="I am vegetarian", actor_id="alice")).memory

        def answer(request):
            # While the model "thinks", someone else replaces the memory it was shown.
            world.memories.add(MemoryIn(text="I am vegan", actor_id="alice", supersedes=old.id))
            return json.dumps(
                {
                    "memories": [
                        {
                            "text": "The user eats fish",
                            "type": "semantic",
                            "topics": [],
                            "supersedes": old.id,
                        }
                    ]
                }
            )

        model.responder = answer
        report = _extract(world, "s1", "I eat fish now.")
        assert (report.kept, report.superseded, report.ignored_supersedes) == (1, 0, 1)
        assert sorted(m.text for m in _current(world)) == ["I am vegan", "The user eats fish"]


def test_an_answers_occurred_at_and_messages_are_checked(make_world, scripted):
    with ScriptedChatServer("openai") as model:
        world = make_world(model, scripted)
        _answer_with(
            model,
            [
                {
                    "text": "a",
                    "type": "episodic",
                    "topics": [],
                    "occurred_at": "2026-11-29",
                    "messages": [1, 2, 99, "2", True],
                },
                {
                    "text": "b",
                    "type": "episodic",
                    "topics": [],
                    "occurred_at": "yesterday",
                    "messages": "1",
                },
                {
                    "text": "c",
                    "type": "episodic",
                    "topics": [],
                    "occurred_at": "2026-11-29T23:30:00-02:00",
                },
                {"text": "d", "type": "episodic", "topics": [], "occurred_at": "1800-01-01"},
            ],
        )
        _extract(world, "s1", "one", "two")
        by_text = {m.text: m for m in _current(world)}
        assert by_text["a"].occurred_at == datetime(2026, 11, 29, tzinfo=UTC)
        assert by_text["a"].source.seqs == [1, 2]
        assert by_text["b"].occurred_at is None and by_text["b"].source.seqs is None
        assert by_text["c"].occurred_at == datetime(2026, 11, 30, 1, 30, tzinfo=UTC)
        assert by_text["d"].occurred_at is None
        assert (by_text["d"].source.first_seq, by_text["d"].source.last_seq) == (1, 2)
