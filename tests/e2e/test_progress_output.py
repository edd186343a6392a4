"""What the long-running tools show, on a terminal and piped to a file (tools.progress): the
transfer's export and import and the replay each show a bar per stage with its right total and
a percentage on a terminal, and one line per stage and a summary when piped."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kividb_memory import MemoryClient
from tests.support.common import needs_data, unique
from tests.support.stack import Stack
from tests.support.terminal import on_terminal, piped

LINE = r"\(100%\) in \d+\.\d s"


@pytest.fixture
def filled(stack: Stack) -> tuple[str, MemoryClient]:
    """A store of 3 sessions and 5 live memories, one of them superseded: 4 current."""
    name = unique("progress")
    with stack.memory() as client:
        client.put_store("local", name, dimensions=3, dedupe_threshold=1.0)
        store = client.store("local", name)
        for n in range(3):
            store.add_events(f"chat-{n}", [{"role": "user", "content": f"hi {n}"}], actor_id="ann")
        kept = [store.add_memory(f"fact {n}", "ann", vector=[1.0, n + 1.0, 0.5]) for n in range(4)]
        store.add_memory("fact 0, changed", "ann", vector=[1, 0, 1], supersedes=kept[0].id)
        assert client.get_store("local", name).counts.memories == 4  # type: ignore[union-attr]
        yield name, client
        client.delete_store("local", name)


def _transfer(stack: Stack, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tools.transfer",
        *args,
        "--url",
        stack.url,
        "--api-key",
        stack.api_key,
        "--instance",
        "local",
    ]


def test_the_export_counts_every_memory_superseded_ones_too(stack, filled, tmp_path: Path):
    name, _ = filled
    out = tmp_path / "store.jsonl.gz"
    shown = on_terminal(_transfer(stack, "export", "--store", name, "--out", str(out)))
    assert shown.returncode == 0, shown.stderr
    screen = shown.screen()
    assert re.match(r"export: sessions: 100%\|█+\| 3/3 ", screen[-2]), screen
    assert re.match(r"export: memories: 100%\|█+\| 5/5 ", screen[-1]), screen
    assert "item [" not in shown.stderr and "/4 " not in shown.stderr
    assert shown.stdout == f"exported 3 sessions (3 messages) and 5 memories to {out}\n"

    again = piped(_transfer(stack, "export", "--store", name, "--out", str(out)))
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert len(lines) == 2 and "\r" not in again.stderr, again.stderr
    assert re.fullmatch(rf"export: sessions: 3/3 {LINE}", lines[0])
    assert re.fullmatch(rf"export: memories: 5/5 {LINE}", lines[1])
    assert again.stdout == shown.stdout


def test_the_import_shows_its_check_and_its_items_then_what_it_did(stack, filled, tmp_path):
    name, client = filled
    out = tmp_path / "store.jsonl"
    assert piped(_transfer(stack, "export", "--store", name, "--out", str(out))).returncode == 0
    target = unique("progress-in")
    try:
        shown = on_terminal(_transfer(stack, "import", "--store", target, "--in", str(out)))
        assert shown.returncode == 0, shown.stderr
        screen = shown.screen()
        assert re.match(r"import: check the file: 100%\|█+\| 1/1 .*8 items", screen[-2]), screen
        assert re.match(r"import: items: 100%\|█+\| 8/8 ", screen[-1]), screen
        assert shown.stdout.startswith("imported 3 sessions (3 new messages) and 5 memories")

        again = piped(_transfer(stack, "import", "--store", target, "--in", str(out)))
        assert again.returncode == 0, again.stderr
        lines = again.stderr.splitlines()
        assert len(lines) == 2, again.stderr
        assert re.fullmatch(rf"import: check the file: 1/1 {LINE}; 8 items", lines[0])
        assert re.fullmatch(rf"import: items: 8/8 {LINE}", lines[1])
        assert again.stdout.startswith("imported 3 sessions (0 new messages) and 5 memories")
    finally:
        client.delete_store("local", target)


def test_a_refused_file_says_where_the_import_stopped(stack, tmp_path):
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"format": "kividb-agent-memory-store"}\n')
    ran = piped(_transfer(stack, "import", "--store", unique("never"), "--in", str(cut)))
    assert ran.returncode == 1
    lines = ran.stderr.splitlines()
    assert re.fullmatch(r"import: check the file: stopped at 0/1 \(0%\) after \d+\.\d s", lines[0])
    assert lines[1].startswith("transfer: ")


@needs_data
def test_the_replay_shows_each_session_then_its_summary(stack):
    store = unique("replay")
    argv = [
        sys.executable,
        "-m",
        "tools.replay",
        "--url",
        stack.url,
        "--api-key",
        stack.api_key,
        "--store",
        store,
        "--sessions",
        "2",
    ]
    try:
        shown = on_terminal(argv)
        assert shown.returncode == 0, shown.stderr
        screen = [line for line in shown.screen() if line.startswith("replay conv-26")]
        first = re.match(r"replay conv-26: session 1/2: 100%\|█+\| (\d+)/(\d+) ", screen[0])
        second = re.match(r"replay conv-26: session 2/2: 100%\|█+\| (\d+)/(\d+) ", screen[1])
        assert first and second, screen
        assert first[1] == first[2] and second[1] == second[2]
        total = int(first[1]) + int(second[1])
        assert f"2 sessions, {total} messages" in shown.stdout

        again = piped([*argv, "--fresh"])
        assert again.returncode == 0, again.stderr
        lines = again.stderr.splitlines()
        assert re.fullmatch(rf"replay conv-26: session 1/2: {first[1]}/{first[1]} {LINE}", lines[0])
        assert re.fullmatch(
            rf"replay conv-26: session 2/2: {second[1]}/{second[1]} {LINE}", lines[1]
        )
        assert len(lines) == 2 and f"2 sessions, {total} messages" in again.stdout
    finally:
        with stack.memory() as client:
            client.delete_store("local", store)
