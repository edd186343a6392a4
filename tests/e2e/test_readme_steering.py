"""The README's "Steering what is kept" section, run as written: its Python block, against the
local stack with the scripted model, prints the profile extraction filled (with where each
value came from), memories without the weather, and the next conversation's context, profile
first; the output the README shows is what it printed."""

from __future__ import annotations

import contextlib
import re

from kividb_memory import NotFoundError
from tests.support.readme import run_program, section_blocks

HEADING = "## Steering what is kept: instructions, examples and actor profiles"


def test_the_readme_steering_section_runs_as_written(open_stack, provider, memory):
    (program,) = section_blocks(HEADING, "python")
    (shown,) = section_blocks(HEADING, "")
    try:
        ran = run_program(program, open_stack.url, open_stack.api_key, provider.url)
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
