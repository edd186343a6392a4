"""The README's "Consolidation" section, run as written: its Python block, against the local
stack with the scripted model, queues a run in review mode, prints its plan (one merge) with
the memories untouched, then applies and reverts it; the output the README shows is what it
printed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from kividb_memory import NotFoundError
from tests.e2e.test_readme_steering import ROOT

HEADING = "## Consolidation: memory that tidies itself"


def _blocks(info: str) -> list[str]:
    """The code blocks of the README's consolidation section whose fence says ``info``."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(HEADING, 1)[1]
    found: list[str] = []
    opened: str | None = None
    lines: list[str] = []
    for line in section.splitlines():
        if opened is None and line.startswith("## "):
            break
        if opened is None and line.startswith("```"):
            opened, lines = line.removeprefix("```"), []
        elif opened is not None and line == "```":
            if opened == info:
                found.append("\n".join(lines))
            opened = None
        elif opened is not None:
            lines.append(line)
    return found


def test_the_readme_consolidation_section_runs_as_written(open_stack, provider, memory):
    (program,) = _blocks("python")
    (shown,) = _blocks("")
    env = {
        **os.environ,
        "KIVIDB_API_URL": open_stack.url,
        "KIVIDB_API_KEY": open_stack.api_key,
        "SCRIPTED_MODEL_URL": provider.url,
    }
    try:
        ran = subprocess.run(
            [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        with contextlib.suppress(NotFoundError):
            memory.delete_store("local", "tidy")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == shown.splitlines()
