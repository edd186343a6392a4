"""The request-path benchmark, small: it runs end to end and reports every route with the round
trips it makes (in a process of its own: it sets the functions' environment as the local stack
does)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.common import ROOT


def test_the_request_path_benchmark_reports_each_route_and_its_round_trips(tmp_path):
    command = [
        sys.executable,
        "-m",
        "bench.request_path",
        "--requests",
        "5",
        "--runs",
        "1",
        "--profile",
        "recall",
        "--profile",
        "keyword search",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "request_path.md").read_text()
    for route in ("add events", "recall", "keyword search", "get session"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {route} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        trips, commands = float(cells[-2]), float(cells[-1])
        assert 1 <= trips <= 10 and commands >= trips, row
        if route in ("recall", "keyword search"):
            assert trips <= 3, row  # a warm read: the authorizer, the store, the data
    assert "## Profile: recall" in text and "functions/recall/recall.py" in text
    assert "## Profile: keyword search" in text
