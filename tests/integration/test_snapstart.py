"""SnapStart's hooks (agent_memory.edge.snapstart) run as Lambda runs them, in a process of their
own: the functions are loaded (which registers the hooks), requests are served, the
before-snapshot hooks run, then the process forks twice, as two containers restored from one
snapshot, and each runs the after-restore hooks and serves a request."""

import json
import os
import subprocess
import sys

import redis

from tests.support.common import ROOT, unique
from tests.support.handlers import build, invoke

SCRIPT = r"""
import gc, json, os, random, sys
from pydantic import SecretStr
import redis
from snapshot_restore_py import get_after_restore, get_before_snapshot
from tests.support.handlers import HANDLERS, build, invoke
from tests.support.databases import Tenant

tenant = Tenant(**json.loads(sys.argv[1]))
store, reseed = sys.argv[2], sys.argv[3] == "1"
from agent_memory.database.client import redis_client
from agent_memory.edge import runtime, snapstart
from agent_memory.edge.resolver import Api
from agent_memory.edge.settings import FunctionSettings
from agent_memory.stores.models import StoreConfig

out = {}
for name in ("put_store", "recall", "search_memories"):
    HANDLERS[name].load()
out["before"] = [f.__qualname__ for f, _, _ in get_before_snapshot()]
out["after"] = [f.__qualname__ for f, _, _ in get_after_restore()]
# Requests before the snapshot, as if INIT had made them: settings read, clients connected,
# the store's settings read.
status, _, _ = invoke("put_store", build("put_store", tenant, store))
out["put"] = status
status, body, _ = invoke("recall", build("recall", tenant, store))
out["recall"] = status
out["client_id"] = redis_client(os.environ["KIVIDB_CONTROL_URL"]).client_id()
routes = [r for api in Api.instances() for r in api._static_routes + api._dynamic_routes]
out["cold_routes"] = sum(r._dependant is None for r in routes)
if reseed:  # else a snapshot taken without the hooks
    for function, args, kwargs in reversed(get_before_snapshot()):
        function(*args, **kwargs)
out["warm_routes"] = sum(r._dependant is not None for r in routes)
gc.collect()
alive = gc.get_objects()
secret = os.environ["KIVIDB_SECRET_KEY"]
out["held"] = {
    "settings": sum(isinstance(o, FunctionSettings) for o in alive),
    "runtimes": sum(isinstance(o, runtime.Runtime) for o in alive),
    "store_configs": sum(isinstance(o, StoreConfig) for o in alive),
    "secrets": sum(isinstance(o, SecretStr) and o.get_secret_value() == secret for o in alive),
    "connected": sum(
        isinstance(o, redis.connection.AbstractConnection) and o._sock is not None for o in alive
    ),
}
print(json.dumps(out), flush=True)
sys.stdout.flush()
snapshot_random = random.getstate()
readers = []
for child in range(2):  # two containers restored from this one snapshot
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        # A fork reseeds ``random`` (its at-fork hook); a restored snapshot does not: the
        # state as the snapshot holds it.
        random.setstate(snapshot_random)
        seen = {}
        if reseed:  # (without, both would share the snapshot's one connection)
            for function, args, kwargs in get_after_restore():
                function(*args, **kwargs)
            status, body, _ = invoke("recall", build("recall", tenant, store))
            seen["recall"] = status
            seen["client_id"] = redis_client(os.environ["KIVIDB_CONTROL_URL"]).client_id()
        seen["random"] = random.random()
        os.write(write, json.dumps(seen).encode())
        os._exit(0)
    os.close(write)
    readers.append(read)
children = []
for read in readers:
    with os.fdopen(read) as pipe:
        children.append(json.loads(pipe.read()))
    os.wait()
print(json.dumps(children), flush=True)
"""


def _restore(tenant, store, *, hooks):
    env = {
        **os.environ,
        "KIVIDB_CONTROL_URL": os.environ["KIVIDB_CONTROL_URL"],
        "POWERTOOLS_METRICS_DISABLED": "true",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    fields = {
        "org_id": tenant.org_id,
        "instance_id": tenant.instance_id,
        "api_key": tenant.api_key,
        "key_id": tenant.key_id,
        "control": None,
        "url": tenant.url,
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(fields), store, "1" if hooks else "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    # The store goes with the test (the next test's tenant reuses the database).
    invoke("delete_store", build("delete_store", tenant, store))
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("{", "["))]
    return json.loads(lines[0]), json.loads(lines[1])


def test_the_hooks_warm_forget_everything_per_container_and_reseed_each_restore(
    tenant, function_env, redis_url
):
    store = unique("store")
    before, restored = _restore(tenant, store, hooks=True)
    # Registered once each, by importing the functions (edge.runtime registers them).
    assert before["before"] == ["before_snapshot"] and before["after"] == ["after_restore"]
    assert before["put"] == 201 and before["recall"] == 200
    # Powertools' per-route validation models were built before the snapshot.
    assert before["cold_routes"] > 0 and before["warm_routes"] >= before["cold_routes"]
    # Nothing per container in the snapshot: no settings (with the secret key), runtime,
    # store settings or open connection.
    assert before["held"] == {
        "settings": 0,
        "runtimes": 0,
        "store_configs": 0,
        "secrets": 0,
        "connected": 0,
    }
    listed = redis.Redis.from_url(redis_url).client_list()
    assert before["client_id"] not in [int(c["id"]) for c in listed]  # closed, not left open
    # Each restored container serves its request on a connection of its own, and draws its
    # own random numbers.
    assert [c["recall"] for c in restored] == [200, 200]
    ids = {c["client_id"] for c in restored}
    assert len(ids) == 2 and before["client_id"] not in ids
    assert restored[0]["random"] != restored[1]["random"]


def test_without_the_hooks_a_snapshot_keeps_settings_connections_and_random_state(
    tenant, function_env
):
    # What the hooks are for: a process forked as it is shares its state.
    store = unique("store")
    before, restored = _restore(tenant, store, hooks=False)
    assert before["held"]["settings"] >= 1 and before["held"]["runtimes"] >= 1
    assert before["held"]["secrets"] >= 1 and before["held"]["connected"] >= 1
    assert restored[0]["random"] == restored[1]["random"]
