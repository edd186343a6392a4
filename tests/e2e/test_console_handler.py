"""ConsoleFunction's ``lambda_handler`` called with the sample events that ``sam local invoke -e``
uses (``events/console.json``, ``events/console_file.json``): the payload 2.0 answers API Gateway
receives, before the local stack turns them into HTTP (base64 bodies, headers, statuses)."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import subprocess
from typing import Any

import pytest

from local.template import read_http_api
from tests.support.common import ROOT

STATIC = ROOT / "functions" / "console" / "static"


@pytest.fixture(scope="module")
def handler() -> Any:
    done = subprocess.run(["make", "-s", "console"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    api = read_http_api(ROOT / "template.yaml", {"ControlRedisUrl": "redis://127.0.0.1:1/0"})
    (route,) = [r for r in api.routes if r.route_key == "GET /console"]
    return route.function.load()


def _event(name: str, **changes: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / name).read_text())
    for key, value in changes.items():
        event[key] = value
    return event


def _file_event(file: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    event = _event("console_file.json")
    event = copy.deepcopy(event)
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/console/{file}"
    event["pathParameters"] = {"proxy": file}
    if headers is not None:
        event["headers"] = headers
    return event


def test_the_page_is_gzip_in_base64_when_accepted_and_plain_otherwise(handler):
    answer = handler(_event("console.json"), None)
    assert answer["statusCode"] == 200 and answer["isBase64Encoded"] is True
    headers = answer["headers"]
    assert headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    page = (STATIC / "index.html").read_bytes()
    assert gzip.decompress(base64.b64decode(answer["body"])) == page
    plain = handler(_event("console.json", headers={"accept": "text/html"}), None)
    assert "Content-Encoding" not in plain["headers"]
    assert base64.b64decode(plain["body"]) == page


def test_the_icon_sample_event_is_served_with_its_type_and_security_headers(handler):
    answer = handler(_event("console_file.json"), None)
    assert answer["statusCode"] == 200
    assert answer["headers"]["Content-Type"] == "image/svg+xml"
    assert answer["headers"]["Cache-Control"] == "no-cache"
    assert answer["headers"]["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in answer["headers"]["Content-Security-Policy"]


@pytest.mark.parametrize(
    "file", ["../template.yaml", "..", ".", "index.html", "static", "console.py", "a/b.js", ""]
)
def test_names_outside_the_built_files_are_404_in_the_error_shape(handler, file):
    answer = handler(_file_event(file), None)
    assert answer["statusCode"] == 404
    assert json.loads(answer["body"])["error"] == "not_found"
    assert answer["headers"]["Content-Type"] == "application/json"
