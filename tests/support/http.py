"""The API's paths and error shape as the e2e tests check them on the wire."""

from __future__ import annotations

import httpx

BASE = "/instances/local/agent-memory"


def assert_error(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["error"] == code and isinstance(body["message"], str) and body["message"]
    assert set(body) <= {"error", "message", "details"}
    return body
