"""The README's sections as tests run them: a section's code blocks, and its Python program run
against a stack (tests/e2e/test_readme_*.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.common import ROOT


def section_blocks(heading: str, info: str) -> list[str]:
    """The code blocks, in order, of the README section that starts with the line ``heading``
    (up to the next ``## `` heading outside a block) whose fence says ``info`` ("python", or
    "" for a bare fence). ``IndexError`` if the README has no such heading."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(heading, 1)[1]
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


def run_program(
    program: str, api_url: str, api_key: str, model_url: str
) -> subprocess.CompletedProcess[str]:
    """``program`` run by this interpreter as a reader would run it, with the README's
    variables (KIVIDB_API_URL, KIVIDB_API_KEY, SCRIPTED_MODEL_URL) set; at most 120 s."""
    env = {
        **os.environ,
        "KIVIDB_API_URL": api_url,
        "KIVIDB_API_KEY": api_key,
        "SCRIPTED_MODEL_URL": model_url,
    }
    return subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120
    )
