"""tools.progress: a bar with its total and percentage on a terminal, one line per stage and
a summary elsewhere; a count past its total raises the total instead of dropping the bar's
percentage."""

from __future__ import annotations

import io
import os
import pty
import re

import pytest
from hypothesis import given, strategies as st

from tools.progress import Progress


def _screen(text: str) -> list[str]:
    """What a terminal last showed on each line: carriage returns start a line over."""
    return [part.split("\r")[-1].strip() for part in text.split("\n") if part.strip()]


def test_piped_output_is_one_line_per_stage_then_the_summary(capsys):
    stream = io.StringIO()
    progress = Progress("export", stream=stream)
    assert progress.terminal is False
    with progress.stage("sessions", 3) as stage:
        stage.advance(3)
    with progress.stage("memories", 0):
        pass
    progress.summary("exported 3 sessions")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert re.fullmatch(r"export: sessions: 3/3 \(100%\) in \d+\.\d s", lines[0])
    assert re.fullmatch(r"export: memories: 0/0 \(100%\) in \d+\.\d s", lines[1])
    assert "\r" not in stream.getvalue()
    assert capsys.readouterr().out == "exported 3 sessions\n"


def test_a_stage_that_fails_says_where_it_stopped_and_the_error_goes_on():
    stream = io.StringIO()
    progress = Progress("import", stream=stream)
    with pytest.raises(RuntimeError), progress.stage("items", 40) as stage:
        stage.advance(10)
        stage.note("session 2/4")
        raise RuntimeError("cut")
    assert re.fullmatch(
        r"import: items: stopped at 10/40 \(25%\) after \d+\.\d s; session 2/4\n", stream.getvalue()
    )


def test_each_counts_the_items_it_gives(capsys):
    stream = io.StringIO()
    given = list(Progress("bench", stream=stream).each("runs", range(3), "run"))
    assert given == [0, 1, 2]
    assert re.fullmatch(r"bench: runs: 3/3 \(100%\) in \d+\.\d s\n", stream.getvalue())


def test_quiet_shows_neither_bars_nor_lines_but_the_summary(capsys):
    stream = io.StringIO()
    progress = Progress("replay", stream=stream, terminal=True, quiet=True)
    with progress.stage("messages", 5) as stage:
        stage.advance(5)
    progress.say("a note")
    progress.summary("replayed 5 messages")
    assert stream.getvalue() == ""
    assert capsys.readouterr().out == "replayed 5 messages\n"


@given(total=st.integers(0, 60), steps=st.lists(st.integers(1, 9), max_size=12))
def test_the_bar_always_shows_its_total_and_a_percentage(total, steps):
    stream = io.StringIO()
    with Progress("export", stream=stream, terminal=True).stage("items", total) as stage:
        for step in steps:
            stage.advance(step)
    last = _screen(stream.getvalue())[-1]
    counted = sum(steps)
    shown_total = max(total, counted)
    assert f"{counted}/{shown_total}" in last
    percent = "100" if shown_total == 0 else f"{counted / shown_total * 100:.0f}"  # as tqdm does
    assert re.search(rf"\b{percent}%\|", last), last
    assert "it/s" not in last and "item [" not in last  # never tqdm's count-only form


def test_a_terminal_is_told_from_a_pipe_by_the_stream_itself():
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as terminal:
            assert Progress("x", stream=terminal).terminal is True
        reader, writer = os.pipe()
        with os.fdopen(writer, "w") as pipe:
            assert Progress("x", stream=pipe).terminal is False
        os.close(reader)
    finally:
        os.close(leader)
        os.close(follower)
