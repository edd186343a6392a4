"""Lambda SnapStart for Python: what a function does before Lambda snapshots it and after a
restore (docs/deploy.md, "Cold starts").

With SnapStart (template.yaml, ``SnapStart`` parameter), Lambda runs a version's INIT once when
the version is published, snapshots the process, and starts each new container from that
snapshot instead of importing again. What the snapshot holds is then shared by every container
restored from it, so it must hold nothing that is per container or secret:

- ``before_snapshot`` (the end of INIT, after the imports): does once the first-use work of what
  this function loaded (``warm``: for a function that loaded the search index, a search on
  made-up data, ``search.warm``; for an ``edge.resolver.Api``, Powertools' per-route validation
  models, which it builds at a route's first request), then ``forget``: every per-container
  cache is dropped, so the snapshot keeps no client, connection, settings, API key or
  credential (none is made before a request anyway: every service is built at first use,
  ``edge.runtime``).
- ``after_restore`` (in each restored container, before its first request): ``forget`` again
  (a Redis client or connection made since would point at sockets of the snapshotted process;
  the next request reads the settings again and connects anew), and ``reseed``: Python's
  ``random`` (retry jitter) gets fresh state from the OS, which a snapshot would otherwise give
  every container in the same state. (``secrets``, ``uuid4`` and the ids of
  ``memories.writes`` read the OS's randomness at each call, which Lambda reseeds at restore.)

``register`` hands both to ``snapshot_restore_py`` (AWS's library, which the Python runtimes
include and the layer pins) once per process; ``edge.runtime`` calls it on import, so every
function that reads a setting registers them. Outside Lambda nothing calls the hooks; the local
stack calls them after loading its functions (``local.server``), as SnapStart would.

Modules are looked up in ``sys.modules``: a hook touches only what its function loaded (the
authorizer never loads numpy, ``tests/unit/test_wiring.py``), and imports only what such a
function imports at its first request anyway (``FIRST_USE_IMPORTS``).
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Callable
from typing import Any

FIRST_USE_IMPORTS = (
    (
        "agent_memory.memories.service",
        ("agent_memory.providers.factory", "agent_memory.control.limits"),
    ),
)
"""``(module, modules)``: a function that loaded ``module`` imports ``modules`` at its first
request (measured: the first recall of a new process imported these, 0.1 s of it on this
project's loaded machine), so ``warm`` imports them before the snapshot."""

PER_CONTAINER_CACHES = (
    ("agent_memory.providers.secrets", "kms_client"),
    ("agent_memory.providers.bedrock", "default_credentials"),
    ("agent_memory.background.scheduler", "_aws_client"),
    ("agent_memory.stores.registry", "stored_config"),
    ("agent_memory.stores.freshness", "forget_all"),
)
"""``(module, function)``: the caches of a container, outside its runtimes, that ``forget``
clears when the module is loaded (and has it): a ``functools`` cache's ``cache_clear``, else
the function itself, which clears. The AWS clients, botocore's credentials, the stores' parsed
settings and their registry entries as read last."""

_registered = False
_forgetters: list[Callable[[], None]] = []


def on_forget(forget: Callable[[], None]) -> Callable[[], None]:
    """Add ``forget`` to what ``forget`` calls: a per-container cache's clear (a module of
    the edge that keeps one registers it here); ``forget`` returned, as a decorator."""
    _forgetters.append(forget)
    return forget


def _loaded(name: str) -> Any:
    """The module ``name`` when this process has imported it, else None (never imports)."""
    return sys.modules.get(name)


def warm() -> list[str]:
    """Do the first-use work of what this process loaded (module docstring); the names of
    what was warmed, in order."""
    done = []
    for trigger, modules in FIRST_USE_IMPORTS:
        if _loaded(trigger) is not None:
            for name in modules:
                importlib.import_module(name)
            done.append(f"imports:{len(modules)}")
    if _loaded("agent_memory.search.index") is not None:
        from agent_memory.search.warm import warm_search

        warm_search()
        done.append("search")
    resolver = _loaded("agent_memory.edge.resolver")
    if resolver is not None:
        routes = 0
        for api in resolver.Api.instances():
            routes += api.prepare_routes()
        done.append(f"routes:{routes}")
    return done


def forget() -> list[str]:
    """Drop every per-container cache of what this process loaded: the runtimes (and with
    them their clients, settings, cipher and index cache), the Redis clients, the AWS clients
    and credentials, and what ``on_forget`` registered; the names of what was dropped."""
    dropped = []
    resolver = _loaded("agent_memory.edge.resolver")
    if resolver is not None:
        for api in resolver.Api.instances():
            api.forget_request()
        dropped.append("requests")
    runtime = _loaded("agent_memory.edge.runtime")
    if runtime is not None:
        runtime.forget_runtimes()
        dropped.append("runtimes")
    client = _loaded("agent_memory.database.client")
    if client is not None:
        client.redis_client.disconnect_all()
        dropped.append("redis clients")
    for module, cached in PER_CONTAINER_CACHES:
        found = getattr(_loaded(module), cached, None)
        if found is not None:
            getattr(found, "cache_clear", found)()
            dropped.append(f"{module}.{cached}")
    for forget_one in _forgetters:
        forget_one()
        dropped.append(getattr(forget_one, "__qualname__", repr(forget_one)))
    return dropped


def reseed() -> None:
    """Fresh state for Python's ``random`` from the OS (every restored container its own)."""
    random.seed()


def before_snapshot() -> None:
    """The hook Lambda runs before it takes the snapshot: ``warm``, then ``forget``."""
    warm()
    forget()


def after_restore() -> None:
    """The hook Lambda runs in a restored container before its first request: ``forget``
    (reconnect at the next request, with the settings read again), then ``reseed``."""
    forget()
    reseed()


def register() -> bool:
    """Register ``before_snapshot`` and ``after_restore`` with ``snapshot_restore_py``, once
    per process; False when that library is not installed (nothing to register with)."""
    global _registered
    if _registered:
        return True
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:  # pragma: no cover - pinned in the layer, and in Lambda's runtime
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    _registered = True
    return True


def run_hooks() -> None:
    """Run every registered hook as SnapStart would with no snapshot in between: the
    before-snapshot ones in reverse order of registration, then the after-restore ones in
    order (AWS's documented order); what the local stack does after loading its functions."""
    try:
        from snapshot_restore_py import get_after_restore, get_before_snapshot
    except ImportError:  # pragma: no cover
        return
    for hook in reversed(get_before_snapshot()):
        _call(hook)
    for hook in get_after_restore():
        _call(hook)


def _call(hook: Any) -> None:
    """Call one registry entry: ``(function, args, kwargs)`` as the library keeps them."""
    function, args, kwargs = hook
    function(*args, **kwargs)
