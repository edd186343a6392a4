"""A store with loopback model servers, a counting local scheduler and a clock moved by hand."""

from __future__ import annotations

from datetime import timedelta

from cryptography.fernet import Fernet

from agent_memory.background.scheduler import ExtractionTarget, LocalScheduler
from agent_memory.background.triggers import schedule_background
from agent_memory.background.work import SessionWork
from agent_memory.database.keys import LocalScheduleKeys
from agent_memory.memories.profiles import Profiles
from agent_memory.memories.service import Memories
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.factory import make_embedder, make_language_model
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.secrets import FernetCipher
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StorePut
from agent_memory.stores.registry import Stores
from tests.support.clocks import MovableClock
from tests.support.common import unique
from tests.support.stores import sessions_of

DIMS = 16


class CountingScheduler:
    """The local scheduler, counting the calls made to it (the port's calls, not a fake)."""

    def __init__(self, inner: LocalScheduler) -> None:
        self.inner = inner
        self.arms: list = []
        self.runs: list = []

    def arm(self, target, due):
        self.arms.append((target, due))
        self.inner.arm(target, due)

    def run_now(self, target):
        self.runs.append(target)
        self.inner.run_now(target)


class World:
    def __init__(self, client, binary, model_server, embed_server, **settings):
        self.client = client
        self.clock = MovableClock()
        moment = self.clock.moment  # whole milliseconds, as the store keeps times
        self.clock.moment = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
        self.model_server = model_server
        stores = Stores(
            client,
            "db",
            FernetCipher(Fernet.generate_key()),
            self.clock,
            allow_private_endpoints=True,
        )
        self.stores = stores
        self.name = unique("bg")
        settings.setdefault("extraction_delay_seconds", 60)
        self.config, _ = stores.put(
            self.name,
            StorePut(
                llm_provider="custom",
                llm_model="scripted",
                llm_base_url=model_server.url,
                embed_provider="custom",
                embed_model="fake",
                embed_base_url=embed_server.url,
                dimensions=DIMS,
                **settings,
            ),
        )
        self.sessions = sessions_of(stores, self.config)
        provider = ProviderClient(CallPolicy(max_retries=0, read_timeout=10))
        embedder = make_embedder(
            ProviderSetting("embed", "custom", "fake", embed_server.url, None, None),
            DIMS,
            Outbound(provider, True, in_the_clear),
        )
        self.memories = Memories(
            StoreDatabase(client, binary, self.config, self.clock), embedder, IndexCache(), "test"
        )
        self.model = make_language_model(
            ProviderSetting("llm", "custom", "scripted", model_server.url, None, None),
            Outbound(provider, True, in_the_clear),
        )
        self.scheduler = CountingScheduler(
            LocalScheduler(client, self.clock, keys=LocalScheduleKeys(unique("ns")))
        )

    def target(self, session_id):
        return ExtractionTarget("db", self.name, session_id)

    def say(self, session_id, *contents, actor="alice"):
        appended = self.sessions.append_events(
            session_id,
            EventsRequest(
                actor_id=actor, events=[EventIn(role="user", content=c) for c in contents]
            ),
        )
        # What the events function does after an append (functions/add_events).
        schedule_background(self.scheduler, self.sessions, self.target(session_id), appended)
        return appended

    def run(self, session_id, *, model=...):
        work = SessionWork(
            StoreDatabase(self.client, self.client, self.config, self.clock),
            self.memories,
            self.model if model is ... else model,
            self.scheduler,
            self.target(session_id),
        )
        return work.run()

    def quiet(self):
        self.clock.moment += timedelta(seconds=self.config.extraction_delay_seconds + 1)

    def profiles(self):
        """The store's actors' profiles (``memories.profiles``)."""
        return Profiles(StoreDatabase(self.client, self.client, self.config, self.clock))

    def texts(self, actor="alice"):
        return sorted(m.text for m in self.memories.page(0, 100, actor, None).memories)

    def meta(self, session_id):
        return self.sessions.get(session_id, 1000)

    def close(self):
        self.stores.delete(self.name)
