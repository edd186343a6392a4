"""``make test`` tells the truth: the cluster subset runs even when every-test run failed, and
the target fails when either run did (issue 32: it used to stop at the first failing run, so a
red main run hid whether the cluster subset passed at all).

The two runs are the ``test-runs`` target's (``test`` runs it after lint and the builds); here
``PY`` is a stand-in interpreter that records each run and exits as told."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = """#!/bin/sh
echo "cluster=${KIVIDB_TEST_CLUSTER:-0} $*" >> "$CALLS"
if [ "${KIVIDB_TEST_CLUSTER:-0}" = 1 ]; then exit "$CLUSTER_RC"; fi
exit "$MAIN_RC"
"""


def _make_test_runs(
    tmp_path: Path, main_rc: int, cluster_rc: int, *make_args: str
) -> tuple[int, list[str]]:
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "CALLS": str(calls),
        "MAIN_RC": str(main_rc),
        "CLUSTER_RC": str(cluster_rc),
    }
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "test-runs", f"PY={python}", *make_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    runs = calls.read_text().splitlines() if calls.exists() else []
    return done.returncode, runs


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("main_rc", "cluster_rc", "fails"),
    [(0, 0, False), (1, 0, True), (0, 1, True), (1, 1, True), (5, 0, True)],
)
def test_the_cluster_subset_runs_after_a_failed_main_run_and_either_failure_fails(
    tmp_path: Path, main_rc: int, cluster_rc: int, fails: bool
) -> None:
    returncode, runs = _make_test_runs(tmp_path, main_rc, cluster_rc)
    assert [run.split()[0] for run in runs] == ["cluster=0", "cluster=1"]
    workers = ["-n", "2", "--dist", "loadfile"]  # two workers, a file to each (TEST_WORKERS)
    assert runs[0].split()[1:] == ["-m", "pytest", "-q", *workers]
    assert runs[1].split()[1:6] == ["-m", "pytest", "-q", *workers[:2]]
    assert "tests/integration/test_sessions.py" in runs[1].split()
    assert (returncode != 0) is fails


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("workers", "options"), [("0", []), ("3", ["-n", "3", "--dist", "loadfile"])]
)
def test_test_workers_sets_the_number_of_pytest_workers_and_0_runs_in_one_process(
    tmp_path: Path, workers: str, options: list[str]
) -> None:
    returncode, runs = _make_test_runs(tmp_path, 0, 0, f"TEST_WORKERS={workers}")
    assert returncode == 0
    assert [run.split()[1 : 4 + len(options)] for run in runs] == [
        ["-m", "pytest", "-q", *options]
    ] * 2
