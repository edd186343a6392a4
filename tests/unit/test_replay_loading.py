"""The replay tool's pure parts: datasets to sessions of messages, the agent loop, percentiles.

Runs on the real files in ``../shared/data`` (beside the project root), never on copies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.replay import (
    MAX_EVENTS_PER_CALL,
    Conversation,
    Message,
    ReplayError,
    Session,
    agent_steps,
    first_sessions,
    load_conversation,
    load_locomo,
    load_memorybank,
    locomo_turn_content,
    parse_locomo_date,
    percentile,
    safe_id,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo10.json"
MEMORYBANK = DATA / "memorybank" / "en" / "memory_bank_en.json"
ID_ALPHABET = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-")

pytestmark = pytest.mark.skipif(
    not (LOCOMO.is_file() and MEMORYBANK.is_file()), reason=f"test data not found in {DATA}"
)


@pytest.fixture(scope="module")
def locomo() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(LOCOMO.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def memorybank() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MEMORYBANK.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def conv26(locomo: list[dict[str, Any]]) -> Conversation:
    return load_locomo(locomo, "conv-26")


def all_messages(conversation: Conversation) -> list[Message]:
    return [message for session in conversation.sessions for message in session.messages]


# --- LoCoMo ------------------------------------------------------------------------------------


def test_conv26_has_19_sessions_and_419_messages(conv26: Conversation) -> None:
    assert conv26.label == "conv-26"
    assert conv26.actor_id == "locomo:conv-26"
    assert len(conv26.sessions) == 19  # the 16 extra date keys (session_20..35) are ignored
    assert conv26.message_count == 419
    assert [s.session_id for s in conv26.sessions] == [
        f"locomo:conv-26:session-{n}" for n in range(1, 20)
    ]


def test_conv26_speakers_roles_and_dates(conv26: Conversation) -> None:
    messages = all_messages(conv26)
    assert {(m.name, m.role) for m in messages} == {("Caroline", "user"), ("Melanie", "assistant")}
    first = conv26.sessions[0].messages[0]
    assert first.created_at == "2023-05-08T13:56:00Z"
    assert first.content == "Hey Mel! Good to see you! How have you been?"
    assert first.event() == {
        "role": "user",
        "content": "Hey Mel! Good to see you! How have you been?",
        "name": "Caroline",
        "created_at": "2023-05-08T13:56:00Z",
    }
    for session in conv26.sessions:  # every message of a session carries the session's date
        assert len({m.created_at for m in session.messages}) == 1
    assert conv26.sessions[-1].messages[0].created_at.startswith("2023-10-22T")


def test_image_turn_gets_its_caption(conv26: Conversation) -> None:
    # D1:5: Caroline shares a photo; its BLIP caption is appended to the text.
    fifth = conv26.sessions[0].messages[4]
    assert fifth.content == (
        "The transgender stories were so inspiring! I was so happy and thankful for all the "
        "support. [shared an image: a photo of a dog walking past a wall with a painting of a "
        "woman]"
    )
    plain = conv26.sessions[0].messages[0]
    assert "[shared an image" not in plain.content


def test_every_locomo_conversation_matches_the_readme_counts(
    locomo: list[dict[str, Any]],
) -> None:
    counts = {
        sample["sample_id"]: (
            len((c := load_locomo(locomo, sample["sample_id"])).sessions),
            c.message_count,
        )
        for sample in locomo
    }
    assert counts["conv-30"] == (19, 369)
    assert counts["conv-41"] == (32, 663)
    assert sum(n for n, _ in counts.values()) == 272
    assert sum(m for _, m in counts.values()) == 5882


def test_locomo_ids_use_the_api_alphabet(locomo: list[dict[str, Any]]) -> None:
    for sample in locomo:
        conversation = load_locomo(locomo, sample["sample_id"])
        assert set(conversation.actor_id) <= ID_ALPHABET
        for session in conversation.sessions:
            assert set(session.session_id) <= ID_ALPHABET
            assert all(m.content and len(m.content) <= 32_000 for m in session.messages)


def test_unknown_locomo_conversation_names_the_known_ones(locomo: list[dict[str, Any]]) -> None:
    with pytest.raises(ReplayError, match=r"conv-99.*conv-26"):
        load_locomo(locomo, "conv-99")


def test_locomo_date_and_turn_helpers() -> None:
    assert parse_locomo_date("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00Z"
    assert parse_locomo_date("12:09 am on 13 September, 2023") == "2023-09-13T00:09:00Z"
    with pytest.raises(ReplayError, match="unreadable"):
        parse_locomo_date("yesterday")
    assert locomo_turn_content({"text": "", "blip_caption": "a cat"}) == "[shared an image: a cat]"
    assert locomo_turn_content({"text": "hi", "img_url": ["x"]}) == "hi"


# --- MemoryBank --------------------------------------------------------------------------------


def test_emily_has_10_sessions_with_2_messages_per_exchange(memorybank: dict[str, Any]) -> None:
    emily = load_memorybank(memorybank, "Emily")
    exchanges = sum(len(day) for day in memorybank["Emily"]["history"].values())
    assert emily.label == "Emily"
    assert emily.actor_id == "memorybank:Emily"
    assert len(emily.sessions) == 10
    assert emily.message_count == 2 * exchanges
    first = emily.sessions[0]
    assert first.session_id == "memorybank:Emily:2023-04-27"
    assert [m.role for m in first.messages[:4]] == ["user", "assistant", "user", "assistant"]
    assert [m.name for m in first.messages[:2]] == ["Emily", "AI companion"]
    assert {m.created_at for m in first.messages} == {"2023-04-27T00:00:00Z"}
    assert emily.sessions[-1].session_id == "memorybank:Emily:2023-05-06"


@pytest.mark.parametrize("name", ["Linda", " Linda", "Jason", " Jason ", "Roland"])
def test_stray_space_keys_match(memorybank: dict[str, Any], name: str) -> None:
    user = load_memorybank(memorybank, name)
    assert user.label == name.strip()
    assert user.actor_id == f"memorybank:{name.strip()}"
    assert len(user.sessions) == 10


def test_empty_day_is_skipped_and_spaces_become_safe(memorybank: dict[str, Any]) -> None:
    john = load_memorybank(memorybank, "John Zhang")
    assert john.actor_id == "memorybank:John_Zhang"
    assert len(john.sessions) == 9  # 2023-05-05 has no exchanges
    assert "memorybank:John_Zhang:2023-05-05" not in {s.session_id for s in john.sessions}
    assert {m.name for s in john.sessions for m in s.messages} == {"John Zhang", "AI companion"}


def test_unknown_memorybank_user(memorybank: dict[str, Any]) -> None:
    with pytest.raises(ReplayError, match=r"Nobody.*Emily"):
        load_memorybank(memorybank, "Nobody")


def test_load_conversation_reads_files_and_reports_bad_ones(tmp_path: Path) -> None:
    assert load_conversation("locomo", LOCOMO, "conv-26").message_count == 419
    assert len(load_conversation("memorybank", MEMORYBANK, "Emily").sessions) == 10
    with pytest.raises(ReplayError, match="cannot read"):
        load_conversation("locomo", tmp_path / "missing.json", "conv-26")
    with pytest.raises(ReplayError, match="not a LoCoMo file"):
        load_conversation("locomo", MEMORYBANK, "conv-26")


# --- the agent loop and statistics -------------------------------------------------------------


def test_agent_steps_recall_before_each_user_turn(conv26: Conversation) -> None:
    for session in conv26.sessions:
        steps = agent_steps(session)
        assert [m for step in steps for m in step.messages] == list(session.messages)
        for index, step in enumerate(steps):
            if step.messages[0].role == "assistant":  # only a session's opening replies
                assert index == 0
                assert step.query is None
            else:
                assert step.query == step.messages[0].content
            assert all(m.role == "assistant" for m in step.messages[1:])
    recalls = sum(step.query is not None for s in conv26.sessions for step in agent_steps(s))
    assert recalls == sum(m.role == "user" for m in all_messages(conv26))


def test_agent_steps_leading_replies_and_long_runs() -> None:
    def msg(role: str, n: int) -> Message:
        return Message(role, f"m{n}", role, "2023-01-01T00:00:00Z")  # type: ignore[arg-type]

    messages = [msg("assistant", 0), msg("user", 1)] + [
        msg("assistant", n) for n in range(2, 2 + MAX_EVENTS_PER_CALL + 5)
    ]
    steps = agent_steps(Session("s", tuple(messages)))
    assert [(s.query, len(s.messages)) for s in steps] == [
        (None, 1),
        ("m1", MAX_EVENTS_PER_CALL),
        (None, 6),
    ]


def test_conversation_starting_with_speaker_b(locomo: list[dict[str, Any]]) -> None:
    conv30 = load_locomo(locomo, "conv-30")  # Gina (speaker_b) opens session 1
    first = agent_steps(conv30.sessions[0])[0]
    assert first.query is None
    assert first.messages[0].name == "Gina"


def test_first_sessions(conv26: Conversation) -> None:
    assert len(first_sessions(conv26, 3).sessions) == 3
    assert first_sessions(conv26, None) is conv26
    assert len(first_sessions(conv26, 100).sessions) == 19


def test_percentile_nearest_rank() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 50) == 50.0
    assert percentile([5.0, 1.0, 3.0], 99) == 5.0
    assert percentile([7.0], 1) == 7.0


def test_safe_id() -> None:
    assert safe_id(" John Zhang ") == "John_Zhang"
    assert safe_id("a/b c") == "a_b_c"
    with pytest.raises(ReplayError):
        safe_id("   ")
