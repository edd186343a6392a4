"""The local stack fails a function's answer over Lambda's response payload limit as AWS does:
API Gateway's 500, measured as Lambda carries the answer (its JSON without ASCII escapes, in
UTF-8), so an answer that fits locally fits in AWS."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from agent_memory.answers import LAMBDA_PAYLOAD_LIMIT
from local.server import Gateway
from local.template import Function, HttpApi, Route

HANDLER = """
def lambda_handler(event, context):
    size = int(event["queryStringParameters"]["size"])
    return {"statusCode": 200, "headers": {"content-type": "text/plain"}, "body": CHARACTER * size}
"""

# The envelope around the body: {"statusCode": 200, "headers": {...}, "body": "..."}.
ENVELOPE = len(
    json.dumps(
        {"statusCode": 200, "headers": {"content-type": "text/plain"}, "body": ""},
        ensure_ascii=False,
    )
)


def _gateway(tmp_path, character: str) -> Gateway:
    (tmp_path / "big.py").write_text(f"CHARACTER = {character!r}\n" + HANDLER)
    function = Function("BigFunction", tmp_path, "big.lambda_handler")
    route = Route("GET", "/big", function, re.compile("/big"), 1, authorized=False)
    return Gateway(HttpApi(routes=[route], authorizer=None, environment={}))


@pytest.mark.parametrize(("character", "carried"), [("a", 1), ("é", 2), ("\u0001", 6)])
def test_an_answer_at_the_limit_passes_one_byte_over_is_a_500(tmp_path, character, carried):
    gateway = _gateway(tmp_path, character)
    fits = (LAMBDA_PAYLOAD_LIMIT - ENVELOPE) // carried

    def call(size: int) -> tuple[int, bytes]:
        status, _, body = asyncio.run(gateway.invoke("GET", "/big", f"size={size}", [], b""))
        return status, body

    status, body = call(fits)
    assert status == 200 and body.decode() == character * fits
    status, body = call(fits + 1)
    assert (status, json.loads(body)) == (500, {"message": "Internal Server Error"})
