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


def test_each_suite_runs_the_installed_and_pinned_version():
    dev = _pins((ROOT / "requirements-dev.txt").read_text().splitlines())
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    extras = _pins([p for ps in client["project"]["optional-dependencies"].values() for p in ps])
    for name, pinned in SUITES.items():
        assert dev[name] == pinned, name
        assert extras[name] == pinned, name
        assert version(name) == pinned, name


def test_every_framework_an_extra_pins_is_pinned_for_the_tests_too():
    dev = _pins((ROOT / "requirements-dev.txt").read_text().splitlines())
    client = tomllib.loads((ROOT / "client" / "pyproject.toml").read_text())
    for extra, packages in client["project"]["optional-dependencies"].items():
        for name, pinned in _pins(packages).items():
            assert dev.get(name) == pinned, f"{name} ({extra}) is not pinned the same for tests"
