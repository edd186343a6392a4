"""Rate limits under load, through the local stack (``make bench-limits``; docs/keys.md).

Three measurements, each repeated ``--runs`` times, medians reported with their ratios:

1. **Accuracy.** One organization limited to ``--rate`` requests per second (burst ``--rate``),
   4 callers sending ``GET /agent-memory`` as fast as the stack answers for ``--seconds``: the
   accepted rate after the burst, and its ratio to the limit (target: within 10%); every refusal
   must be a 429 ``rate_limited`` with a ``Retry-After``.
2. **Neighbours.** A second organization's p50 latency (one caller) while the first floods the
   stack over its limit, against its p50 alone in the same run (target: unchanged within the
   machine's noise; the ratio is reported).
3. **Cost.** The authorizer's extra step, in-process: ``LimitStore.take`` against
   ``ApiKeys.authenticate`` (the lookup every request already made), p50 of 2,000 calls each,
   on the stack's database (target: at most one more round trip, at most 0.5 ms at p50).

``python -m bench.limits [--rate 40] [--seconds 8] [--runs 3] [--out DIR]``; the table goes to
``DIR/limits.md`` (default ``bench/results``).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import httpx

from agent_memory.clock import SystemClock
from agent_memory.control.limits import Limits, LimitStore
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import redis_client
from bench.measure import percentile
from local.bootstrap import start_redis_server
from local.launch import running_stack
from tools.progress import Progress

API_KEY = "kvm_bench_limits_key_0123456789abcdefghijkl"
CALLERS = 4
RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Flood:
    """What the callers of one flood saw."""

    statuses: Counter[int] = field(default_factory=Counter)
    accepted_at: list[float] = field(default_factory=list)
    refusals_without_retry_after: int = 0
    refusal_codes: Counter[str] = field(default_factory=Counter)


def flood(url: str, key: str, seconds: float, callers: int = CALLERS) -> Flood:
    """``callers`` threads sending ``GET /agent-memory`` back to back for ``seconds``."""
    seen = Flood()
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def caller() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as client:
            while time.monotonic() < end:
                answer = client.get("/agent-memory")
                with lock:
                    seen.statuses[answer.status_code] += 1
                    if answer.status_code == 200:
                        seen.accepted_at.append(time.monotonic())
                    elif answer.status_code == 429:
                        seen.refusal_codes[answer.json().get("error", "?")] += 1
                        if not answer.headers.get("retry-after", "").isdigit():
                            seen.refusals_without_retry_after += 1

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def p50_ms(url: str, key: str, count: int) -> float:
    """p50 of ``count`` sequential ``GET /agent-memory`` of ``key``, in ms."""
    times = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}) as client:
        for _ in range(count):
            start = time.perf_counter()
            assert client.get("/agent-memory").status_code == 200
            times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50)


def beside_flood(url: str, key: str, found: list[float]) -> None:
    """The p50 of 200 requests of ``key``, sent a second into a flood."""
    time.sleep(1.0)
    found.append(p50_ms(url, key, 200))


def org_key(control: ControlPlane, name: str) -> tuple[str, str]:
    """A new organization ``name`` and an admin key of it: ``(org_id, api_key)``."""
    control.create_organization(name)
    _, key = control.issue_api_key(name)
    return name, key


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements (module docstring) ``--runs`` times on a local stack of its
    own; writes ``limits.md`` and ``limits.png`` under ``--out``; 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.limits")
    parser.add_argument("--rate", type=float, default=40.0)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows: list[dict[str, float]] = []
    timelines: list[list[float]] = []
    with TemporaryDirectory() as tmp:
        folder = Path(tmp)
        database = start_redis_server(folder / "redis", persist=False)
        try:
            env = {
                "REDIS_URL": database.url,
                "KIVIDB_API_KEY": API_KEY,
                "KIVIDB_LOCAL_DIR": str(folder / "local"),
                "KIVIDB_WORKERS": "2",
            }
            with running_stack(env, log=folder / "stack.log") as (url, _):
                client = redis_client(database.url)
                control = ControlPlane(client, SystemClock(), release_hold_seconds=0)
                limits = LimitStore(client, SystemClock())
                progress = Progress("bench limits")
                for run in progress.each("runs", range(args.runs), "run"):
                    flooder, flood_key = org_key(control, f"flooder{run}")
                    _, quiet_key = org_key(control, f"quiet{run}")
                    limit = Limits(requests_per_second=args.rate, burst=int(args.rate))
                    limits.set(flooder, limit)
                    alone = p50_ms(url, quiet_key, 200)
                    seen = Flood()
                    beside: list[float] = []

                    def measure_quiet(
                        quiet_key: str = quiet_key, beside: list[float] = beside
                    ) -> None:
                        time.sleep(1.0)
                        beside.append(p50_ms(url, quiet_key, 200))

                    side = threading.Thread(target=measure_quiet)
                    side.start()
                    seen = flood(url, flood_key, args.seconds)
                    side.join()
                    start = min(seen.accepted_at)
                    timelines.append([t - start for t in seen.accepted_at])
                    # after the burst: the accepted after the first second, over the time left
                    later = [t for t in seen.accepted_at if t >= start + 1.0]
                    rate = len(later) / (args.seconds - 1.0)
                    take_ms, auth_ms = cost(limits, control, flooder, flood_key)
                    rows.append(
                        {
                            "accepted_per_s": rate,
                            "ratio": rate / args.rate,
                            "refused": seen.statuses[429],
                            "other": sum(
                                n for s, n in seen.statuses.items() if s not in (200, 429)
                            ),
                            "no_retry_after": seen.refusals_without_retry_after,
                            "quiet_alone_ms": alone,
                            "quiet_beside_ms": beside[0],
                            "quiet_ratio": beside[0] / alone,
                            "take_ms": take_ms,
                            "auth_ms": auth_ms,
                            "take_ratio": take_ms / auth_ms,
                        }
                    )
                    progress.say(f"run {run + 1}: {rows[-1]}")
        finally:
            database.stop()
    report(args, rows)
    plot(args, timelines)
    return 0


def plot(args: argparse.Namespace, timelines: list[list[float]]) -> None:
    """Accepted requests per half second of each run, against the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for n, times in enumerate(timelines, 1):
        buckets = Counter(int(t / 0.5) for t in times)
        xs = [b * 0.5 for b in range(int(args.seconds / 0.5))]
        ax.plot(xs, [buckets.get(b, 0) * 2 for b in range(len(xs))], label=f"run {n}")
    ax.axhline(args.rate, color="black", linestyle="--", label=f"limit {args.rate:g}/s")
    ax.set_xlabel("seconds since the first accepted request")
    ax.set_ylabel("accepted requests/s")
    ax.set_title(f"{CALLERS} callers against a limit of {args.rate:g}/s (burst {args.rate:g})")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "limits.png", dpi=110)
    print(f"wrote {args.out / 'limits.png'}")


def cost(limits: LimitStore, control: ControlPlane, org: str, key: str) -> tuple[float, float]:
    """p50 ms of ``LimitStore.take`` and of ``authenticate`` (the lookup it follows), 2,000
    calls each, interleaved, on a limit high enough never to refuse."""
    limits.set(org, Limits(requests_per_second=1_000_000, burst=1_000_000))
    principal = control.authenticate(key)
    takes, auths = [], []
    for _ in range(2000):
        start = time.perf_counter()
        limits.take(org, principal.key_id)
        takes.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        control.authenticate(key)
        auths.append((time.perf_counter() - start) * 1000)
    return percentile(takes, 50), percentile(auths, 50)


def report(args: argparse.Namespace, rows: list[dict[str, float]]) -> None:
    """``limits.md`` under ``args.out``: each figure's median over ``rows`` (one per run),
    its ratio and PASS or FAIL against its target, then the runs."""

    def median(name: str) -> float:
        return statistics.median(r[name] for r in rows)

    ratio = median("ratio")
    clean = all(r["no_retry_after"] == 0 and r["other"] == 0 for r in rows)
    lines = [
        "# Rate limits under load",
        "",
        f"`make bench-limits` ({datetime.now(UTC):%Y-%m-%d}, this machine, the local stack with "
        f"2 workers): a limit of {args.rate:g} requests/s (burst {args.rate:g}), {CALLERS} "
        f"callers for {args.seconds:g} s, {args.runs} runs; medians.",
        "",
        "| Figure | Median | Target | |",
        "|---|---|---|---|",
        f"| accepted requests/s after the burst | {median('accepted_per_s'):.1f} "
        f"({ratio:.3f}x the limit) | within 10% | {'PASS' if abs(ratio - 1) <= 0.1 else 'FAIL'} |",
        f"| refusals (429) per run | {median('refused'):.0f}, "
        f"{median('no_retry_after'):.0f} without Retry-After, {median('other'):.0f} other "
        f"statuses | every refusal a 429 with Retry-After | "
        f"{'PASS' if clean else 'FAIL'} |",
        "| the other organization's p50, beside the flood / alone | "
        f"{median('quiet_beside_ms'):.2f} / {median('quiet_alone_ms'):.2f} ms "
        f"({median('quiet_ratio'):.2f}x) | unchanged within noise | see below |",
        f"| `LimitStore.take` p50 / `authenticate` p50 | {median('take_ms'):.3f} / "
        f"{median('auth_ms'):.3f} ms ({median('take_ratio'):.2f}x) | one round trip, at most "
        f"0.5 ms | {'PASS' if median('take_ms') <= 0.5 else 'FAIL'} |",
        "",
        "The flood runs 4 callers against 2 workers, so the quiet organization's requests queue "
        "behind the flood's (its own and the 429s) in the stack; in AWS each request has a "
        "container of its own, and only the control database is shared.",
        "",
        "![accepted requests per half second](limits.png)",
        "",
        "Per run:",
        "",
        "| run | accepted/s | ratio | 429s | quiet beside / alone ms | take / auth ms |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(rows, 1):
        lines.append(
            f"| {n} | {r['accepted_per_s']:.1f} | {r['ratio']:.3f} | {r['refused']:.0f} | "
            f"{r['quiet_beside_ms']:.2f} / {r['quiet_alone_ms']:.2f} | "
            f"{r['take_ms']:.3f} / {r['auth_ms']:.3f} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "limits.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'limits.md'}")


if __name__ == "__main__":
    raise SystemExit(main())
