"""What an ``Idempotency-Key`` may be (1-255 visible ASCII characters, as the header's pattern
says) and which requests count as the same (``edge.idempotency.request_fingerprint``)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pydantic
from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2
from hypothesis import given, strategies as st

from agent_memory.edge.idempotency import IDEMPOTENCY_KEY_HEADER, request_fingerprint
from agent_memory.stores.idempotency import IDEMPOTENCY_KEY_PATTERN, key_digest, key_of

# The header's check as the route's validation runs it (pydantic-core's regex, not Python's re).
KEY = pydantic.TypeAdapter(
    Annotated[str, pydantic.StringConstraints(pattern=IDEMPOTENCY_KEY_PATTERN)]
)


def _taken(text: str) -> bool:
    try:
        KEY.validate_python(text)
    except pydantic.ValidationError:
        return False
    return True


@given(st.text(max_size=300))
def test_a_key_is_taken_exactly_when_it_is_1_to_255_visible_ascii_characters(text):
    key = key_of(text)  # without the spaces and tabs around a field value (RFC 9110)
    visible = all("!" <= c <= "~" for c in key)
    assert _taken(text) == (1 <= len(key) <= 255 and visible)


@given(st.text(alphabet=" \t", max_size=3), st.text(alphabet=" \t", max_size=3))
def test_spaces_and_tabs_around_a_key_are_not_part_of_it(before, after):
    assert _taken(before + "k-1" + after) and key_of(before + "k-1" + after) == "k-1"


@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=255
    )
)
def test_every_visible_ascii_key_is_taken_and_named_by_its_digest(text):
    assert _taken(text) and _taken(text + "\n") is False
    digest = key_digest(text)
    assert len(digest) == 64 and set(digest) <= set("0123456789abcdef")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
BODIES = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5)


@given(BODIES, st.randoms(use_true_random=False))
def test_a_body_with_its_keys_reordered_and_spaced_otherwise_is_the_same_request(body, rnd):
    items = list(body.items())
    rnd.shuffle(items)
    other = json.dumps(
        dict(items), indent=rnd.choice([None, 1, 4]), ensure_ascii=rnd.random() < 0.5
    )
    path = "/instances/i/agent-memory/s/memories"
    assert request_fingerprint("POST", path, [], json.dumps(body)) == request_fingerprint(
        "post", path, [], other
    )


@given(BODIES, BODIES)
def test_bodies_that_differ_as_json_are_different_requests(one, two):
    same = json.loads(json.dumps(one)) == json.loads(json.dumps(two))
    a = request_fingerprint("POST", "/p", [], json.dumps(one))
    b = request_fingerprint("POST", "/p", [], json.dumps(two))
    assert (a == b) == same


def test_method_path_and_query_each_make_another_request():
    base = request_fingerprint("POST", "/a", [("x", "1")], "{}")
    assert base != request_fingerprint("PATCH", "/a", [("x", "1")], "{}")
    assert base != request_fingerprint("POST", "/b", [("x", "1")], "{}")
    assert base != request_fingerprint("POST", "/a", [("x", "2")], "{}")
    assert base != request_fingerprint("POST", "/a", [], "{}")
    # the parts are separated: moving text from the path to the body is another request
    assert request_fingerprint("POST", "/a", [], '"b"') != request_fingerprint(
        "POST", '/a"', [], 'b"'
    )


def _headers(headers: dict[str, str] | None) -> Any:
    """The headers as the middleware reads them: Powertools' event's (case-insensitive)."""
    return APIGatewayProxyEventV2({"headers": headers}).headers


def test_the_header_is_found_whatever_the_case_of_its_name():
    for name in ("Idempotency-Key", "idempotency-key", "IDEMPOTENCY-KEY"):
        assert _headers({name: "k"}).get(IDEMPOTENCY_KEY_HEADER) == "k"
    assert _headers({}).get(IDEMPOTENCY_KEY_HEADER) is None
    assert _headers(None).get(IDEMPOTENCY_KEY_HEADER) is None


def test_whole_numbers_however_written_are_the_same_request():
    one = request_fingerprint("POST", "/p", [], '{"v": [0, 1, -0.0], "x": 2}')
    assert one == request_fingerprint("POST", "/p", [], '{"v": [0.0, 1e0, 0], "x": 2.0}')
    assert one != request_fingerprint("POST", "/p", [], '{"v": [0, 1.5, 0], "x": 2}')
    assert one != request_fingerprint("POST", "/p", [], '{"v": [0, 1, 0], "x": "2"}')
