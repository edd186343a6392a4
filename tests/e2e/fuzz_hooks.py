"""Schemathesis hooks of the fuzz run (``tests/e2e/test_fuzz.py``), loaded by the
``schemathesis`` process through ``SCHEMATHESIS_HOOKS=tests.e2e.fuzz_hooks``.

Random path parameters almost always name nothing (404), which tests little. So four cases in
five are pointed at what the run seeded (``KIVIDB_FUZZ_TARGET``, JSON: ``instance_id``,
``store``, ``session_ids``, ``memory_ids``, ``actor_ids``) and the fifth keeps what the fuzzer
generated. A case that would delete the target store deletes a fresh store of its own instead,
so the run keeps reaching the routes' logic.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import schemathesis

TARGET: dict[str, Any] = json.loads(os.environ.get("KIVIDB_FUZZ_TARGET", "{}"))


def _pick(generated: Any, choices: list[str]) -> Any:
    """A seeded value for four generated values in five (chosen by the generated value, so the
    same case maps the same way when Hypothesis replays it), else the generated one."""
    digest = hashlib.sha256(repr(generated).encode("utf-8", "surrogatepass")).digest()
    if not choices or digest[0] % 5 == 0:
        return generated
    return choices[digest[1] % len(choices)]


_OPENAPI = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())


def _patterns(path: str) -> dict[str, str]:
    """The ``pattern`` of each path parameter of ``path`` in the document (the same for every
    method of a path)."""
    found: dict[str, str] = {}
    for operation in _OPENAPI["paths"].get(path, {}).values():
        for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
            pattern = parameter.get("schema", {}).get("pattern")
            if parameter.get("in") == "path" and pattern:
                found[parameter["name"]] = pattern
    return found


def _schema_valid(path: str, path_parameters: dict[str, Any]) -> bool:
    """Whether every generated path parameter fits the document: a case that breaks one is a
    negative case, sent as generated so that its refusal is what is checked (pointing it at
    the seeded store made a valid request that schemathesis still counted as invalid)."""
    patterns = _patterns(path)
    return all(
        isinstance(value, str) and (name not in patterns or re.fullmatch(patterns[name], value))
        for name, value in path_parameters.items()
    )


@schemathesis.hook
def map_path_parameters(
    context: schemathesis.HookContext, path_parameters: dict[str, Any]
) -> dict[str, Any]:
    """Point most cases at the seeded instance, store, sessions, memories and actors; cases
    whose path breaks the document keep it."""
    if not path_parameters:
        return path_parameters
    path = context.operation.path if context.operation is not None else ""
    if not _schema_valid(path, path_parameters):
        return path_parameters
    names = {
        "instance_id": [TARGET.get("instance_id", "local")],
        "store": [TARGET.get("store", "fuzz")],
        "session_id": TARGET.get("session_ids", []),
        "memory_id": TARGET.get("memory_ids", []),
        "actor_id": TARGET.get("actor_ids", []),
    }
    return {
        name: _pick(value, names[name]) if name in names else value
        for name, value in path_parameters.items()
    }


@schemathesis.hook
def map_body(context: schemathesis.HookContext, body: Any) -> Any:
    """Give most generated vectors the target store's length, so that memory adds, searches
    and recalls get past the dimensions check and reach what comes after it."""
    if not isinstance(body, dict):
        return body
    dimensions = TARGET.get("settings", {}).get("dimensions", 3)
    for field in ("vector", "query_vector"):
        vector = body.get(field)
        if isinstance(vector, list) and _pick(vector, ["fit"]) == "fit":
            body = {**body, field: ([*vector, 0.5] * dimensions)[:dimensions]}
    return body


_doomed = itertools.count()


def _api(method: str, path: str, body: Any = None) -> None:
    httpx.request(
        method,
        TARGET["url"] + path,
        json=body,
        headers={"Authorization": f"Bearer {TARGET['api_key']}"},
        timeout=30,
    ).raise_for_status()


@schemathesis.hook
def before_call(
    context: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]
) -> None:
    """A case that deletes the target store deletes a store of its own instead, made just
    before with a session and a memory, so the target lives on and a later read of the deleted
    store still finds it gone."""
    if (
        case.method == "DELETE"
        and case.path == "/instances/{instance_id}/agent-memory/{store}"
        and case.path_parameters
        == {"instance_id": TARGET.get("instance_id"), "store": TARGET.get("store")}
    ):
        name = f"{TARGET['store']}-doomed-{os.getpid()}-{next(_doomed)}"
        base = f"/instances/{TARGET['instance_id']}/agent-memory/{name}"
        _api("PUT", base, TARGET.get("settings", {}))
        _api(
            "POST",
            f"{base}/sessions/s/events",
            {"actor_id": "a", "events": [{"role": "user", "content": "hi"}]},
        )
        _api(
            "POST",
            f"{base}/memories",
            {"text": "a fact", "actor_id": "a", "vector": [1.0, 0.0, 0.0]},
        )
        case.path_parameters = {**case.path_parameters, "store": name}
