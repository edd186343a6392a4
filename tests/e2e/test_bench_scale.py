"""The scale benchmark, tiny: seeded memories read back through the API, appends, DELETE."""

from __future__ import annotations

from bench import scale


def test_the_scale_benchmark_reads_back_what_it_seeded_and_deletes_every_key(tmp_path):
    actors, per_actor, sessions, appends, requests = 4, 25, 40, 2, 6
    args = scale.parse_args(
        [
            "--actors",
            str(actors),
            "--per-actor",
            str(per_actor),
            "--dimensions",
            "16",
            "--sessions",
            str(sessions),
            "--appends",
            str(appends),
            "--processes",
            "2",
            "--threads",
            "2",
            "--workers",
            "1",
            "--warm-actors",
            "2",
            "--fresh-actors",
            "4",
            "--requests",
            str(requests),
            "--api-adds",
            "5",
            "--headroom-gb",
            "0",
            "--out",
            str(tmp_path),
            "--no-plot",
        ]
    )
    report = scale.run(args)
    text = scale.write(report, args.out, plot_it=not args.no_plot)

    # The records written straight to the cluster are the API's: it counts them all, and
    # every recall and search found LIMIT of them (scale._call raises otherwise).
    assert report.counts["memories"] == actors * per_actor
    warm = {name: times for name, times in report.latency.items() if "warm" in name}
    fresh = {name: times for name, times in report.latency.items() if "fresh" in name}
    assert [len(times) for times in warm.values()] == [requests, requests]
    assert sorted(len(times) for times in fresh.values()) == [2, 2]
    assert report.api_add_rate > 0
    # Every append acknowledged, on the cluster and on the single node.
    assert report.appends["failed"] == {}
    assert report.appends["messages"] == sessions * appends * 2
    assert report.baseline_appends["failed"] == {}
    assert sum(s.sessions for s in report.shards) == sessions
    assert report.delete_seconds > 0 and report.keys_left == 0
    written = (tmp_path / "scale.md").read_text(encoding="utf-8")
    assert written == text
    assert "keys of the store left on the three primaries afterwards: 0." in written
    assert not (tmp_path / "scale.png").exists()
