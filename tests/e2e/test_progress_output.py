"""What the long-running tools show, on a terminal and piped to a file (tools.progress): the
transfer's export and import and the replay each show a bar per stage with its right total and
a percentage on a terminal, and one line per stage and a summary when piped."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from kividb_memory import MemoryClient
from tests.support.common import ROOT, needs_data, unique
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
    assert re.match(r"export: sessions: 100%\|█+\| 3/3 ", screen[-3]), screen
    assert re.match(r"export: memories: 100%\|█+\| 5/5 ", screen[-2]), screen
    assert re.match(r"export: profiles: 100%\| 0/0 ", screen[-1]), screen  # the store has none
    assert "item [" not in shown.stderr and "/4 " not in shown.stderr
    assert shown.stdout == (
        f"exported 3 sessions (3 messages) and 5 memories and 0 profiles to {out}\n"
    )

    again = piped(_transfer(stack, "export", "--store", name, "--out", str(out)))
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert len(lines) == 3 and "\r" not in again.stderr, again.stderr
    assert re.fullmatch(rf"export: sessions: 3/3 {LINE}", lines[0])
    assert re.fullmatch(rf"export: memories: 5/5 {LINE}", lines[1])
    assert re.fullmatch(rf"export: profiles: 0/0 {LINE}", lines[2])
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


@needs_data
def test_a_benchmark_shows_its_runs_then_its_report(tmp_path):
    argv = [sys.executable, "-m", "bench.background", "--messages", "30", "--out", str(tmp_path)]
    shown = on_terminal([*argv, "--runs", "1"])
    assert shown.returncode == 0, shown.stderr
    assert re.match(r"bench background: runs: 100%\|█+\| 1/1 ", shown.screen()[-1]), shown.stderr
    again = piped([*argv, "--runs", "2"])
    assert again.returncode == 0, again.stderr
    assert re.fullmatch(rf"bench background: runs: 2/2 {LINE}\n", again.stderr)
    assert (tmp_path / "background.md").read_text() in again.stdout


def _wheel(folder: Path, name: str) -> Path:
    """A wheel of an empty package ``name`` 1.0, made by hand (no build, no index)."""
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        record = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
        archive.writestr(f"{info}/RECORD", record)
    return wheel


@pytest.fixture
def scratch_venv(tmp_path: Path) -> Path:
    """A virtualenv that sees this project's packages (tqdm) through a .pth file, as one
    that tools.install has bootstrapped would have tqdm."""
    folder = tmp_path / "venv"
    venv.create(folder, with_pip=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = sysconfig.get_paths()["purelib"]
    Path(site, "project.pth").write_text(f"{ours}\n{ROOT}\n")
    return folder


def test_the_installer_shows_each_step_and_keeps_pips_output_in_its_log(tmp_path, scratch_venv):
    wheels = [_wheel(tmp_path, f"kividb_probe_{n}") for n in range(3)]
    requirements = tmp_path / "probe.txt"
    requirements.write_text("".join(f"{wheel}\n" for wheel in wheels))
    log = tmp_path / "install.log"
    python = str(scratch_venv / "bin" / "python")
    argv = [
        python,
        "-m",
        "tools.install",
        "--venv",
        str(scratch_venv),
        "-r",
        str(requirements),
        "--log",
        str(log),
    ]
    ran = piped(argv)
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert len(lines) == 2, ran.stderr
    assert re.fullmatch(
        rf"make: resolve and download {requirements}: 1/1 {LINE}; 3 collected", lines[0]
    )
    assert re.fullmatch(rf"make: install {requirements}: 3/3 {LINE}", lines[1])
    assert re.fullmatch(
        rf"make: {scratch_venv} is ready: 3 packages installed in \d+ s "
        rf"\(pip's output: {log}\)\n",
        ran.stdout,
    )
    kept = log.read_text()
    assert "Successfully installed" in kept and "kividb_probe_2" in kept.replace("-", "_")

    requirements.write_text(f"{tmp_path / 'missing-1.0-py3-none-any.whl'}\n")
    failed = piped(argv)
    assert failed.returncode == 1
    assert re.search(r"make: resolve and download .*: stopped at 0/1 \(0%\)", failed.stderr)
    assert f"pip failed (exit status 1); the last lines of {log}:" in failed.stderr
    assert "missing-1.0-py3-none-any.whl" in failed.stderr  # pip's own words, from the log


def test_the_installer_on_a_terminal_draws_a_bar_per_step(tmp_path, scratch_venv):
    wheel = _wheel(tmp_path, "kividb_probe_bar")
    requirements = tmp_path / "probe.txt"
    requirements.write_text(f"{wheel}\n")
    python = str(scratch_venv / "bin" / "python")
    shown = on_terminal(
        [
            python,
            "-m",
            "tools.install",
            "--venv",
            str(scratch_venv),
            "-r",
            str(requirements),
            "--log",
            str(tmp_path / "install.log"),
        ],
        # wide enough for the bar beside the temporary folder's path, however long (a worker
        # of pytest-xdist adds a folder of its own)
        columns=300,
    )
    assert shown.returncode == 0, shown.stderr
    screen = shown.screen()
    assert re.match(r"make: resolve and download .*probe.txt: 100%\|█+\| 1/1 ", screen[0]), screen
    assert re.match(r"make: install .*probe.txt: 100%\|█+\| 1/1 ", screen[1]), screen
    assert "WARNING" not in shown.stderr and "Successfully" not in shown.stderr
