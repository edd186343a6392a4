"""Fixtures shared by integration tests: background work (extraction, consolidation), and the
functions' environment of a warm container (``warm_env``)."""

from __future__ import annotations

import pytest

from tests.support.background import DIMS, World
from tests.support.databases import database_client
from tools.scripted_model import ScriptedServer


@pytest.fixture
def scripted():
    """The scripted model and embedder on loopback (``tools.scripted_model``), DIMS wide."""
    server = ScriptedServer(dimensions=DIMS)
    server.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def make_world(client, redis_url):
    """``make(model_server, embed_server, **settings)``: a background ``World`` on the test
    database, closed when the test ends."""
    made = []
    binary = database_client(redis_url, binary=True)

    def make(model_server, embed_server, **settings):
        world = World(client, binary, model_server, embed_server, **settings)
        made.append(world)
        return world

    yield make
    for world in made:
        world.close()


@pytest.fixture
def warm_env(function_env, monkeypatch):
    """The functions' environment with the instance record kept as in AWS (30 s), not
    re-read on every request as the other handler tests ask."""
    monkeypatch.delenv("KIVIDB_INSTANCE_CACHE_SECONDS")
