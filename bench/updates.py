"""Knowledge updates through extraction: does the newer fact win, and does the stale one go?

Scripted fact pairs (an old value, a newer value, a question) for many actors go through the
real background extraction (``agent_memory.background.work.SessionWork``, in this process, on a
``redis-server`` of its own) with ``tools.scripted_model`` as language and embedding model on
loopback HTTP (a rule-based OpenAI-shaped server, see its docstring: it names a shown memory in
``supersedes`` when a sentence has the same subject). Each actor says, in a first session, the
old values of six subjects and thirty unrelated things (so the extraction prompt, which shows
at most 20 related memories, must find the right one); a day later, in a second session, the
newer values of five of the six subjects. Then each question is searched the way recall does
(hybrid, the actor's current memories, the question embedded by the store).

Two stores run side by side on the same data: one whose model supersedes, and one whose model
never does (``--no-supersede``: extraction as it was before memories could be replaced, each
new fact a plain add, deduplicated at ``dedupe_threshold``). Measured per store:

- update share: questions whose top memory holds the newer value;
- stale share: questions whose default search (top 10) holds the old value anywhere;
- both current: subjects with the old and the newer value current at once (listing);
- unchanged kept: the sixth subject of each actor, never restated, still current (a model that
  superseded unrelated facts would lose it);
- history kept: old values still readable with ``include_superseded``.

Writes ``bench/results/updates.md`` and ``bench/results/updates.png``.

    python -m bench.updates                 # 60 actors x 5 pairs = 300 questions
    python -m bench.updates --actors 10
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import redis
from cryptography.fernet import Fernet

from agent_memory.background.scheduler import ExtractionTarget, LocalScheduler
from agent_memory.background.work import SessionWork
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.memories.models import SearchRequest
from agent_memory.memories.service import Memories
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.factory import make_embedder, make_language_model
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.secrets import FernetCipher
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from agent_memory.search.cache import IndexCache
from agent_memory.search.selection import Selection
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.sessions.service import Sessions
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import start_redis_server
from tools.progress import Progress
from tools.scripted_model import ScriptedServer

RESULTS = ROOT / "bench" / "results"
DIMENSIONS = 384

# (kind, question, old sentence, newer sentence, values): the sentences take {old} / {new}.
ATTRIBUTES: list[tuple[str, str, str, str, list[str]]] = [
    (
        "attribute",
        "What is my favorite color?",
        "My favorite color is {v}.",
        "My favorite color is {v} now.",
        ["blue", "green", "crimson", "purple", "yellow", "orange", "teal", "magenta"],
    ),
    (
        "attribute",
        "What is my favorite food?",
        "My favorite food is {v}.",
        "My favorite food is {v} these days.",
        ["pizza", "sushi", "tacos", "ramen", "paella", "curry", "pierogi", "falafel"],
    ),
    (
        "attribute",
        "What is my car?",
        "My car is a {v}.",
        "My car is a {v} since last week.",
        ["Toyota", "Honda", "Tesla", "Volvo", "Subaru", "Peugeot", "Skoda", "Mazda"],
    ),
    (
        "attribute",
        "What is my phone?",
        "My phone is a {v}.",
        "My phone is a {v} now.",
        ["iPhone", "Pixel", "Galaxy", "Xperia", "Fairphone", "Nokia", "Motorola", "OnePlus"],
    ),
    (
        "attribute",
        "What is my favorite sport?",
        "My favorite sport is {v}.",
        "My favorite sport is {v} nowadays.",
        ["tennis", "soccer", "chess", "rowing", "climbing", "cycling", "fencing", "curling"],
    ),
    (
        "attribute",
        "What is my dog's name?",
        "My dog's name is {v}.",
        "My dog's name is {v}; we renamed him.",
        ["Rex", "Bella", "Milo", "Luna", "Biscuit", "Pepper", "Nala", "Ziggy"],
    ),
    (
        "group",
        "Where do I work?",
        "I work at {v}.",
        "I work at {v} now.",
        ["Northwind", "Contoso", "Fabrikam", "Initech", "Globex", "Umbrella", "Hooli", "Vandelay"],
    ),
    (
        "group",
        "Where do I live?",
        "I live in {v}.",
        "We moved to {v} last month.",
        ["Lisbon", "Porto", "Madrid", "Oslo", "Vienna", "Prague", "Dublin", "Krakow"],
    ),
    (
        "group",
        "What do I eat, am I vegetarian?",
        "I am {v}.",
        "I started eating {v} again.",
        ["vegetarian", "vegan", "pescatarian", "fish", "meat", "chicken", "beef", "seafood"],
    ),
]
VERBS = [
    "visited",
    "painted",
    "photographed",
    "sketched",
    "cleaned",
    "repaired",
    "measured",
    "admired",
    "found",
    "counted",
    "followed",
    "described",
    "noticed",
    "guarded",
    "sold",
]
NOUNS = [
    "museum",
    "library",
    "harbour",
    "market",
    "theatre",
    "park",
    "gallery",
    "beach",
    "bakery",
    "cinema",
    "garden",
    "castle",
    "bridge",
    "station",
    "festival",
    "tower",
    "chapel",
    "orchard",
    "lighthouse",
    "canal",
    "meadow",
    "quarry",
    "stadium",
    "pier",
    "vineyard",
    "monastery",
    "windmill",
    "greenhouse",
    "aquarium",
    "observatory",
]
"""Words of the unrelated things each actor says (``I <verb> the <noun> near the <noun>.``):
no subject for the scripted model, and distinct enough not to be near duplicates."""


@dataclass
class Pair:
    """One scripted update: an actor's old and newer value of a subject, and the question."""

    actor: str
    kind: str
    question: str
    old: str
    new: str


@dataclass
class Actor:
    """What one actor says in each session, and its pairs and its unchanged subject."""

    actor_id: str
    first: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    unchanged: str = ""


def scripted_actors(count: int, seed: int = 7) -> list[Actor]:
    """``count`` actors, each with six subjects (five changed, one not) and thirty fillers."""
    rng = random.Random(seed)
    actors = []
    for n in range(count):
        actor = Actor(f"user-{n:03d}")
        subjects = rng.sample(ATTRIBUTES, 6)
        diet_values = ["vegetarian", "vegan", "pescatarian"], ["fish", "meat", "chicken"]
        for position, (kind, question, old_text, new_text, values) in enumerate(subjects):
            if "eat" in question:  # the diet story: an old diet, then eating something again
                old, new = rng.choice(diet_values[0]), rng.choice(diet_values[1])
            else:
                old, new = rng.sample(values, 2)
            actor.first.append(old_text.format(v=old))
            if position < 5:
                actor.second.append(new_text.format(v=new))
                actor.pairs.append(Pair(actor.actor_id, kind, question, old, new))
            else:
                actor.unchanged = old
        places = rng.sample(NOUNS, 30)
        actor.first += [
            f"I {rng.choice(VERBS)} the {places[k]} near the {places[(k + 7) % 30]}."
            for k in range(30)
        ]
        rng.shuffle(actor.first)
        actors.append(actor)
    return actors


class Clock:
    """A clock the benchmark moves (a day between the sessions), on whole milliseconds."""

    def __init__(self) -> None:
        now = datetime.now(UTC)
        self.moment = now.replace(microsecond=now.microsecond // 1000 * 1000)

    def now(self) -> datetime:
        return self.moment


@dataclass
class Outcome:
    """What one store measured."""

    mode: str
    questions: int = 0
    updated: int = 0
    stale: int = 0
    both_current: int = 0
    unchanged_kept: int = 0
    unchanged_total: int = 0
    history_kept: int = 0
    superseded: int = 0
    linked: int = 0
    found_new: int = 0
    ignored: int = 0
    kept: int = 0
    deduplicated: int = 0
    model_calls: int = 0
    seconds: float = 0.0
    by_kind: dict[str, list[int]] = field(default_factory=dict)


def run_store(url: str, server: ScriptedServer, actors: list[Actor], mode: str) -> Outcome:
    """Both sessions of every actor through extraction on a new store whose models are
    ``server``; then the questions. Errors propagate (a failed run is a failed benchmark)."""
    client = redis.Redis.from_url(url, decode_responses=True)
    binary = redis.Redis.from_url(url)
    clock = Clock()
    stores = Stores(
        client, "bench", FernetCipher(Fernet.generate_key()), clock, allow_private_endpoints=True
    )
    name = f"updates-{mode.replace(' ', '-')}-{time.time_ns()}"
    config, _ = stores.put(
        name,
        StorePut(
            llm_provider="custom",
            llm_model="scripted",
            llm_base_url=server.url,
            embed_provider="custom",
            embed_model="scripted",
            embed_base_url=server.url,
            dimensions=DIMENSIONS,
            extraction_delay_seconds=30,
            summarize_after=1000,
            keep_recent=12,
            session_ttl_seconds=7 * 86_400,
        ),
    )
    provider = ProviderClient(CallPolicy(max_retries=0, read_timeout=30))
    embedder = make_embedder(
        ProviderSetting("embed", "custom", "scripted", server.url, None, None),
        DIMENSIONS,
        Outbound(provider, True, in_the_clear),
    )
    model = make_language_model(
        ProviderSetting("llm", "custom", "scripted", server.url, None, None),
        Outbound(provider, True, in_the_clear),
    )
    memories = Memories(
        StoreDatabase(client, binary, config, clock), embedder, IndexCache(), "bench"
    )
    sessions = Sessions(StoreDatabase(stores.client, stores.client, config, stores.clock))
    scheduler = LocalScheduler(client, clock, keys=LocalScheduleKeys(name))
    outcome = Outcome(mode)
    started = time.perf_counter()
    try:
        for day, attribute in ((0, "first"), (1, "second")):
            if day:
                clock.moment += timedelta(days=1)
            stage = f"{mode}: session {day + 1}"
            for actor in Progress("bench updates").each(stage, actors, "actor"):
                session = f"{actor.actor_id}-s{day + 1}"
                events = [EventIn(role="user", content=c) for c in getattr(actor, attribute)]
                sessions.append_events(
                    session, EventsRequest(actor_id=actor.actor_id, events=events)
                )
            clock.moment += timedelta(seconds=31)  # quiet for extraction_delay_seconds
            for actor in actors:
                target = ExtractionTarget("bench", name, f"{actor.actor_id}-s{day + 1}")
                report = SessionWork(
                    StoreDatabase(client, client, config, clock), memories, model, scheduler, target
                ).run()
                if report.outcome != "done":
                    raise RuntimeError(f"extraction {report.outcome}: {report.error}")
                outcome.superseded += report.superseded
                outcome.ignored += report.ignored_supersedes
                outcome.kept += report.kept
                outcome.deduplicated += report.deduplicated
                outcome.model_calls += report.model_calls
        outcome.seconds = time.perf_counter() - started
        measure(memories, actors, outcome)
    finally:
        stores.delete(name)
    return outcome


def _holds(text: str, value: str) -> bool:
    """Whether ``text`` says ``value`` as a word (not inside another: "green" in "greenhouse")."""
    return re.search(rf"\b{re.escape(value)}\b", text, flags=re.IGNORECASE) is not None


def measure(memories: Memories, actors: list[Actor], outcome: Outcome) -> None:
    """The questions and the listings of every actor, into ``outcome``."""
    for actor in actors:
        current = [m.text for m in memories.page(0, 100, actor.actor_id, None).memories]
        everything = memories.page(
            0, 100, actor.actor_id, None, Selection(include_superseded=True)
        ).memories
        outcome.unchanged_total += 1
        outcome.unchanged_kept += any(_holds(t, actor.unchanged) for t in current)
        for pair in actor.pairs:
            found = memories.search(
                SearchRequest(query=pair.question, mode="hybrid", actor_id=actor.actor_id, limit=10)
            )
            updated = bool(found) and _holds(found[0].text, pair.new)
            outcome.found_new += any(_holds(m.text, pair.new) for m in found)
            newer = [m for m in everything if _holds(m.text, pair.new) and m.supersedes]
            replaced = {m.id: m for m in everything}
            outcome.linked += any(
                m.supersedes in replaced and _holds(replaced[m.supersedes].text, pair.old)
                for m in newer
            )
            stale = any(_holds(m.text, pair.old) for m in found)
            outcome.questions += 1
            outcome.updated += updated
            outcome.stale += stale
            counts = outcome.by_kind.setdefault(pair.kind, [0, 0, 0])
            counts[0] += 1
            counts[1] += updated
            counts[2] += stale
            outcome.both_current += any(_holds(t, pair.old) for t in current) and any(
                _holds(t, pair.new) for t in current
            )
            outcome.history_kept += any(_holds(m.text, pair.old) for m in everything)


def share(part: int, whole: int) -> str:
    """``part / whole`` as a share with three decimals."""
    return f"{part / whole:.3f}" if whole else "-"


def report(outcomes: list[Outcome], args: argparse.Namespace, wall: float) -> str:
    """The results file: the measures of both stores side by side."""
    head = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    ).stdout.strip()
    on, off = outcomes
    rows = [
        ("update share: top memory holds the newer value", "updated", "questions"),
        ("the newer value anywhere in the top 10", "found_new", "questions"),
        ("the newer memory supersedes the older (its chain)", "linked", "questions"),
        ("stale share: the old value in the default top 10", "stale", "questions"),
        ("both values current (listing)", "both_current", "questions"),
        ("unchanged subject still current", "unchanged_kept", "unchanged_total"),
        ("old value readable with include_superseded", "history_kept", "questions"),
    ]
    lines = [
        "# Knowledge updates through extraction",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on this project's machine at commit "
        f"`{head}`, in {wall:.0f} s. {args.actors} actors; each says the old values of six "
        "subjects and 30 unrelated things in a first session and, a day later, newer values "
        f"of five of them: {on.questions} fact pairs and questions (`bench/updates.py`). Both "
        "sessions go through the background extraction (`SessionWork.run`) with "
        "`tools.scripted_model` on loopback HTTP as language and embedding model; the "
        "questions are hybrid searches of the actor's current memories (as recall ranks). "
        "Left: the model names the memory a new fact replaces (`supersedes`, among the "
        "at most 20 related memories it is shown). Right: the same model never does "
        "(`--no-supersede`): each newer fact is a plain add, as before this change.",
        "",
        "| measure | supersede | plain add |",
        "|---|---|---|",
    ]
    for label, part, whole in rows:
        lines.append(
            f"| {label} | {share(getattr(on, part), getattr(on, whole))} "
            f"({getattr(on, part)}/{getattr(on, whole)}) | "
            f"{share(getattr(off, part), getattr(off, whole))} "
            f"({getattr(off, part)}/{getattr(off, whole)}) |"
        )
    for kind in sorted(on.by_kind):
        a, b = on.by_kind[kind], off.by_kind.get(kind, [0, 0, 0])
        lines.append(
            f"| update share, {kind} subjects ({a[0]} questions) | {share(a[1], a[0])} | "
            f"{share(b[1], b[0])} |"
        )
        lines.append(
            f"| stale share, {kind} subjects | {share(a[2], a[0])} | {share(b[2], b[0])} |"
        )
    lines += [
        f"| memories kept / deduplicated | {on.kept} / {on.deduplicated} | "
        f"{off.kept} / {off.deduplicated} |",
        f"| supersedes kept / ignored | {on.superseded} / {on.ignored} | "
        f"{off.superseded} / {off.ignored} |",
        f"| model calls | {on.model_calls} | {off.model_calls} |",
        f"| extraction time (both sessions) | {on.seconds:.1f} s | {off.seconds:.1f} s |",
        "",
        '"attribute" subjects are said as "My X is V" (the scripted model\'s subject is X); '
        '"group" subjects (work, home, diet) by sentences the scripted model groups by word '
        'lists ("I live in Lisbon", later "We moved to Porto last month"). The scripted '
        'embedding is a bag of hashed words, so it puts "I started eating fish again" no '
        'nearer "I am vegetarian" than any other memory: a group memory is shown to the model '
        "only when the per-message hybrid search ranks it among the 20 related ones (the "
        'chain row), and a question such as "Where do I live?" finds "We moved to Porto" '
        "only when words or hashing happen to meet (the top-10 row, the same for both "
        "stores: it is retrieval, not updating). A real embedding model relates such texts. "
        "These figures measure the service's part (what is shown, what is superseded, how "
        "every read follows it) with a deterministic stand-in, not a model's judgement.",
        "",
        f"Command: `{' '.join(['python -m bench.updates', *sys.argv[1:]])}`",
        "",
    ]
    return "\n".join(lines)


def plot(outcomes: list[Outcome], path: Path) -> None:
    """Bars of the update and stale shares of both stores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = ["update share", "stale share", "both current"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.38
    for offset, outcome, colour in (
        (-width / 2, outcomes[0], "#2a7"),
        (width / 2, outcomes[1], "#c54"),
    ):
        values = [
            outcome.updated / outcome.questions,
            outcome.stale / outcome.questions,
            outcome.both_current / outcome.questions,
        ]
        bars = ax.bar(
            [i + offset for i in range(3)], values, width, label=outcome.mode, color=colour
        )
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks(range(3), labels)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f"share of {outcomes[0].questions} questions")
    ax.set_title("Knowledge updates through extraction (scripted model)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run both stores, write ``updates.md`` and ``updates.png`` to ``--out``; exit 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.updates")
    parser.add_argument("--actors", type=int, default=60)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--no-plot",
        action="store_true",
        help="write updates.md only (the test suite's run: matplotlib is a bench requirement)",
    )
    args = parser.parse_args(argv)
    actors = scripted_actors(args.actors)
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    with TemporaryDirectory() as data:
        database = start_redis_server(Path(data), persist=False)
        servers = [ScriptedServer(supersede=True), ScriptedServer(supersede=False)]
        try:
            for server in servers:
                server.start()
            for server, mode in zip(servers, ("supersede", "plain add"), strict=True):
                outcomes.append(run_store(database.url, server, actors, mode))
        finally:
            for server in servers:
                server.shutdown()
                server.server_close()
            database.stop()
    text = report(outcomes, args, time.perf_counter() - started)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "updates.md").write_text(text, encoding="utf-8")
    if not args.no_plot:
        plot(outcomes, args.out / "updates.png")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
