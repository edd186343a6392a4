"""The frameworks whose own tests run against the adapters are the versions installed and
pinned everywhere: requirements-dev.txt, the client's extras and tools.framework_tests."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from tools.framework_tests import SUITES

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines: list[str]) -> dict[str, str]:
    found = (re.match(r"^\s*([A-Za-z0-9_.-]+)==([^\s;#]+)", line) for line in lines)
    return {m.group(1).lower(): m.group(2) for m in found if m}


OWN_VENV = {"strands-agents": "requirements-strands.txt", "crewai": "requirements-crewai.txt"}
"""Frameworks whose tests run in a virtualenv of their own (Strands pins mcp<2.2, CrewAI mcp<2)."""
TESTS_ONLY = {"langgraph-checkpoint-sqlite"}
"""Suites whose tests run against an adapter of another package of the framework (LangGraph's
store tests live with its SQLite store; the adapter needs only ``langgraph``)."""


def _requirements(name: str) -> dict[str, str]:
    return _pins((ROOT / name).read_text().splitlines())


def test_each_suite_runs_the_installed_and_pinned_version():
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    extras = _pins([p for ps in client["project"]["optional-dependencies"].values() for p in ps])
    for name, pinned in SUITES.items():
        assert _requirements(OWN_VENV.get(name, "requirements-dev.txt"))[name] == pinned, name
        if name not in TESTS_ONLY:
            assert extras[name] == pinned, name
        if name not in OWN_VENV:
            assert version(name) == pinned, name


def test_every_framework_an_extra_pins_is_pinned_for_the_tests_too():
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    for extra, packages in client["project"]["optional-dependencies"].items():
        for name, pinned in _pins(packages).items():
            where = _requirements(OWN_VENV.get(name, "requirements-dev.txt"))
            assert where.get(name) == pinned, f"{name} ({extra}) is not pinned the same for tests"
