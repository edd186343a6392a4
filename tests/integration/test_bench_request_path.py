"""The request-path benchmark, small: it runs end to end and reports every route with the round
trips it makes and the share of each part of the path (in a process of its own: it sets the
functions' environment as the local stack does). The HTTP rounds at 10,000 x 384 are left out
here (``--rounds 0``): seeding them takes a minute."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.request_http import OPS, Ratios, ratio_rows
from bench.request_spans import PARTS, Spans
from tests.support.common import ROOT


def test_the_request_path_benchmark_reports_each_route_its_round_trips_and_parts(tmp_path):
    command = [
        sys.executable,
        "-m",
        "bench.request_path",
        "--requests",
        "5",
        "--runs",
        "1",
        "--rounds",
        "0",
        "--profile",
        "recall",
        "--profile",
        "keyword search",
        "--out",
        str(tmp_path),
        # matplotlib is a bench requirement (bench/requirements.txt), not a test one: no plot here
        "--no-plot",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "request_path.md").read_text()
    lines = text.splitlines()
    routes = ("add events", "recall", "keyword search", "semantic search", "get session")
    for route in routes:
        row = next(line for line in lines if line.startswith(f"| {route} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        trips, commands = float(cells[-3]), float(cells[-2])
        assert 1 <= trips <= 10 and commands >= trips, row
        if route in ("recall", "keyword search", "semantic search"):
            assert trips <= 3, row  # a warm read: the authorizer, the store, the data
        parts = [line for line in lines if line.startswith(f"| {route} |")][1]
        shares = [float(cell.strip().rstrip("%")) for cell in parts.strip("|").split("|")[1:]]
        assert len(shares) == len(PARTS) and abs(sum(shares) - 100) <= len(PARTS), parts
        assert shares[PARTS.index("own work")] > 0 and shares[PARTS.index("authorizer")] > 0
    assert "## Profile: recall" in text and "functions/recall/recall.py" in text
    assert "## Profile: keyword search" in text
    assert not (tmp_path / "request_path.png").exists()  # --no-plot writes the report only


def test_spans_charge_each_part_its_own_time_only():
    spans = Spans()
    inner = spans.wrap("own work", lambda: time.sleep(0.02))

    def outer() -> None:
        time.sleep(0.01)
        inner()

    spans.wrap("routing", outer)()
    assert 0.018 <= spans.seconds["own work"] < 0.06
    assert 0.009 <= spans.seconds["routing"] < 0.018  # not the 0.02 s of the call it made
    assert abs(sum(spans.shares().values()) - 1) < 1e-9


def test_a_ratio_over_its_target_fails_and_one_under_passes():
    found = Ratios(
        http={op: [2.0, 2.2, 9.0] for op in OPS},
        core={op: [1.0, 1.0, 1.0] for op in OPS},
    )
    found.http["search keyword"] = [2.9, 3.5, 2.0]
    found.httpx = {op: [3.0, 3.4, 10.0] for op in OPS}
    rows = {row.split("|")[1].strip(): row for row in ratio_rows(found)[2:]}
    assert "**2.20x** (2.00 - 9.00)" in rows["search semantic"]
    assert rows["search semantic"].endswith("**FAIL** | 3.40 ms, 3.40x |")  # over 2x
    assert rows["search keyword"].endswith("**PASS** | 3.40 ms, 3.40x |")  # 2.9x, under 3x
    assert "PASS" not in rows["search hybrid"] and "FAIL" not in rows["search hybrid"]


def test_the_ratio_s_verdict_is_the_plain_client_s_and_httpx_s_is_reported_beside_it():
    # A path under its target through http.client stays a PASS however slow a client library
    # is, and a path over it stays a FAIL however fast: the verdict never reads the httpx side.
    found = Ratios(
        http={op: [1.5] for op in OPS},
        core={op: [1.0] for op in OPS},
        httpx={op: [9.0] for op in OPS},
    )
    row = {row.split("|")[1].strip(): row for row in ratio_rows(found)[2:]}["recall"]
    assert "**1.50x**" in row and "**PASS**" in row and row.endswith("9.00 ms, 9.00x |")
    unmeasured = Ratios(http={op: [2.5] for op in OPS}, core={op: [1.0] for op in OPS})
    row = {row.split("|")[1].strip(): row for row in ratio_rows(unmeasured)[2:]}["recall"]
    assert "**FAIL**" in row and row.endswith("(not measured) |")


def test_the_http_rounds_report_each_operation_with_its_verdict(tmp_path):
    command = [
        sys.executable,
        "-m",
        "bench.request_path",
        "--requests",
        "2",
        "--runs",
        "1",
        "--rounds",
        "1",
        "--http-requests",
        "3",
        "--out",
        str(tmp_path),
        # matplotlib is a bench requirement (bench/requirements.txt), not a test one: no plot here
        "--no-plot",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "request_path.md").read_text()
    for op in OPS:
        row = next(line for line in text.splitlines() if line.startswith(f"| {op} |"))
        http, core = (float(cell.split()[0]) for cell in row.split("|")[2:4])
        assert http > 0 and core > 0, row
        assert ("PASS" in row or "FAIL" in row) == (op != "search hybrid"), row
        httpx_ms, httpx_ratio = row.split("|")[-2].split(",")
        assert float(httpx_ms.split()[0]) > 0 and httpx_ratio.strip().endswith("x"), row
