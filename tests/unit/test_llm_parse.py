"""parse_json_object: the first complete top-level JSON object in a model's answer, or
ModelAnswerInvalid saying what was wrong (never quoting the answer)."""

import pytest

from agent_memory.errors import ModelAnswerInvalid, ProviderRejected
from agent_memory.providers.json_answers import parse_json_object
from agent_memory.providers.language_models import JSON_REMINDER, _ask_for_json

OBJECT = {"memories": [{"text": "Likes tea {strong}", "type": "preference", "topics": ["tea"]}]}
TEXT = '{"memories": [{"text": "Likes tea {strong}", "type": "preference", "topics": ["tea"]}]}'


@pytest.mark.parametrize(
    "answer",
    [
        TEXT,
        f"  \n{TEXT}\n\n",
        f"```json\n{TEXT}\n```",
        f"```\n{TEXT}\n```",
        f"```JSON\n{TEXT}```",
        f"Here you go: {TEXT} Hope this helps!",
        f"Sure! Here is the JSON you asked for:\n\n```json\n{TEXT}\n```\n\nLet me know.",
        f"I considered {{these}} and [1] other notes, then: {TEXT}",
        f"Wrong first try {{'memories': []}} then the real one {TEXT}",
        f'A draft with a trailing comma {{"a": 1,}} then {TEXT}',
    ],
    ids=[
        "bare",
        "blank-around",
        "json-fence",
        "plain-fence",
        "upper-fence-no-newline",
        "prose-around",
        "prose-and-fence",
        "braces-and-brackets-in-prose",
        "single-quoted-object-skipped",
        "trailing-comma-object-skipped",
    ],
)
def test_accepted_answers_give_the_object(answer):
    assert parse_json_object(answer) == OBJECT


def test_the_first_complete_object_wins():
    assert parse_json_object('{"summary": "one"} and {"summary": "two"}') == {"summary": "one"}


def test_an_object_nested_in_a_broken_one_is_never_picked():
    # The outer object is invalid (a bare word) but closes; the inner one is valid JSON.
    answer = '{"memories": [{"text": "a"}], oops} {"summary": "second"}'
    assert parse_json_object(answer) == {"summary": "second"}


def test_strings_with_braces_and_escaped_quotes_do_not_confuse_the_scan():
    answer = 'Result: {"text": "a \\"quoted\\" } brace", "n": 1} done'
    assert parse_json_object(answer) == {"text": 'a "quoted" } brace', "n": 1}


def test_unicode_is_kept():
    assert parse_json_object('{"summary": "Café – 東京 ✓"}') == {"summary": "Café – 東京 ✓"}


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ("", "an empty answer"),
        ("   \n\t ", "an empty answer"),
        ("I could not find any memories in this conversation.", "no JSON object"),
        ("```json\n```", "no JSON object"),
        ('[{"text": "a"}]', "a JSON array, not an object"),
        ('Here: [{"text": "a"}, {"text": "b"}] done', "a JSON array, not an object"),
        ('"just a string"', "a JSON string, not an object"),
        ("42", "a JSON number, not an object"),
        ("true", "a JSON boolean, not an object"),
        ("null", "a JSON null, not an object"),
        ('{"memories": [{"text": "a"}, {"text": "b"', "a truncated JSON object"),
        ('```json\n{"summary": "The user said', "a truncated JSON object"),
        ('[{"text": "a"}, {"text": "b"', "a truncated JSON array"),
        ("{'summary': 'single quotes'}", "invalid JSON (Expecting property name"),
        ('{"a": 1,}', "invalid JSON"),
    ],
)
def test_refused_answers_say_what_was_wrong(answer, problem):
    with pytest.raises(ModelAnswerInvalid) as error:
        parse_json_object(answer)
    assert problem in str(error.value)
    assert error.value.code == "model_answer_invalid"
    assert isinstance(error.value, ProviderRejected)


def test_a_truncated_object_is_refused_even_though_a_nested_object_is_complete():
    with pytest.raises(ModelAnswerInvalid, match="truncated"):
        parse_json_object('{"memories": [{"text": "complete"}, {"text": "cut')


def test_the_error_never_quotes_the_answer():
    secret = "the user's card number is 4111 1111 1111 1111"
    for answer in (secret, f'{{"summary": "{secret}", }}', f'{{"summary": "{secret}'):
        with pytest.raises(ModelAnswerInvalid) as error:
            parse_json_object(answer)
        assert "4111" not in str(error.value)


def test_invalid_json_names_line_and_column():
    with pytest.raises(ModelAnswerInvalid, match=r"delimiter at line 2 column 9"):
        parse_json_object('{"a": 1,\n "b": 2 "c": 3}')


def test_json_is_asked_for_only_when_neither_message_says_json():
    assert _ask_for_json("Answer in JSON.", "hello") == ("Answer in JSON.", "hello")
    assert _ask_for_json("system", "give me json please") == ("system", "give me json please")
    assert _ask_for_json("system", "hello") == ("system", f"hello\n\n{JSON_REMINDER}")
    assert _ask_for_json("", "") == ("", JSON_REMINDER)
    assert "JSON object" in JSON_REMINDER


def test_lone_surrogates_a_model_writes_become_replacement_characters():
    answer = '{"memories": [{"text": "a \\ud800 b \\ud83d\\ude00", "\\udfff": ["\\udbff"]}]}'
    assert parse_json_object(answer) == {
        "memories": [{"text": "a \ufffd b 😀", "\ufffd": ["\ufffd"]}]
    }
