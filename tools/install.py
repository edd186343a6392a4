"""Set up a virtualenv for ``make`` (the first ``make run`` or ``make test`` on a fresh clone, and
again when a requirements file changes), showing what it does instead of pip's output.

::

    python3 -m tools.install --venv .venv -r requirements-dev.txt --layer
    .venv/bin/python -m tools.install --venv .venv -r bench/requirements.txt

pip's own output (with the warnings some machines' configuration adds to every line it
resolves: about 150 lines on this one) goes to a log file, ``.local/install.log`` by default,
which the first line names; on failure its last lines are shown. The steps are stages of
``tools.progress``: on a terminal a bar each, with a count and a percentage, the step running
saying how many packages pip has collected so far; piped, one line per step; then a summary.

Run with the system Python the first time: the virtualenv does not exist yet and tqdm (which
``tools.progress`` wraps) is not installed. That part uses the standard library only: it
creates the virtualenv, installs tqdm into it (pinned in ``requirements-dev.txt``), and hands over
to the virtualenv's Python, which runs the rest with progress.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import sysconfig
import threading
import time
import venv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from tools.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
PIP_FLAGS = ["--disable-pip-version-check", "--progress-bar", "off", "--no-input"]
COLLECTED = re.compile(r"^(?:Collecting|Processing|Obtaining|Requirement already satisfied:) (\S+)")
INSTALLING = "Installing collected packages: "
POLL_SECONDS = 0.25
"""How often the install stage counts the packages installed so far."""
TAIL = 30
"""Lines of the log shown when pip fails."""


class InstallError(Exception):
    """A step failed; the message says which and where its output is."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.install", description=__doc__)
    parser.add_argument("--venv", type=Path, default=Path(".venv"), help="default: .venv")
    parser.add_argument(
        "-r", dest="requirements", action="append", default=[], type=Path, help="repeatable"
    )
    parser.add_argument(
        "--layer", action="store_true", help="put layers/core on the import path (.pth)"
    )
    parser.add_argument("--upgrade-pip", action="store_true", help="upgrade pip first")
    parser.add_argument("--log", type=Path, default=Path(".local/install.log"), help="pip's output")
    return parser.parse_args(argv)


def venv_python(folder: Path) -> Path:
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _tqdm_pin() -> str:
    """tqdm as requirements-dev.txt pins it."""
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        if line.strip().lower().startswith("tqdm=="):
            return line.strip()
    return "tqdm"


def bootstrap(args: argparse.Namespace, argv: Sequence[str]) -> None:
    """From another Python than the virtualenv's (the system's): create the virtualenv, install
    tqdm into it, and run this command again with the virtualenv's Python; exits with its
    status."""
    python = venv_python(args.venv)
    print(
        f"make: setting up {args.venv} (about 90 s the first time); pip's output goes to "
        f"{args.log}",
        flush=True,
    )
    if not python.exists():
        venv.create(args.venv, with_pip=True)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("a", encoding="utf-8") as log:
        _run_pip(python, ["install", _tqdm_pin()], log, "install tqdm")
    again = subprocess.run([str(python), "-m", "tools.install", *argv], cwd=ROOT, check=False)
    raise SystemExit(again.returncode)


def _run_pip(python: Path, arguments: list[str], log: IO[str], step: str) -> None:
    """Run pip with ``arguments``, its output into ``log``; ``InstallError`` when it fails."""
    log.write(f"\n$ {python} -m pip {' '.join(arguments)}\n")
    log.flush()
    done = subprocess.run(
        [str(python), "-m", "pip", *arguments[:1], *PIP_FLAGS, *arguments[1:]],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        check=False,
    )
    if done.returncode != 0:
        raise InstallError(f"{step}: pip failed (exit status {done.returncode})")


def install(args: argparse.Namespace) -> str:
    """The steps with progress; the summary line."""
    # Imported here: tqdm, which it wraps, is in the virtualenv only once bootstrap ran.
    from tools.progress import Progress

    progress = Progress("make")
    python = venv_python(args.venv)
    started = time.monotonic()
    installed: list[str] = []
    args.log.parent.mkdir(parents=True, exist_ok=True)
    with args.log.open("a", encoding="utf-8") as log:
        if args.upgrade_pip:
            with progress.stage("upgrade pip", 1, "step") as stage:
                _run_pip(python, ["install", "--upgrade", "pip"], log, "upgrade pip")
                stage.advance()
        for requirements in args.requirements:
            _install_requirements(progress, python, requirements, log, installed)
        if args.layer:
            with progress.stage("put the layer on the import path", 1, "step") as stage:
                _layer_path()
                stage.advance()
    seconds = time.monotonic() - started
    return (
        f"make: {args.venv} is ready: {len(installed)} packages installed in {seconds:.0f} s "
        f"(pip's output: {args.log})"
    )


def _install_requirements(
    progress: Progress, python: Path, requirements: Path, log: IO[str], installed: list[str]
) -> None:
    """pip install ``-r requirements`` in two stages: what pip collects (resolving and
    downloading: one step, the count so far beside the bar, as pip cannot say how many it will
    collect), then installing what it collected (the packages its "Installing collected
    packages" line names)."""
    collected: list[str] = []
    name = requirements.as_posix()
    with progress.stage(f"resolve and download {name}", 1, "step") as resolving:

        def each(line: str) -> None:
            found = COLLECTED.match(line)
            if found:
                collected.append(found[1])
                resolving.note(f"{len(collected)} collected: {found[1]}")
            elif line.startswith(INSTALLING):
                installed.extend(n.strip() for n in line[len(INSTALLING) :].split(","))

        pip = _PipInStages(python, requirements, log, each)
        pip.until_installing()
        resolving.note(f"{len(collected)} collected")
        resolving.advance()
    # pip prints nothing while it installs, but each package it installs adds its
    # ``.dist-info`` folder to site-packages: those are counted.
    before = _dist_infos()
    with progress.stage(f"install {name}", len(installed), "package") as installing:

        def count() -> None:
            installing.advance(
                min(len(_dist_infos() - before), installing.total) - installing.count
            )

        pip.finish(count)
        installing.advance(installing.total - installing.count)  # upgrades in place included


class _PipInStages:
    """One ``pip install -r`` read in two parts: up to its "Installing collected packages"
    line (or its end), then to its end."""

    def __init__(
        self, python: Path, requirements: Path, log: IO[str], each: Callable[[str], None]
    ) -> None:
        self._log = log
        self._each = each
        self._step = f"pip install -r {requirements}"
        arguments = ["install", *PIP_FLAGS, "-r", str(requirements)]
        log.write(f"\n$ {python} -m pip {' '.join(arguments)}\n")
        log.flush()
        self._pip = subprocess.Popen(
            [str(python), "-m", "pip", *arguments],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )

    def until_installing(self) -> None:
        assert self._pip.stdout is not None
        for line in self._pip.stdout:
            self._log.write(line)
            self._each(line.rstrip("\n"))
            if line.startswith(INSTALLING):
                return
        self.finish(lambda: None)

    def finish(self, poll: Callable[[], None]) -> None:
        """Read pip's output to its end (in a thread), calling ``poll`` meanwhile."""
        assert self._pip.stdout is not None
        output = self._pip.stdout

        def drain() -> None:
            for line in output:
                self._log.write(line)
                self._each(line.rstrip("\n"))

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        while self._pip.poll() is None:
            poll()
            time.sleep(POLL_SECONDS)
        reader.join()
        poll()
        status = self._pip.wait()
        self._log.flush()
        if status != 0:
            raise InstallError(f"{self._step}: pip failed (exit status {status})")


def _site_packages() -> Path:
    """The virtualenv's site-packages (this runs in the virtualenv's Python, after bootstrap)."""
    return Path(sysconfig.get_paths()["purelib"])


def _dist_infos() -> set[str]:
    """The packages installed in the virtualenv, by their ``.dist-info`` folders."""
    return {found.name for found in _site_packages().glob("*.dist-info")}


def _layer_path() -> None:
    """The layer on the import path, as Lambda mounts it at /opt/python: a .pth file naming
    layers/core, so that the local stack, the tools, the benchmarks and the tests import
    agent_memory without editing sys.path."""
    layer = (ROOT / "layers" / "core").resolve()
    (_site_packages() / "kividb-layer.pth").write_text(f"{layer}\n")


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-TAIL:])


def main(argv: Sequence[str] | None = None) -> int:
    """0 when the virtualenv is ready; 1 (with the log's last lines) when a step failed."""
    given = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(given)
    if Path(sys.prefix).resolve() != args.venv.resolve():
        bootstrap(args, given)
    try:
        print(install(args), flush=True)
    except (InstallError, OSError, subprocess.CalledProcessError) as exc:
        print(f"make: {exc}; the last lines of {args.log}:", file=sys.stderr)
        print(_tail(args.log), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
