"""GET /console and GET /console/{proxy+}: the web console's page and files, before sign-in.

The files are what ``make console`` builds from ``console/src/`` into ``static/`` beside this
module (``sam build`` ships the folder with the function). These two routes have no authorizer:
the page must load before a person signs in, and it holds nothing but code. Every call it makes
afterwards goes to the API's authorized routes with ``Authorization: Bearer <key>``.

Built on Powertools' HTTP API resolver directly rather than ``agent_memory.edge.resolver.Api``,
which authenticates before routing and reads and answers JSON only (see docs/console.md).

Only the files found in ``static/`` at cold start are served, looked up by exact name in that
table, so no request path can reach another file (``..``, encoded slashes, absolute paths and
subfolders all miss the table: 404 in the API's error shape). ``index.html`` is served at
``/console`` only: its relative links (``console/app-<hash>.js``) resolve from there.
"""

import gzip
import hashlib
import re
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from agent_memory.models import ErrorBody

STATIC = Path(__file__).resolve().parent / "static"
INDEX = "index.html"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}
_TEXT = (".html", ".js", ".css", ".svg", ".txt")
# esbuild's content-hashed names ("app-5FZQ2K7B.js"): a new build is a new name, so a browser
# may keep one for a year without asking again. Everything else is checked on every load.
_HASHED = re.compile(r"^[A-Za-z0-9_]+-[A-Z0-9]{8}\.[a-z]+$")
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

# Sent with every answer of these routes, errors included. The page runs only its own script
# and style, talks only to its own origin, and cannot be framed, submit forms or change its
# base URL (https://www.w3.org/TR/CSP3/).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True)
class Asset:
    """One file as it is served: its bytes, gzip of them when that is smaller, the content
    type, the cache policy and a strong ETag (a SHA-256 prefix of the bytes)."""

    body: bytes
    gzipped: bytes | None
    content_type: str
    cache_control: str
    etag: str


def _asset(path: Path) -> Asset:
    body = path.read_bytes()
    packed = gzip.compress(body, compresslevel=9, mtime=0) if path.suffix in _TEXT else None
    return Asset(
        body=body,
        gzipped=packed if packed is not None and len(packed) < len(body) else None,
        content_type=CONTENT_TYPES[path.suffix],
        cache_control=IMMUTABLE if _HASHED.match(path.name) else REVALIDATE,
        etag='"' + hashlib.sha256(body).hexdigest()[:32] + '"',
    )


@cache
def assets() -> dict[str, Asset]:
    """The files of ``static/`` by name, read once per container: regular files directly in
    the folder (no subfolders, no symbolic links), with a known suffix and a plain name.
    Empty when the console was not built."""
    if not STATIC.is_dir():
        return {}
    return {
        path.name: _asset(path)
        for path in sorted(STATIC.iterdir())
        if path.is_file()
        and not path.is_symlink()
        and path.suffix in CONTENT_TYPES
        and _NAME.match(path.name)
    }


def _accepts_gzip(header: str) -> bool:
    """Whether an ``Accept-Encoding`` value accepts gzip (RFC 9110 section 12.5.3): a
    ``gzip`` or ``*`` entry whose ``q`` is not 0."""
    for entry in header.lower().split(","):
        coding, _, params = entry.strip().partition(";")
        if coding.strip() not in ("gzip", "*"):
            continue
        q = params.strip().removeprefix("q=").strip() if "q=" in params else "1"
        try:
            return float(q) > 0
        except ValueError:
            return False
    return False


def _not_found(message: str) -> Response[str]:
    return Response(
        status_code=HTTPStatus.NOT_FOUND,
        content_type="application/json",
        body=ErrorBody(error="not_found", message=message).model_dump_json(exclude_none=True),
        headers={"Cache-Control": REVALIDATE, **SECURITY_HEADERS},
    )


def serve(name: str) -> Response[Any]:
    """The answer for the console file ``name``: 200 with the file (gzip when the request
    accepts it and it is smaller), 304 when ``If-None-Match`` names its ETag, 404 otherwise."""
    asset = assets().get(name)
    if asset is None:
        if not assets():
            return _not_found("The console is not built here: run `make console`, then deploy.")
        return _not_found("The console has no such file; open /console.")
    headers = {
        "Cache-Control": asset.cache_control,
        "ETag": asset.etag,
        "Vary": "Accept-Encoding",
        **SECURITY_HEADERS,
    }
    request = app.current_event.headers
    given = {
        tag.strip().removeprefix("W/") for tag in (request.get("if-none-match") or "").split(",")
    }
    if asset.etag in given or "*" in given:
        return Response(status_code=HTTPStatus.NOT_MODIFIED, body=None, headers=headers)
    body = asset.body
    if asset.gzipped is not None and _accepts_gzip(request.get("accept-encoding") or ""):
        body, headers["Content-Encoding"] = asset.gzipped, "gzip"
    return Response(
        status_code=HTTPStatus.OK,
        content_type=asset.content_type,
        body=body,
        headers=headers,
        compress=False,
    )


app = APIGatewayHttpResolver()


@app.get("/console", include_in_schema=False)
def page() -> Response[Any]:
    """The console's page."""
    return serve(INDEX)


@app.get("/console/<name>", include_in_schema=False)
def file(name: str) -> Response[Any]:
    """One of the page's files (``index.html`` itself only at ``/console``)."""
    return serve(name) if name != INDEX else _not_found("Open the console at /console.")


@app.not_found
def nothing_here(exc: Exception) -> Response[str]:
    """A path with more segments (``/console/a/b``): no console file has one."""
    return _not_found("The console has no such file; open /console.")


lambda_handler = app.resolve
