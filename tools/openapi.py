"""Build the API's OpenAPI document from the functions' own routes, or check it has not drifted.

Each function declares its route with Powertools (typed body, response model, error answers);
this merges them, in template.yaml order, into one document.

    python -m tools.openapi            # write docs/openapi.json
    python -m tools.openapi --check    # exit 1 if docs/openapi.json is not what the code says
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from local.template import read_http_api

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "openapi.json"


TITLE = "KiviDB agent memory"
VERSION = "1.0.0"


def build() -> dict[str, Any]:
    """The merged OpenAPI 3 document of every route in template.yaml."""
    api = read_http_api(ROOT / "template.yaml", _AnyParameter())
    merged: dict[str, Any] = {}
    for route in api.routes:
        app = getattr(route.function.module(), "app", None)
        if app is None:  # the MCP function: JSON-RPC at /mcp, not a REST route (docs/mcp.md)
            continue
        schema = json.loads(app.get_openapi_json_schema(title=TITLE, version=VERSION))
        if not merged:
            merged = schema
            continue
        for path, operations in schema.get("paths", {}).items():
            merged.setdefault("paths", {}).setdefault(path, {}).update(operations)
        for name, component in schema.get("components", {}).get("schemas", {}).items():
            merged.setdefault("components", {}).setdefault("schemas", {})[name] = component
    merged.setdefault("components", {})["securitySchemes"] = {
        "apiKey": {"type": "http", "scheme": "bearer", "description": "Your KiviDB API key."}
    }
    merged["security"] = [{"apiKey": []}]
    for operations in merged.get("paths", {}).values():
        for operation in operations.values():
            # Powertools gives a 204 the JSON content of the handler's return type (null); a
            # 204 has no content (RFC 9110 section 15.3.5), and clients must not expect one.
            operation.get("responses", {}).get("204", {}).pop("content", None)
    merged["paths"] = dict(sorted(merged.get("paths", {}).items()))
    merged["components"]["schemas"] = dict(sorted(merged["components"]["schemas"].items()))
    return merged


class _AnyParameter(dict[str, str]):
    """Template parameters are irrelevant to the document; every !Ref reads as empty."""

    def __missing__(self, key: str) -> str:
        return ""


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.openapi")
    parser.add_argument("--check", action="store_true", help="fail if the file has drifted")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(
                f"{OUTPUT.relative_to(ROOT)} is out of date: run `make openapi`.", file=sys.stderr
            )
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} is up to date.")
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
