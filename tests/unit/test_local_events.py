"""The API Gateway 2.0 events and responses the local stack builds."""

import base64
import json

from local.events import authorizer_event, http_event, http_response


def _event(**overrides):
    args = {
        "method": "POST",
        "raw_path": "/instances/db/agent-memory/s/sessions/a%40b/events",
        "raw_query": "x=1&x=2&y=",
        "headers": [
            ("Content-Type", "application/json"),
            ("X-Multi", "a"),
            ("X-Multi", "b"),
            ("Cookie", "c1=v1; c2=v2"),
        ],
        "body": b'{"a": 1}',
        "route_key": "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}"
        "/events",
        "path_parameters": {"instance_id": "db", "store": "s", "session_id": "a%40b"},
    }
    args.update(overrides)
    return http_event(**args)


def test_request_event_shape():
    event = _event()
    assert event["version"] == "2.0"
    assert event["headers"]["x-multi"] == "a,b"
    assert event["cookies"] == ["c1=v1", "c2=v2"]
    assert event["queryStringParameters"] == {"x": "1,2", "y": ""}
    assert event["pathParameters"]["session_id"] == "a@b"
    assert event["requestContext"]["http"]["path"].endswith("/a@b/events")
    assert event["body"] == '{"a": 1}' and event["isBase64Encoded"] is False


def test_binary_bodies_are_base64():
    event = _event(headers=[("content-type", "application/octet-stream")], body=b"\xff\x00")
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == b"\xff\x00"


def test_authorizer_event_has_no_body_and_a_route_arn():
    event = authorizer_event(_event())
    assert event["type"] == "REQUEST" and "body" not in event
    assert event["routeArn"].endswith(
        "/$default/POST/instances/db/agent-memory/s/sessions/a%40b/events"
    )


def test_responses():
    status, headers, body = http_response(
        {"statusCode": 201, "headers": {"Content-Type": "application/json"}, "body": "{}"}
    )
    assert (status, body) == (201, b"{}") and ("Content-Type", "application/json") in headers
    status, _, body = http_response({"ok": True})
    assert status == 200 and json.loads(body) == {"ok": True}
    status, _, body = http_response(
        {"statusCode": 200, "body": base64.b64encode(b"\x01").decode(), "isBase64Encoded": True}
    )
    assert body == b"\x01"
