"""Interleaved A/B of two checkouts: ``bench.request_path`` and ``bench.latency``, old and new
taking turns, and where a route's extra work comes from (cProfile call counts).

    python -m bench.ab --old /work/baseline-7cd5664 [--new .] [--rounds 3]
    python -m bench.ab --old ../base --profile-only          # the call counts alone

Each checkout runs its own copy of the two benchmarks with its own code (``PYTHONPATH`` set to
its ``layers/core``, ``client/src`` and root, the same interpreter), into a temporary folder,
and their Markdown tables are read back, so a checkout from before this module existed can be
measured. Rounds alternate the order (old then new, new then old, ...), so that a machine that
slows down or speeds up during the A/B weighs on both sides alike. Per route and operation:
each side's median over the rounds and its spread (min - max), the ratio new / old of the
medians and the median of the per-round ratios; the verdict is PASS when the ratio of the
medians is at most ``--bound`` (1.10: nothing more than 10% slower), FAIL otherwise, and the
noise is shown beside it: the spread of the old side's own rounds, as a share of its median.

Time moves with the machine (2 shared cores); work does not. So the A/B also counts, per
request of each ``bench.request_path`` route, the Python function calls (cProfile, in a process
of each checkout, ``--profile-requests`` warm requests) and lists the functions whose calls per
request differ the most between the two: deterministic figures that tell where a route's extra
work comes from. Writes (replacing the section of a previous run of this module, keeping the
history below it) ``bench/results/request_path-ab.md`` and ``latency-ab.md``, and ``ab.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PATH_ROUTES = ("add events", "recall", "keyword search", "get session")
LATENCY_OPS = (
    "search semantic",
    "search hybrid",
    "search keyword",
    "recall",
    "add a memory with its vector",
)
LATENCY_CASE = "10,000 x 384"
START = "<!-- bench.ab: start -->"
END = "<!-- bench.ab: end -->"

PROFILE_CHILD = """
import asyncio, cProfile, sys, tempfile
from pathlib import Path
from bench import request_path as rp
from local.bootstrap import start_redis_server

route, count, dump = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with tempfile.TemporaryDirectory() as folder:
    database = start_redis_server(Path(folder) / "redis", persist=False)
    try:
        call = rp.caller(rp.gateway(database.url, Path(folder)))

        async def run() -> None:
            await rp.prepare(call)
            send = rp.requests(call)[route]
            for n in range(50):
                await send(n)
            profiler = cProfile.Profile()
            profiler.enable()
            for n in range(count):
                await send(n)
            profiler.disable()
            profiler.dump_stats(dump)

        asyncio.run(run())
    finally:
        database.stop()
"""
"""Run with ``python -c`` in a checkout: ``ROUTE COUNT DUMP``; the checkout's own request path
(its ``bench.request_path`` helpers), ``COUNT`` requests of ``ROUTE`` after 50 to warm up."""


# --- running one side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One checkout: ``name`` (old / new), its folder and its commit."""

    name: str
    folder: Path

    @property
    def commit(self) -> str:
        return subprocess.run(
            ["git", "-C", str(self.folder), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def env(self) -> dict[str, str]:
        path = [self.folder / "layers" / "core", self.folder / "client" / "src", self.folder]
        return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in path)}

    def run(self, args: list[str]) -> None:
        """``python ARGS`` in this checkout; ``CalledProcessError`` (with its output's tail
        printed) when it fails."""
        done = subprocess.run(
            [sys.executable, *args],
            cwd=self.folder,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if done.returncode:
            print(done.stdout[-3000:], file=sys.stderr)
            done.check_returncode()


def _row(text: str, label: str) -> list[str]:
    """The cells (after the label) of the first Markdown table row whose first cell is
    ``label``; ``ValueError`` when there is none."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise ValueError(f"no row {label!r}")


def _ms(cell: str) -> float:
    return float(cell.split()[0].replace(",", ""))


PATH_TABLE = "| route | p50 |"
"""How the per-route table of ``request_path.md`` begins, in every version: read from there, by
its columns' names (later versions add columns, and an HTTP table before it with a row per
operation, ``recall`` among them)."""


def request_path_figures(text: str) -> dict[str, dict[str, float]]:
    """From ``request_path.md``: per route its p50 (ms), round trips and commands per request.
    ``ValueError`` without the table."""
    at = text.find("\n" + PATH_TABLE)
    if at < 0:
        raise ValueError("no per-route table")
    table = text[at + 1 :]
    names = [c.strip() for c in table.splitlines()[0].strip().strip("|").split("|")][1:]
    trips, commands = names.index("round trips / request"), names.index("commands / request")
    found = {}
    for route in PATH_ROUTES:
        cells = _row(table, route)
        found[route] = {
            "p50": _ms(cells[0]),
            "trips": float(cells[trips]),
            "commands": float(cells[commands]),
        }
    return found


def latency_figures(text: str) -> dict[str, dict[str, float]]:
    """From ``latency.md``, its 10,000 x 384 case: per operation p50 and p99 (ms) and the
    core's in-process p50 where there is one; the NumPy scan and the first recall in a fresh
    process as operations of their own."""
    case = text.split(f"## {LATENCY_CASE} (one actor)", 1)[1]
    found: dict[str, dict[str, float]] = {}
    for op in LATENCY_OPS:
        cells = _row(case, op)
        figures = {"p50": _ms(cells[0]), "p99": _ms(cells[1])}
        if len(cells) > 4 and cells[4]:
            figures["core"] = _ms(cells[4])
        found[op] = figures
    scan = _row(case, "baseline: exact NumPy scan, in-process")
    found["exact NumPy scan"] = {"p50": _ms(scan[0])}
    cold = _row(case, "first recall, fresh process")
    found["first recall, fresh process"] = {"p50": _ms(cold[1])}
    return found


def run_request_path(side: Side, requests: int, runs: int) -> dict[str, dict[str, float]]:
    source = (side.folder / "bench" / "request_path.py").read_text()
    # Later versions also measure HTTP rounds and draw a plot: not what is compared here.
    extra = ["--rounds", "0"] if '"--rounds"' in source else []
    extra += ["--no-plot"] if '"--no-plot"' in source else []
    with tempfile.TemporaryDirectory(prefix="kividb-ab-") as out:
        side.run(
            [
                "-m",
                "bench.request_path",
                "--requests",
                str(requests),
                "--runs",
                str(runs),
                "--out",
                out,
                *extra,
            ]
        )
        return request_path_figures((Path(out) / "request_path.md").read_text())


def run_latency(side: Side, requests: int, runs: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="kividb-ab-") as out:
        side.run(
            [
                "-m",
                "bench.latency",
                "--sizes",
                ",",
                "--runs",
                str(runs),
                "--requests",
                str(requests),
                "--cold",
                "1",
                "--adds",
                "50",
                "--out",
                out,
            ]
        )
        return latency_figures((Path(out) / "latency.md").read_text())


def profile_calls(side: Side, route: str, count: int) -> dict[tuple[str, str], float]:
    """Python function calls per request of ``route`` in ``side``: ``{(file, function):
    calls}``, files relative to the checkout (or to site-packages), plus ``("", "total")``."""
    with tempfile.TemporaryDirectory(prefix="kividb-ab-") as out:
        dump = Path(out) / "profile.pstats"
        side.run(["-c", PROFILE_CHILD, route, str(count), str(dump)])
        stats = pstats.Stats(str(dump)).stats  # type: ignore[attr-defined]
    calls: dict[tuple[str, str], float] = {}
    prefix = str(side.folder.resolve()) + "/"
    for (file, _line, name), (_, total, *_rest) in stats.items():
        file = file.replace(prefix, "")
        file = re.sub(r"^.*/site-packages/", "", file)
        name = re.sub(r" at 0x[0-9a-f]+", "", name)
        calls[(file, name)] = calls.get((file, name), 0.0) + total / count
    calls[("", "total")] = sum(calls.values())
    return calls


# --- the figures of all rounds -------------------------------------------------------------


@dataclass
class Figures:
    """Per side, per route, per measure: ``{round: value}`` (a failed run leaves its round
    out; per-round ratios pair the rounds both sides have)."""

    values: dict[str, dict[str, dict[str, dict[int, float]]]] = field(default_factory=dict)

    def add(self, side: str, round_: int, found: dict[str, dict[str, float]]) -> None:
        routes = self.values.setdefault(side, {})
        for route, measures in found.items():
            for measure, value in measures.items():
                routes.setdefault(route, {}).setdefault(measure, {})[round_] = value

    def get(self, side: str, route: str, measure: str) -> list[float]:
        return list(self.values.get(side, {}).get(route, {}).get(measure, {}).values())

    def paired(self, route: str, measure: str) -> list[float]:
        """new / old of each round that both sides have."""
        old = self.values.get("old", {}).get(route, {}).get(measure, {})
        new = self.values.get("new", {}).get(route, {}).get(measure, {})
        return [new[r] / old[r] for r in sorted(old) if r in new]


def _spread(values: list[float]) -> str:
    if not values:
        return ""
    return f"{statistics.median(values):.2f} ({min(values):.2f} - {max(values):.2f})"


def verdict_of(ratio: float, least: float, noise: float, bound: float) -> str:
    """PASS: new / old of the medians at most ``bound``. FAIL: over it, by more than the noise
    (the larger relative spread of the two sides' own rounds) and in every paired round
    (``least``, the smallest per-round ratio, over ``bound`` too). Otherwise "noise": slower
    by the medians, but no more than the same code moved between its own rounds."""
    if ratio <= bound:
        return "PASS"
    if ratio > 1 + noise and least > bound:
        return "FAIL"
    return "noise"


def ratio_row(figures: Figures, route: str, measure: str, bound: float) -> tuple[str, float, str]:
    """A table row's cells after the route's name, the ratio of the medians, the verdict."""
    old, new = figures.get("old", route, measure), figures.get("new", route, measure)
    ratio = statistics.median(new) / statistics.median(old)
    paired = figures.paired(route, measure) or [ratio]
    noise = max((max(values) - min(values)) / statistics.median(values) for values in (old, new))
    verdict = verdict_of(ratio, min(paired), noise, bound)
    cells = (
        f"{_spread(old)} | {_spread(new)} | **{ratio:.2f}** | "
        f"{statistics.median(paired):.2f} ({min(paired):.2f} - {max(paired):.2f}) | "
        f"{noise:.0%} | {verdict}"
    )
    return cells, ratio, verdict


def _section(
    title: str,
    intro: str,
    figures: Figures,
    routes: tuple[str, ...],
    measures: tuple[str, ...],
    bound: float,
) -> tuple[list[str], dict[str, float], dict[str, str]]:
    lines = [
        title,
        "",
        intro,
        "",
        "| route | measure | old: median (min - max) | new: median (min - max) | new / old | "
        "per round new / old | noise | |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, float] = {}
    verdicts: dict[str, str] = {}
    for route in routes:
        for measure in measures:
            if not figures.get("old", route, measure) or not figures.get("new", route, measure):
                continue
            cells, ratio, verdict = ratio_row(figures, route, measure, bound)
            lines.append(f"| {route} | {measure} | {cells} |")
            if measure == "p50":
                ratios[route] = ratio
                verdicts[route] = verdict
    return lines, ratios, verdicts


def result_line(
    ratios: dict[str, float], verdicts: dict[str, str], routes: list[str], bound: float
) -> str:
    """The section's verdict in one sentence, from the p50 rows' verdicts."""
    slower = [r for r in routes if verdicts[r] == "FAIL"]
    noisy = [r for r in routes if verdicts[r] == "noise"]
    figures = ", ".join(f"{r} {ratios[r]:.2f}" for r in routes)
    if slower:
        return (
            f"Result: FAIL: slower than {bound:.2f}x beyond the noise: "
            + ", ".join(slower)
            + f" (p50 new / old of the medians: {figures})."
        )
    text = (
        f"Result: nothing slower than {bound:.2f}x beyond the noise (p50 new / old of the "
        f"medians: {figures})."
    )
    if noisy:
        text += (
            " Over the bound by the medians but within what the same code moved between its own "
            "rounds, so not told from the noise by these rounds: " + ", ".join(noisy) + "."
        )
    return text


def calls_table(calls: dict[str, dict[str, dict[tuple[str, str], float]]], top: int) -> list[str]:
    """Per route: the calls per request of each side, and the functions that differ most."""
    lines = [
        "| route | Python calls / request, old | new | new / old |",
        "|---|---|---|---|",
    ]
    for route in calls["old"]:
        before, after = calls["old"][route][("", "total")], calls["new"][route][("", "total")]
        lines.append(f"| {route} | {before:,.0f} | {after:,.0f} | {after / before:.3f} |")
    for route in calls["old"]:
        old, new = calls["old"][route], calls["new"][route]
        keys = (set(old) | set(new)) - {("", "total")}
        changes = sorted(keys, key=lambda k: -abs(new.get(k, 0.0) - old.get(k, 0.0)))[:top]
        lines += [
            "",
            f"**{route}**: the {top} functions whose calls per request changed the most "
            "(cProfile; `~` entries are built-ins)",
            "",
            "| function | old | new | new - old |",
            "|---|---|---|---|",
        ]
        for file, name in changes:
            a, b = old.get((file, name), 0.0), new.get((file, name), 0.0)
            if a == b:
                break
            lines.append(f"| `{file}` {name} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")
    return lines


def replace_section(path: Path, section: list[str]) -> None:
    """Write ``section`` between this module's markers in ``path``: in place of the previous
    run's, or after the file's title line when there is none yet."""
    block = "\n".join([START, *section, END]) + "\n"
    text = path.read_text() if path.exists() else "# A/B\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1].lstrip("\n")
    else:
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{block}\n{rest.lstrip(chr(10))}"
    path.write_text(text)


def plot(path: Path, path_figures: Figures, latency: Figures) -> None:
    """Per route the per-round ratios new / old of p50 (dots) and of the medians (bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (path_figures, PATH_ROUTES, "bench.request_path (in-process gateway)"),
        (latency, (*LATENCY_OPS, "first recall, fresh process"), "bench.latency, 10,000 x 384"),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (figures, routes, title) in zip(axes, panels, strict=True):
        shown = [r for r in routes if figures.get("old", r, "p50")]
        for i, route in enumerate(shown):
            old, new = figures.get("old", route, "p50"), figures.get("new", route, "p50")
            ax.bar(i, statistics.median(new) / statistics.median(old), color="#4c72b0", alpha=0.6)
            paired = figures.paired(route, "p50")
            ax.plot([i] * len(paired), paired, "o", color="black", markersize=4)
        ax.axhline(1.0, color="#999999", lw=1)
        ax.axhline(1.10, color="#c44e52", lw=1.5, ls="--", label="bound: 1.10")
        ax.set_xticks(range(len(shown)), [r.replace(" with its vector", "") for r in shown])
        ax.tick_params(axis="x", labelrotation=25, labelsize=8)
        ax.set_ylabel("p50 new / old (bars: medians; dots: rounds)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --- main ----------------------------------------------------------------------------------


def load_figures(path: Path, path_figures: Figures, latency: Figures) -> None:
    """The figures of a previous run (its ``ab-figures.json``) into the two ``Figures``."""
    kept = json.loads(path.read_text())
    for figures, name in ((path_figures, "request_path"), (latency, "latency")):
        for side, routes in kept[name].items():
            for route, measures in routes.items():
                for measure, rounds in measures.items():
                    for round_, value in rounds.items():
                        figures.add(side, int(round_), {route: {measure: value}})


def run_rounds(
    args: argparse.Namespace,
    sides: dict[str, Side],
    benches: list[str],
    figures: tuple[Figures, Figures],
    loads: list[float],
    failures: list[str],
) -> None:
    """``args.rounds`` rounds of each bench on each side, the order alternating; the figures
    into ``figures`` (request path, latency) and ``ab-figures.json`` after each run, a failed
    run into ``failures``, the load average after each run into ``loads``."""
    path_figures, latency = figures
    for round_ in range(args.rounds):
        order = ("old", "new") if round_ % 2 == 0 else ("new", "old")
        for bench in benches:
            for name in order:
                print(f"round {round_ + 1}/{args.rounds}: {bench}, {name}", flush=True)
                try:
                    if bench == "request_path":
                        found = run_request_path(sides[name], args.path_requests, 2)
                        path_figures.add(name, round_, found)
                    else:
                        found = run_latency(sides[name], args.latency_requests, 2)
                        latency.add(name, round_, found)
                except (subprocess.CalledProcessError, ValueError, IndexError) as error:
                    failures.append(f"round {round_ + 1}, {bench}, {name}: {error}")
                    print(f"failed: {failures[-1]}", flush=True)
                loads.append(os.getloadavg()[0])
                keep = {"request_path": path_figures.values, "latency": latency.values}
                (args.out / "ab-figures.json").write_text(json.dumps(keep, indent=1))


def main(argv: list[str] | None = None) -> int:
    """Run the rounds, then the profiles, and write the two reports and the plot; 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the checkout of before")
    parser.add_argument("--new", type=Path, default=ROOT, help="the checkout of after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--benches", default="request_path,latency")
    parser.add_argument("--path-requests", type=int, default=300)
    parser.add_argument("--latency-requests", type=int, default=200)
    parser.add_argument("--profile-requests", type=int, default=200)
    parser.add_argument("--top", type=int, default=12, help="functions listed per route")
    parser.add_argument("--bound", type=float, default=1.10)
    parser.add_argument("--profile-only", action="store_true")
    parser.add_argument("--no-profile", action="store_true", help="no cProfile call counts")
    parser.add_argument(
        "--from-figures",
        type=Path,
        help="write the reports from a previous run's ab-figures.json instead of running",
    )
    parser.add_argument(
        "--measured",
        help="with --from-figures: when and how loaded the machine was during that run, for "
        "the report (e.g. '2026-12-07 17:53-18:43 UTC, load average 11.1 to 21.5')",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sides = {"old": Side("old", args.old.resolve()), "new": Side("new", args.new.resolve())}
    benches = [b for b in args.benches.split(",") if b]
    commits = {name: side.commit for name, side in sides.items()}
    path_figures, latency = Figures(), Figures()
    started = datetime.now(UTC)
    loads = [os.getloadavg()[0]]
    failures: list[str] = []
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_figures:
        load_figures(args.from_figures, path_figures, latency)
    elif not args.profile_only:
        run_rounds(args, sides, benches, (path_figures, latency), loads, failures)
    calls: dict[str, dict[str, dict[tuple[str, str], float]]] = {"old": {}, "new": {}}
    for route in PATH_ROUTES if not args.no_profile else ():
        for name in ("old", "new"):
            print(f"profile: {route}, {name}", flush=True)
            calls[name][route] = profile_calls(sides[name], route, args.profile_requests)
    ended = datetime.now(UTC)
    when = (
        f"{started:%Y-%m-%d %H:%M}-{ended:%H:%M} UTC on this project's machine "
        f"({os.cpu_count()} cores, shared: 1-minute load average {min(loads):.1f} to "
        f"{max(loads):.1f} during the runs)"
    )
    if args.measured:
        when = f"{args.measured} (the figures of that run, from `ab-figures.json`)"
    heading = f"## {commits['new']} (new) against {commits['old']} (old): `python -m bench.ab`"
    command = f"`python -m bench.ab --old {args.old} --rounds {args.rounds}`"
    common = (
        f"Measured {when}. {args.rounds} rounds, the order alternating (old first in round 1); "
        "each side runs its own checkout's benchmark. Verdict: PASS when new / old of the "
        f"medians is at most {args.bound:.2f}; FAIL when it is over that by more than the noise "
        "(the larger (max - min) / median of either side's own rounds: what the machine moved "
        "the same code by) and every round's own ratio is over it too; noise otherwise. "
        "Command: "
        f"{command} (`make bench-ab OLD=...`)."
        + (
            " Runs that failed (left out; their rounds are not paired): "
            + "; ".join(failures)
            + "."
            if failures
            else ""
        )
    )
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.profile_only:
        plot(args.out / "ab.png", path_figures, latency)
    if not args.profile_only and "request_path" in benches:
        lines, ratios, verdicts = _section(
            heading,
            common + f" Each round: `python -m bench.request_path --requests {args.path_requests} "
            "--runs 2` (p50: the median of its 2 runs' p50s, in ms).",
            path_figures,
            PATH_ROUTES,
            ("p50", "trips", "commands"),
            args.bound,
        )
        lines += ["", result_line(ratios, verdicts, list(ratios), args.bound)]
        lines += [
            *(
                [
                    "",
                    "### Work per request (deterministic: cProfile call counts, "
                    f"{args.profile_requests} warm requests in a process of each checkout)",
                    "",
                    *calls_table(calls, args.top),
                ]
                if calls["old"]
                else []
            ),
            "",
            "![A/B](ab.png)",
        ]
        replace_section(args.out / "request_path-ab.md", lines)
    elif args.profile_only:
        lines = [heading, "", common, "", *calls_table(calls, args.top)]
        replace_section(args.out / "request_path-ab.md", lines)
    if not args.profile_only and "latency" in benches:
        lines, ratios, verdicts = _section(
            heading,
            common + f" Each round: `python -m bench.latency --sizes , --runs 2 --requests "
            f"{args.latency_requests} --cold 1 --adds 50`, its {LATENCY_CASE} case: warm p50 / "
            "p99 over HTTP (one worker), the core's in-process p50 (`core`), the in-run NumPy "
            "scan and the first recall of a fresh process (one sample per round), in ms.",
            latency,
            (*LATENCY_OPS, "exact NumPy scan", "first recall, fresh process"),
            ("p50", "p99", "core"),
            args.bound,
        )
        timed_ops = [op for op in ratios if op != "exact NumPy scan"]
        lines += ["", result_line(ratios, verdicts, timed_ops, args.bound)]
        replace_section(args.out / "latency-ab.md", [*lines, "", "![A/B](ab.png)"])
    print((args.out / "request_path-ab.md").read_text().split(END, 1)[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
