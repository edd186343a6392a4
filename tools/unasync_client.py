"""Generate the synchronous client (``client/src/kividb_memory/client.py``) from the
asynchronous one (``async_client.py``), so that the two can never drift apart.

    python -m tools.unasync_client            # write client.py
    python -m tools.unasync_client --check    # exit 1 when client.py is not what it generates

A fixed list of substitutions, applied to every line in order, in the manner of httpcore's
``scripts/unasync.py``: ``async def`` -> ``def``, ``await`` dropped, ``async with`` -> ``with``,
``AsyncMemoryClient`` -> ``MemoryClient``, ``httpx.AsyncClient`` -> ``httpx.Client``,
``aclose`` -> ``close``, ``asyncio.sleep`` -> ``time.sleep``, ``asyncio.Semaphore`` ->
``threading.Semaphore`` and the words of the docstrings
that name the async forms. ``make lint`` runs the check.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "client" / "src" / "kividb_memory"
SOURCE = PACKAGE / "async_client.py"
TARGET = PACKAGE / "client.py"

HEADER = (
    "# Generated from async_client.py by `python -m tools.unasync_client`: do not edit by hand\n"
    "# (`make lint` fails when this file is not what that command writes).\n"
)

SUBS: list[tuple[str, str]] = [
    (r"an ``async with`` block", "a ``with`` block"),
    (r"^import asyncio$", "import threading\nimport time"),
    (r"\basyncio\.Semaphore\(", "threading.Semaphore("),
    (r"\bawait asyncio\.sleep\(", "time.sleep("),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\bawait ", ""),
    (r"\bAsyncMemoryClient\b", "MemoryClient"),
    (r"\bAsyncStoreClient\b", "StoreClient"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\baclose\b", "close"),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\(asynchronous\)", "(synchronous)"),
    (r"\bThe asynchronous client\b", "The synchronous client"),
    (
        r"This module is the source of the synchronous client: ``client.py`` is generated from it",
        "This module is generated from ``async_client.py``, the asynchronous client,",
    ),
    (
        r"by\n``python -m tools.unasync_client`` \(``make lint`` checks that it is up to date\)\.",
        "by\n``python -m tools.unasync_client`` (``make lint`` checks that it is up to date).",
    ),
]


def generate(source: str) -> str:
    """The synchronous client's source from the asynchronous one's, formatted by ruff (as
    ``make lint`` checks every file)."""
    text = source
    for pattern, replacement in SUBS:
        text = re.sub(pattern, replacement, text, flags=re.MULTILINE)
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=HEADER + text,
        capture_output=True,
        text=True,
        check=True,
    )
    return formatted.stdout


def main(argv: list[str] | None = None) -> int:
    """Write ``client.py``, or with ``--check`` say whether it is up to date (exit 1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args(argv)
    wanted = generate(SOURCE.read_text(encoding="utf-8"))
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
    if args.check:
        if current != wanted:
            print(
                f"{TARGET.relative_to(PACKAGE.parent.parent.parent)} is not generated from "
                "async_client.py: run python -m tools.unasync_client",
                file=sys.stderr,
            )
            return 1
        return 0
    if current != wanted:
        TARGET.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
