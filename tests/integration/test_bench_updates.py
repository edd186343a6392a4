"""The knowledge-update benchmark, small: it runs end to end and tells the two stores apart."""

from __future__ import annotations

import re

from bench import updates


def test_the_updates_benchmark_shows_supersede_winning_over_plain_adds(tmp_path):
    # matplotlib is a bench requirement (bench/requirements.txt), not a test one: no plot here
    assert updates.main(["--actors", "3", "--out", str(tmp_path), "--no-plot"]) == 0
    text = (tmp_path / "updates.md").read_text()
    assert not (tmp_path / "updates.png").exists()

    def row(label: str) -> tuple[float, float]:
        line = next(line for line in text.splitlines() if line.startswith(f"| {label}"))
        first, second = re.findall(r"\| (\d\.\d{3}) ", line)
        return float(first), float(second)

    updated, plain_updated = row("update share: top memory")
    stale, plain_stale = row("stale share: the old value")
    assert updated > plain_updated and stale < plain_stale
    assert row("unchanged subject still current") == (1.0, 1.0)
    assert row("old value readable with include_superseded") == (1.0, 1.0)
