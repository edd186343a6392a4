"""The frameworks' own tests, from their source distributions on PyPI, for the adapters'
test runs (docs/integrations.md, "Proved by the frameworks' own tests").

``python -m tools.framework_tests fetch`` downloads the source distribution of each framework of
``SUITES`` at its pinned version (``pip download --no-binary :all: --no-deps``, so from the
package registry, like every other dependency) into ``CACHE`` and unpacks it there; ``make test``
runs it before the tests, once (a stamp per version). Nothing of those files is copied into the
project: ``tests/e2e/test_framework_suites.py`` runs their tests where they were unpacked, with a
pytest plugin of ours (``tests/frameworks/``) that points their session factories at our
adapter. The versions are the ones ``requirements-dev.txt`` installs (a unit test checks that).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "framework-tests"

SUITES: dict[str, str] = {
    "openai-agents": "0.24.0",
    "strands-agents": "1.62.0",
    "langgraph-checkpoint-sqlite": "3.1.2",
    "crewai": "1.15.30",
}
"""Distribution name -> the version whose tests run (the installed one)."""


def source(name: str) -> Path:
    """Where ``name``'s source distribution is unpacked (``<cache>/<name>-<version>``);
    ``FileNotFoundError`` naming the command when it was not fetched."""
    version = SUITES[name]
    unpacked = CACHE / f"{name}-{version}"
    if not (unpacked / ".fetched").is_file():
        raise FileNotFoundError(
            f"{unpacked} is missing: run `python -m tools.framework_tests fetch` (make test does)"
        )
    return unpacked


def fetch(name: str) -> Path:
    """Download and unpack ``name``'s source distribution unless it is there already."""
    version = SUITES[name]
    unpacked = CACHE / f"{name}-{version}"
    if (unpacked / ".fetched").is_file():
        return unpacked
    downloads = CACHE / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"{name}=={version}",
            "--dest",
            str(downloads),
        ],
        check=True,
    )
    stem = f"{name.replace('-', '_')}-{version}"
    archive = downloads / f"{stem}.tar.gz"
    if not archive.is_file():
        raise FileNotFoundError(f"pip downloaded no {archive.name} into {downloads}")
    unpacked.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    top = unpacked / stem
    for child in top.iterdir():  # the archive's top folder, flattened
        child.rename(unpacked / child.name)
    top.rmdir()
    (unpacked / ".fetched").write_text(f"{name}=={version}\n", encoding="utf-8")
    return unpacked


def main(argv: list[str] | None = None) -> int:
    """``fetch``: every suite of ``SUITES``, printing where each is; 0, or pip's
    ``CalledProcessError`` when a download fails."""
    parser = argparse.ArgumentParser(prog="python -m tools.framework_tests")
    parser.add_argument("command", choices=["fetch"])
    parser.parse_args(argv)
    for name in SUITES:
        print(f"{name}=={SUITES[name]}: {fetch(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
