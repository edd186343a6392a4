"""bench.ab reads each checkout's ``request_path.md`` by its per-route table's column names:
older versions have fewer columns, newer ones an HTTP table before it whose rows name the same
operations (``recall``)."""

import pytest

from bench.ab import PATH_ROUTES, request_path_figures

OLD = """# The warm request path

| route | p50 | runs (min - max) | x RPUSH | round trips / request | commands / request |
|---|---|---|---|---|---|
| add events | 0.82 ms | 0.8 - 0.9 | 20.0x | 5.0 | 38.0 |
| recall | 1.31 ms | 1.2 - 1.4 | 30.0x | 3.0 | 16.0 |
| keyword search | 0.88 ms | 0.8 - 0.9 | 21.0x | 3.0 | 12.0 |
| get session | 0.83 ms | 0.8 - 0.9 | 20.0x | 3.0 | 15.0 |
"""

NEW = """# The warm request path

| 10,000 x 384 | HTTP p50 | core p50 | HTTP minus core | HTTP / core | target | | httpx |
|---|---|---|---|---|---|---|---|
| recall | 7.59 ms | 4.66 ms | 2.92 ms | **1.63x** (1.6 - 1.7) | ≤ 2x | **PASS** | 8.5 ms, 1.8x |

| route | p50 | runs | x RPUSH | CPU | calls | round trips / request | commands / request | o |
|---|---|---|---|---|---|---|---|---|
| add events | 2.35 ms | 2.2 - 2.5 | 20.9x | 2.03 ms | 2,147 | 5.0 | 38.0 | 61% |
| recall | 4.82 ms | 4.8 - 4.9 | 43.0x | 4.44 ms | 3,752 | 2.0 | 17.0 | 37% |
| keyword search | 2.93 ms | 2.7 - 3.1 | 26.1x | 2.71 ms | 2,290 | 2.0 | 12.0 | 50% |
| get session | 2.69 ms | 2.6 - 3.0 | 24.0x | 2.41 ms | 2,363 | 3.0 | 15.0 | 57% |
"""


def test_both_layouts_give_each_route_its_p50_round_trips_and_commands():
    old, new = request_path_figures(OLD), request_path_figures(NEW)
    assert set(old) == set(new) == set(PATH_ROUTES)
    assert old["recall"] == {"p50": 1.31, "trips": 3.0, "commands": 16.0}
    assert new["recall"] == {"p50": 4.82, "trips": 2.0, "commands": 17.0}  # not the HTTP row


def test_a_report_without_the_per_route_table_is_refused():
    with pytest.raises(ValueError):
        request_path_figures(NEW.split("| route |")[0])
