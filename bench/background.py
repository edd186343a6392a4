"""Background work on a 1,000-message session: peak memory, model calls and schedule calls.

DESIGN section 7: "the background function stays under 512 MB while extracting a 1,000-message
session". This runs the background function's handler (``functions/background``) in a fresh
child process, as Lambda would run it, on a session holding the first 1,000 messages of LoCoMo
(conversations in file order, their sessions one after another, dates kept), of a store whose
language model and embedding model are ``tools.scripted_model`` on loopback (a rule-based
OpenAI-shaped server: no model time is measured, the prompts and answers are real HTTP). The
messages are appended with the store's ``summarize_after`` set high, so the run does all the
work at once: extraction of 1,000 unread messages, then the fold of all but ``keep_recent``.

Measured: the child's peak resident memory (VmHWM) and its resident memory right after the
imports (the baseline in the same run), wall time, model calls by kind, memories kept and
deduplicated, and the schedule calls the appends and the run made. Writes
``bench/results/background.md``.

    python -m bench.background                # 1,000 messages, 3 runs
    python -m bench.background --messages 300 --runs 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import httpx
import redis
from cryptography.fernet import Fernet

from agent_memory.background.scheduler import ExtractionTarget
from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.providers.secrets import FernetCipher
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.sessions.service import Sessions
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import free_port, start_redis_server
from local.launch import stop
from tools.progress import Progress
from tools.replay import DEFAULT_FILES, load_conversation, locomo_sample_ids

RESULTS = ROOT / "bench" / "results"
INSTANCE = "bench"
CHILD = """
import json, os, time
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
from pathlib import Path
from local.template import read_http_api
from local.server import LambdaContext
api = read_http_api(Path({template!r}), json.loads(os.environ["PARAMETERS"]))
os.environ.update(api.environment)
handler = api.background.load()
import agent_memory.edge.runtime, agent_memory.background.work  # the function's INIT
baseline = rss("VmRSS")
started = time.perf_counter()
answer = handler(json.loads(os.environ["EVENT"]), LambdaContext("BackgroundFunction", 300.0))
print(json.dumps({{"answer": answer, "seconds": time.perf_counter() - started,
                  "baseline_mb": baseline, "peak_mb": rss("VmHWM")}}))
"""


def messages(count: int) -> list[EventIn]:
    """The first ``count`` LoCoMo messages: conversations in file order, their sessions one
    after another, each message with its speaker and date."""
    path = DEFAULT_FILES["locomo"]
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    found: list[EventIn] = []
    for sample_id in locomo_sample_ids(data):
        for session in load_conversation("locomo", Path(path), sample_id).sessions:
            for m in session.messages:
                created = datetime.fromisoformat(m.created_at.replace("Z", "+00:00"))
                found.append(
                    EventIn(role=m.role, content=m.content, name=m.name, created_at=created)
                )
                if len(found) == count:
                    return found
    return found


def one_run(url: str, provider: str, events: list[EventIn], keep_recent: int) -> dict[str, Any]:
    """Append ``events`` to one session of a new store on ``url`` whose models are at
    ``provider``, run the background handler once in a child process, and return what it
    answered with its time (s), resident memory before and at peak (MB), the provider calls by
    kind, the schedule calls of the appends and what the session holds afterwards."""
    client = redis.Redis.from_url(url, decode_responses=True)
    control = ControlPlane(client, SystemClock())  # the function finds the instance here
    control.create_organization("bench")
    control.register_instance("bench", INSTANCE, url)
    stores = Stores(
        client,
        INSTANCE,
        FernetCipher(Fernet.generate_key()),
        SystemClock(),
        allow_private_endpoints=True,
    )
    name = f"bg-{time.time_ns()}"
    config, _ = stores.put(
        name,
        StorePut(
            llm_provider="custom",
            llm_model="scripted",
            llm_base_url=provider,
            embed_provider="custom",
            embed_model="scripted",
            embed_base_url=provider,
            dimensions=384,
            summarize_after=1000,
            keep_recent=keep_recent,
        ),
    )
    sessions = Sessions(StoreDatabase(stores.client, stores.client, config, stores.clock))
    session_id = "bench-session"
    arms = 0
    for start in range(0, len(events), 100):
        appended = sessions.append_events(
            session_id, EventsRequest(actor_id="bench-user", events=events[start : start + 100])
        )
        arms += appended.arm_due is not None
    # Fold everything above keep_recent in this one run: lower summarize_after now.
    config, _ = stores.put(name, StorePut(summarize_after=max(keep_recent + 1, 10)))
    target = ExtractionTarget(INSTANCE, name, session_id)
    before = httpx.get(provider.rsplit("/v1", 1)[0] + "/stats").json()
    env = {
        **os.environ,
        "PARAMETERS": json.dumps(
            {
                "ControlRedisUrl": url,
                "SubnetIds": "",
                "SecurityGroupIds": "",
                "LogRetentionDays": "30",
                "LogLevel": "WARN",
            }
        ),
        "EVENT": json.dumps(target.event()),
        "KIVIDB_SCHEDULER": "local",
        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
        "KIVIDB_SECRET_KEY": Fernet.generate_key().decode(),
        "POWERTOOLS_METRICS_DISABLED": "true",
    }
    # The run needs no quiet period: ask for it as POST .../extract does.
    from agent_memory.background.triggers import request_extraction

    request_extraction(client, config, session_id, SystemClock())
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(template=str(ROOT / "template.yaml"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    if child.returncode != 0:
        raise RuntimeError(child.stderr[-3000:])
    result: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    after = httpx.get(provider.rsplit("/v1", 1)[0] + "/stats").json()
    result["calls"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    result["append_arms"] = arms
    view = sessions.get(session_id, 1000)
    result["verbatim"] = len(view.messages)
    result["unread"] = view.extraction.unread
    stores.delete(name)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write ``background.md`` to ``--out``; exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.background")
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep-recent", type=int, default=12)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    events = messages(args.messages)
    results = []
    with TemporaryDirectory() as data:
        database = start_redis_server(Path(data), persist=False)
        port = free_port()
        provider = subprocess.Popen(
            [sys.executable, "-m", "tools.scripted_model", "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/v1"
        try:
            for _ in range(100):
                try:
                    httpx.get(url.rsplit("/v1", 1)[0] + "/stats")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            for _ in Progress("bench background").each("runs", range(args.runs), "run"):
                results.append(one_run(database.url, url, events, args.keep_recent))
        finally:
            stop(provider, grace=10.0)
            database.stop()
    text = report(results, args, len(events))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "background.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


def report(results: list[dict[str, Any]], args: argparse.Namespace, count: int) -> str:
    """The results file: medians over the runs against the 512 MB target, as a table."""

    def med(key: str) -> float:
        return float(statistics.median(r[key] for r in results))

    first = results[0]
    answer = first["answer"]
    calls = first["calls"]
    peak = med("peak_mb")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Background work on one long session",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on this project's machine at commit "
        f"`{head}`. One session of the first {count} LoCoMo messages (dates kept), appended "
        f"100 per call; then one run of the background function's handler in a fresh process "
        f"(extraction of every unread message, then the fold of all but keep_recent = "
        f"{args.keep_recent}), with `tools.scripted_model` as language and embedding model "
        f"(rule-based, loopback HTTP). {len(results)} runs; medians.",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| peak resident memory of the function process (VmHWM) | {peak:.0f} MB | ≤ 512 MB "
        f"**{'pass' if peak <= 512 else 'FAIL'}** |",
        f"| baseline: resident after the function's imports, same process | "
        f"{med('baseline_mb'):.0f} MB | |",
        f"| run time | {med('seconds'):.1f} s | (300 s timeout) |",
        f"| messages extracted | {answer['read_messages']} | {count} |",
        f"| messages folded into the summary | {answer['folded_messages']} | "
        f"{count - args.keep_recent} |",
        f"| messages left verbatim | {first['verbatim']} | {args.keep_recent} |",
        f"| unread after the run | {first['unread']} | 0 |",
        f"| model calls: extraction / summarization | {calls.get('extract', 0)} / "
        f"{calls.get('summarize', 0)} | |",
        f"| embedding calls | {calls.get('embed', 0)} | |",
        f"| memories kept / deduplicated | {answer['kept']} / {answer['deduplicated']} | |",
        f"| model tokens in / out (as the scripted server counts words) | "
        f"{answer['input_tokens']} / {answer['output_tokens']} | |",
        f"| schedule calls: by the {-(-count // 100)} appends / by the run | "
        f"{first['append_arms']} / "
        f"{answer['schedule_calls']} | |",
        "",
        f"Command: `{' '.join(['python -m bench.background', *sys.argv[1:]])}`",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
