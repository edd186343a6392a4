"""What every benchmark measures with: percentiles, timed calls, peak resident memory."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tools.progress import Stage


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of ``values`` (any order), ``pct`` in (0, 100]."""
    ordered = sorted(values)
    rank = max(1, int(-(-pct * len(ordered) // 100)))
    return ordered[rank - 1]


def timed(call: Callable[[], object], count: int, bar: Stage | None = None) -> list[float]:
    """Run ``call`` ``count`` times; its latencies in milliseconds (``perf_counter``), each
    counted on ``bar`` (a stage of ``tools.progress``) when given."""
    latencies = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - start) * 1000)
        if bar is not None:
            bar.advance()
    return latencies


def peak_rss_mb(pid: int, field: str = "VmHWM") -> float:
    """Sum of VmHWM (peak resident set; or ``field``, e.g. VmRSS) of ``pid`` and its children,
    in MB (Linux /proc)."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for each in pids:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                total += int(line.split()[1])
    return total / 1024


def verdict(passed: bool) -> str:
    """A target's verdict as the reports print it: ``**PASS**`` or ``**FAIL**``."""
    return "**PASS**" if passed else "**FAIL**"
