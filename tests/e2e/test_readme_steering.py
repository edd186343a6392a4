"""The README's "Steering what is kept" section, run as written: its Python block, against the
local stack with the scripted model, prints the profile extraction filled (with where each
value came from), memories without the weather, and the next conversation's context, profile
first; the output the README shows is what it printed."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

from kividb_memory import NotFoundError

ROOT = Path(__file__).resolve().parents[2]
HEADING = "## Steering what is kept: instructions, examples and actor profiles"


def _blocks(info: str) -> list[str]:
    """The code blocks of the README's steering section whose fence says ``info`` ("python",
    or "" for a bare fence), in order."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(HEADING, 1)[1]
    found: list[str] = []
    opened: str | None = None
    lines: list[str] = []
    for line in section.splitlines():
        if opened is None and line.startswith("## "):
            break  # the next section (a heading inside a block is the block's)
        if opened is None and line.startswith("```"):
            opened, lines = line.removeprefix("```"), []
        elif opened is not None and line == "```":
            if opened == info:
                found.append("\n".join(lines))
            opened = None
        elif opened is not None:
            lines.append(line)
    return found


def test_the_readme_steering_section_runs_as_written(open_stack, provider, memory):
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
            memory.delete_store("local", "steered")
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout.splitlines()
    expected = shown.splitlines()
    assert len(printed) == len(expected), ran.stdout
    for line, pattern in zip(printed, expected, strict=True):
        # "..." in the README stands for what changes from run to run (dates, memory texts)
        regex = ".*".join(re.escape(part) for part in pattern.split("..."))
        assert re.fullmatch(regex, line), (line, pattern)
    assert "weather" not in ran.stdout.split("## About the user")[0]
