"""What a new Lambda container pays to import each function: modules of the layer loaded and
import time, now against a baseline revision, interleaved on this machine.

For every function of ``functions/`` (as template.yaml routes them), a fresh interpreter
(``python -c``, as a new container starts) imports the handler module and reports the time its
import took (``perf_counter`` around it, in the child, so the interpreter's own start is not
counted), how many modules of ``agent_memory`` are loaded, and whether numpy and the X-Ray SDK
are. The authorizer is also invoked once (its first answer, the control database unreachable,
as every cold authorization loads the same modules). The baseline is the project at another
revision (``--baseline``, default ``c10a743``, the layout before the packages), extracted with
``git archive`` into a temporary directory and imported the way it was then (its layer on
``PYTHONPATH``); both run with this virtualenv, alternating baseline and current for each
function and round. Medians over ``--rounds``; each figure's ratio to the baseline's.
Writes ``bench/results/imports.md`` and ``imports.png``.

    python -m bench.imports                      # make bench-imports
    python -m bench.imports --rounds 9 --baseline c10a743
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import redis_client
from agent_memory.memories.models import MemoryIn
from agent_memory.memories.service import Memories
from agent_memory.providers.embeddings import NoEmbedder
from agent_memory.providers.secrets import FernetCipher
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventsRequest
from agent_memory.sessions.service import Sessions
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from local.bootstrap import start_redis_server
from tools.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

CHILD = """
import importlib.util, json, sys, time
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("handler", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
imported = time.perf_counter() - started
layer_at_import = len([name for name in sys.modules if name.startswith("agent_memory")])
numpy_at_import = "numpy" in sys.modules


class Context:
    function_name = {name!r}
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:" + {name!r}
    aws_request_id = "cold"

    def get_remaining_time_in_millis(self):
        return 300_000


event = json.loads({event!r})
started = time.perf_counter()
answer = module.lambda_handler(event, Context())
first = time.perf_counter() - started
status = answer.get("statusCode", 200) if isinstance(answer, dict) else 200
layer = [name for name in sys.modules if name.startswith("agent_memory")]
print(json.dumps({{"ms": imported * 1000, "first_ms": first * 1000, "status": status,
                  "layer_import": layer_at_import, "layer": len(layer),
                  "numpy_import": numpy_at_import, "numpy": "numpy" in sys.modules}}))
"""


def functions(tree: Path) -> list[str]:
    """The functions of ``tree`` with a handler module ``functions/<name>/<name>.py`` and a
    sample event ``events/<name>.json``, by name."""
    found = []
    for folder in sorted((tree / "functions").iterdir()):
        module, event = folder / f"{folder.name}.py", tree / "events" / f"{folder.name}.json"
        if module.is_file() and event.is_file():
            found.append(folder.name)
    return found


class Seeded:
    """A ``redis-server`` of this run holding what the sample events name: organization and
    instance ``local``, the samples' API key, store ``demo`` (the ``put_store`` sample's
    settings, 1,536 dimensions for the ``add_memory`` sample's vector), the ``add_events``
    sample's messages in ``demo-session`` and the ``add_memory`` sample's memory. ``seed``
    makes it so again (a sample may delete what another reads)."""

    def __init__(self, data_dir: Path) -> None:
        from cryptography.fernet import Fernet

        self.server = start_redis_server(data_dir, persist=False)
        self.url = self.server.url + "/0" if self.server.url.count("/") < 3 else self.server.url
        self.secret_key = Fernet.generate_key().decode()
        control = ControlPlane(redis_client(self.url), SystemClock())
        control.create_organization("local")
        control.register_instance("local", "local", self.url)
        headers = json.loads((ROOT / "events" / "authorizer.json").read_text())["headers"]
        control.register_api_key("local", headers["authorization"].split(" ", 1)[1])

    def seed(self) -> None:
        """Store ``demo`` with the samples' session and memory, as the samples expect."""

        def body(name: str) -> dict[str, Any]:
            found: dict[str, Any] = json.loads(
                json.loads((ROOT / "events" / f"{name}.json").read_text())["body"]
            )
            return found

        clock = SystemClock()
        client = redis_client(self.url)
        stores = Stores(client, "local", FernetCipher(self.secret_key.encode()), clock)
        config, _ = stores.put("demo", StorePut(**body("put_store"), dimensions=1536))
        Sessions(StoreDatabase(client, client, config, clock)).append(
            "demo-session", EventsRequest.model_validate(body("add_events"))
        )
        memories = Memories(
            StoreDatabase(client, redis_client(self.url, binary=True), config, clock),
            NoEmbedder(1536),
            IndexCache(),
            "local",
        )
        memories.add(MemoryIn.model_validate(body("add_memory")))

    def stop(self) -> None:
        """Stop the server."""
        self.server.stop()


def _module(tree: Path, name: str) -> Path:
    return tree / "functions" / name / f"{name}.py"


def measure(tree: Path, name: str, database: Seeded, *, layer_path: Path | None) -> dict[str, Any]:
    """One cold import of ``name`` in ``tree``, then its first answer to its sample event
    (``events/<name>.json``), on ``database`` seeded afresh."""
    database.seed()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "KIVIDB_CONTROL_URL": database.url,
        "KIVIDB_SECRET_KEY": database.secret_key,
        "KIVIDB_SCHEDULER": "local",
        "KIVIDB_INSTANCE_CACHE_SECONDS": "0",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "agent-memory",
        "OPENBLAS_NUM_THREADS": "1",
    }
    if layer_path is not None:
        env["PYTHONPATH"] = f"{layer_path}{os.pathsep}{tree}"
    event = (tree / "events" / f"{name}.json").read_text(encoding="utf-8")
    code = CHILD.format(path=str(_module(tree, name)), name=name, event=event)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tree, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name} in {tree}: {done.stderr[-2000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def baseline_tree(revision: str, into: Path) -> Path:
    """The project at ``revision`` (``git archive``), extracted into ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True, check=True
    )
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def run(rounds: int, revision: str) -> dict[str, Any]:
    """Interleaved measurements of every function present in both trees."""
    with tempfile.TemporaryDirectory(prefix="kividb-baseline-") as tmp:
        old = baseline_tree(revision, Path(tmp) / "tree")
        database = Seeded(Path(tmp) / "redis")
        try:
            names = [n for n in functions(ROOT) if n in functions(old)]
            samples: dict[str, dict[str, list[dict[str, Any]]]] = {
                n: {"baseline": [], "now": []} for n in names
            }
            progress = Progress("bench imports")
            for round_ in range(rounds):
                stage = f"round {round_ + 1}/{rounds}"
                for name in progress.each(stage, names, "function"):
                    samples[name]["baseline"].append(
                        measure(old, name, database, layer_path=old / "layers" / "core")
                    )
                    samples[name]["now"].append(measure(ROOT, name, database, layer_path=None))
        finally:
            database.stop()
    return {"revision": revision, "rounds": rounds, "samples": samples}


def _median(items: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(item[key]) for item in items)


def _total(items: list[dict[str, Any]]) -> float:
    return _median(items, "ms") + _median(items, "first_ms")


def write(result: dict[str, Any], out: Path, commit: str) -> None:
    """``imports.md`` (a row per function, with ratios) and ``imports.png``."""
    rev = result["revision"]
    rows = []
    totals = []
    for name, both in result["samples"].items():
        old, new = both["baseline"], both["now"]
        old_total = _median(old, "ms") + _median(old, "first_ms")
        new_total = _median(new, "ms") + _median(new, "first_ms")
        totals.append((old_total, new_total))
        rows.append(
            f"| {name} | {new[-1]['status']} | {int(old[-1]['layer_import'])} / "
            f"{int(old[-1]['layer'])} | {int(new[-1]['layer_import'])} / {int(new[-1]['layer'])} "
            f"| {_median(old, 'ms'):.0f} + {_median(old, 'first_ms'):.0f} ms | "
            f"{_median(new, 'ms'):.0f} + {_median(new, 'first_ms'):.0f} ms | "
            f"{new_total / old_total:.2f}x | {'yes' if new[-1]['numpy'] else 'no'} |"
        )
    old_sum = sum(o for o, _ in totals)
    new_sum = sum(n for _, n in totals)
    lines = [
        "# Cold starts: what a new container loads and takes, per function",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on this project's machine "
        f"({os.cpu_count()} cores) at `{commit}` against `{rev}`: `python -m bench.imports "
        f"--rounds {result['rounds']}` (`make bench-imports`). Each function's handler module "
        "is imported in a fresh interpreter (a new container), then answers its sample event "
        "(`events/<name>.json`) on a local redis-server seeded with what the samples name; "
        f"`{rev}` and now alternate, medians over the rounds. Times: the import, plus the "
        "first answer (what is imported on first use is paid there); the interpreter's own "
        "start is not counted. Modules: how many of `agent_memory` are loaded after the "
        "import / after the first answer.",
        "",
        f"| function | status now | modules `{rev}` | modules now | `{rev}` import + first "
        "answer | now | now / before | numpy now |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"All functions: {new_sum:.0f} ms now against {old_sum:.0f} ms ({new_sum / old_sum:.2f}x).",
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "imports.md").write_text("\n".join(lines), encoding="utf-8")
    _plot(result, out / "imports.png")


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result["samples"])
    old = [_total(result["samples"][n]["baseline"]) for n in names]
    new = [_total(result["samples"][n]["now"]) for n in names]
    figure, axes = plt.subplots(figsize=(10, 6))
    places = range(len(names))
    axes.barh([p + 0.2 for p in places], old, height=0.4, label=result["revision"])
    axes.barh([p - 0.2 for p in places], new, height=0.4, label="now")
    axes.set_yticks(list(places), names)
    axes.set_xlabel("import of the handler module and its first answer, medians (ms)")
    axes.set_title("A new container, per function")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    """Measure and write the results; prints where they are."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", default="c10a743", help="git revision to compare with")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    result = run(args.rounds, args.baseline)
    write(result, args.out, commit)
    print(f"wrote {args.out / 'imports.md'} and imports.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
