"""The resolver's own rules: strict JSON, the status of each domain error, the caller."""

import json

import pytest

from agent_memory.api import principal_from, status_of, strict_json_loads
from agent_memory.errors import (
    ActorMismatch,
    DatabaseUnavailable,
    InstanceNotFound,
    PayloadTooLarge,
    SessionNotFound,
    StoreNotFound,
    Unauthorized,
    ValidationFailed,
)


@pytest.mark.parametrize(
    "text",
    ['{"a": "\\ud83d"}', '{"a": "\\udc00x"}', '{"a": NaN}', '{"a": Infinity}', "[1,]", "{", ""],
)
def test_strict_json_rejects_what_cannot_be_stored_as_utf8(text):
    with pytest.raises(json.JSONDecodeError):
        strict_json_loads(text)


def test_strict_json_accepts_surrogate_pairs_and_raw_utf8():
    assert strict_json_loads('{"a": "\\ud83d\\ude00", "b": "👩‍💻"}') == {"a": "😀", "b": "👩‍💻"}


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (Unauthorized("x"), 401),
        (InstanceNotFound("i"), 404),
        (StoreNotFound("s"), 404),
        (SessionNotFound("s"), 404),
        (ActorMismatch("s", "a", "b"), 409),
        (PayloadTooLarge("x"), 413),
        (ValidationFailed("x"), 422),
        (DatabaseUnavailable("x"), 503),
    ],
)
def test_each_domain_error_has_its_status(error, status):
    assert status_of(error) == status


def _event(context):
    return {"requestContext": {"authorizer": {"lambda": context}}}


def test_principal_comes_from_the_authorizer_context():
    principal = principal_from(_event({"org_id": "acme", "key_id": "key_1"}))
    assert (principal.org_id, principal.key_id) == ("acme", "key_1")


def test_no_principal_is_unauthorized_and_an_outage_is_unavailable():
    with pytest.raises(Unauthorized, match="revoked"):
        principal_from(_event({"error": "unauthorized", "message": "revoked"}))
    with pytest.raises(Unauthorized):
        principal_from({"requestContext": {}})
    with pytest.raises(DatabaseUnavailable):
        principal_from(_event({"error": "database_unavailable", "message": "down"}))
