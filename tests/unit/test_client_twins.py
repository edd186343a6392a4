"""The synchronous client is generated from the asynchronous one (``tools/unasync_client.py``):
the file on disk is what the generator writes, and every method of one has its twin, with the
same signature, in the other."""

import inspect

import pytest

from kividb_memory import AsyncMemoryClient, AsyncStoreClient, MemoryClient, StoreClient
from tools import unasync_client

TWINS = [(MemoryClient, AsyncMemoryClient), (StoreClient, AsyncStoreClient)]
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}


def test_the_sync_client_is_what_the_generator_writes():
    assert unasync_client.main(["--check"]) == 0


def _public(cls):
    return {
        name
        for name, _ in inspect.getmembers(cls, callable)
        if not name.startswith("_") or name in RENAMED or name in RENAMED.values()
    }


@pytest.mark.parametrize(("sync", "async_"), TWINS)
def test_every_method_has_a_twin_with_the_same_signature(sync, async_):
    names = _public(sync)
    assert {RENAMED.get(name, name) for name in names} == _public(async_)
    for name in names:
        theirs = getattr(async_, RENAMED.get(name, name))
        ours = getattr(sync, name)
        strip = {
            "AsyncMemoryClient": "MemoryClient",
            "AsyncStoreClient": "StoreClient",
            "httpx.AsyncClient": "httpx.Client",
        }
        expected = str(inspect.signature(theirs))
        for old, new in strip.items():
            expected = expected.replace(old, new)
        assert str(inspect.signature(ours)) == expected, name
        if name not in RENAMED and name not in ("store", "__init__", "__repr__"):
            assert inspect.iscoroutinefunction(theirs) and not inspect.iscoroutinefunction(ours)
