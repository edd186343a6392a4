"""The replay tool drives real LoCoMo and MemoryBank sessions through the local stack."""

import re
import subprocess
import sys

from tests.support.common import ROOT, needs_data, unique

pytestmark = needs_data

SUMMARY = re.compile(
    r"replayed (?P<name>\S+): (?P<sessions>\d+) sessions, (?P<messages>\d+) messages, .* in "
    r"[\d.]+ s; latency median [\d.]+ ms, p99 [\d.]+ ms"
)


def _replay(stack, *args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.replay",
            "--url",
            stack.url,
            "--api-key",
            stack.api_key,
            "--quiet",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_locomo_sessions_arrive_in_order_with_dates_and_speakers(stack):
    store = unique("replay")
    done = _replay(stack, "--store", store, "--sessions", "2")
    assert done.returncode == 0, done.stderr
    summary = SUMMARY.search(done.stdout)
    assert summary and summary["name"] == "conv-26" and summary["sessions"] == "2"
    with stack.client() as api:
        base = f"/instances/local/agent-memory/{store}"
        first = api.get(f"{base}/sessions/locomo:conv-26:session-1", params={"recent": 1000})
        view = first.json()
        assert view["actor_id"] == "locomo:conv-26"
        assert view["messages"][0]["name"] == "Caroline"
        assert view["messages"][0]["created_at"] == "2023-05-08T13:56:00Z"
        assert view["messages"][0]["content"].startswith("Hey Mel!")
        listed = api.get(f"{base}/sessions").json()["sessions"]
        assert {s["session_id"] for s in listed} == {
            "locomo:conv-26:session-1",
            "locomo:conv-26:session-2",
        }
        assert sum(s["message_count"] for s in listed) == int(summary["messages"])
        api.delete(base)


def test_memorybank_user_replays(stack):
    store = unique("replay")
    done = _replay(stack, "--store", store, "--dataset", "memorybank", "--sessions", "1")
    assert done.returncode == 0, done.stderr
    assert "replayed Emily: 1 sessions" in done.stdout
    with stack.client() as api:
        api.delete(f"/instances/local/agent-memory/{store}")


def test_a_wrong_key_is_a_clear_failure(stack):
    stack = type(stack)(stack.url, "kvm_wrong_0000000000", stack.redis_url)
    done = _replay(stack, "--sessions", "1")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "401" in done.stderr + done.stdout
