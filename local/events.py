"""Build the events API Gateway sends to Lambda for an HTTP API (payload format 2.0).

Shapes follow https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html
(request event and the four response forms) and, for the authorizer,
https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-lambda-authorizer.html.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qsl, unquote

ACCOUNT_ID = "000000000000"
API_ID = "local"
_TEXT_TYPES = ("json", "text/", "xml", "javascript", "x-www-form-urlencoded")


def _is_text(content_type: str) -> bool:
    return not content_type or any(marker in content_type for marker in _TEXT_TYPES)


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def http_event(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: list[tuple[str, str]],
    body: bytes,
    route_key: str,
    path_parameters: dict[str, str],
    source_ip: str = "127.0.0.1",
    host: str = "127.0.0.1",
) -> dict[str, Any]:
    """The 2.0 request event. Repeated headers and query keys are joined with commas, cookies
    move to ``cookies``, ``x-forwarded-proto`` is ``http`` (API Gateway's is ``https``), and a
    body of a non-text content type, or one that is not UTF-8, is base64-encoded (never
    altered)."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        name = name.lower()
        if name == "cookie":
            cookies.extend(part.strip() for part in value.split(";") if part.strip())
            continue
        merged[name] = f"{merged[name]},{value}" if name in merged else value
    # API Gateway says how the request reached it; the local stack serves plain HTTP.
    merged["x-forwarded-proto"] = "http"
    query: dict[str, str] = {}
    for name, value in parse_qsl(raw_query, keep_blank_values=True):
        query[name] = f"{query[name]},{value}" if name in query else value
    now = time.time()
    text = _is_text(merged.get("content-type", "")) and _is_utf8(body)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": raw_query,
        "headers": merged,
        "requestContext": {
            "accountId": ACCOUNT_ID,
            "apiId": API_ID,
            "domainName": host,
            "domainPrefix": host.split(".")[0],
            "http": {
                "method": method,
                "path": unquote(raw_path),
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex,
            "routeKey": route_key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": bool(body) and not text,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = {k: unquote(v) for k, v in path_parameters.items()}
    if body:
        event["body"] = body.decode("utf-8") if text else base64.b64encode(body).decode()
    return event


def authorizer_event(request: dict[str, Any]) -> dict[str, Any]:
    """The REQUEST authorizer event (payload 2.0) for a request event."""
    event = {k: v for k, v in request.items() if k not in ("body", "isBase64Encoded")}
    event["type"] = "REQUEST"
    event["routeArn"] = (
        f"arn:aws:execute-api:local:{ACCOUNT_ID}:{API_ID}/$default/"
        f"{request['requestContext']['http']['method']}{request['rawPath']}"
    )
    event["identitySource"] = []
    return event


def http_response(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Turn a handler's return value into (status, headers, body) as API Gateway does for 2.0:
    a dict with ``statusCode`` is used as is; anything else is JSON with status 200."""
    if isinstance(result, dict) and "statusCode" in result:
        status = int(result["statusCode"])
        headers = [(k, str(v)) for k, v in (result.get("headers") or {}).items()]
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers.extend((name, str(v)) for v in values)
        headers.extend(("set-cookie", c) for c in result.get("cookies") or [])
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode("utf-8")
        return status, headers, raw
    return 200, [("content-type", "application/json")], json.dumps(result).encode("utf-8")
