"""Fixtures shared by the integration tests of background work (extraction, consolidation)."""

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
