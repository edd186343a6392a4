"""The README's "Consolidation" section, run as written: its Python block, against the local
stack with the scripted model, queues a run in review mode, prints its plan (one merge) with
the memories untouched, then applies and reverts it; the output the README shows is what it
printed."""

from __future__ import annotations

import contextlib

from kividb_memory import NotFoundError
from tests.support.readme import run_program, section_blocks

HEADING = "## Consolidation: memory that tidies itself"


def test_the_readme_consolidation_section_runs_as_written(open_stack, provider, memory):
    (program,) = section_blocks(HEADING, "python")
    (shown,) = section_blocks(HEADING, "")
    try:
        ran = run_program(program, open_stack.url, open_stack.api_key, provider.url)
    finally:
        with contextlib.suppress(NotFoundError):
            memory.delete_store("local", "tidy")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == shown.splitlines()
