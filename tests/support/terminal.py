"""Running a command as a person would see it: its stderr on a terminal (a pseudo-terminal of
its own, 120 columns), or both its streams piped to a file."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tests.support.common import ROOT


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def screen(self) -> list[str]:
        """What the terminal last showed on each of stderr's lines (a carriage return starts a
        line over, as a bar redraws itself)."""
        lines = self.stderr.replace("\r\n", "\n").split("\n")
        return [line.split("\r")[-1].strip() for line in lines if line.split("\r")[-1].strip()]


def on_terminal(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    columns: int = 120,
) -> Ran:
    """Run ``argv`` from the project's root with stderr on a terminal of 40 lines and
    ``columns`` columns, stdout piped."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    with subprocess.Popen(
        list(argv),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=follower,
    ) as process:
        os.close(follower)
        deadline = time.monotonic() + timeout
        chunks: list[bytes] = []
        while time.monotonic() < deadline:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        else:
            process.kill()
        os.close(leader)
        out = process.stdout.read() if process.stdout else b""
        returncode = process.wait(timeout=30)
    return Ran(returncode, out.decode(), b"".join(chunks).decode(errors="replace"))


def piped(argv: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> Ran:
    """Run ``argv`` from the project's root with both streams piped (as ``> file 2>&1``)."""
    done = subprocess.run(
        list(argv),
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Ran(done.returncode, done.stdout, done.stderr)
