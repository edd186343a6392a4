"""Start the local stack as a child process, for tests and benchmarks: ``running_stack()``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import httpx

from local.bootstrap import free_port

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def running_stack(
    env: Mapping[str, str | None],
    *,
    log: Path | None = None,
    timeout: float = 60.0,
    new_session: bool = False,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m local`` on a free loopback port; yields ``(base_url, process)``.

    ``env`` is added to this process's environment (a ``None`` value removes a variable, e.g.
    ``REDIS_URL`` to let the stack start its own redis-server); ``PORT`` is chosen here. Ready
    once the gateway answers any HTTP request (an unknown path is its own 404, so no function
    has run yet). On exit: SIGTERM, then SIGKILL after 20 s. Raises ``RuntimeError`` (with the
    log's tail when ``log`` is given) if the stack exits or is not ready within ``timeout`` s.
    With ``new_session`` the stack runs in a session and process group of its own (its workers
    too; its redis-server child has its own anyway), so a test can send what a terminal's
    Ctrl-C sends, ``os.killpg(process.pid, signal.SIGINT)``, without reaching itself.
    """
    port = free_port()
    child_env = {**os.environ, "PORT": str(port)}
    for name, value in env.items():
        if value is None:
            child_env.pop(name, None)
        else:
            child_env[name] = value
    output: IO[bytes] | int = log.open("wb") if log is not None else subprocess.DEVNULL
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "local"],
            cwd=ROOT,
            env=child_env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )
    finally:
        if not isinstance(output, int):
            output.close()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                httpx.get(url + "/-ready", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:] if log is not None else ""
                    raise RuntimeError("the local stack did not start\n" + tail) from None
                time.sleep(0.05)
        yield url, process
    finally:
        stop(process, grace=20.0)


def stop(process: subprocess.Popen[bytes], *, grace: float = 30.0) -> None:
    """SIGTERM ``process`` (the local stack then stops as on Ctrl-C: workers, scheduler, then its
    redis-server), and SIGKILL it if it has not exited after ``grace`` seconds; nothing when it
    already exited."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
