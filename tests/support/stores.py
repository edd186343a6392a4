"""Building the services of a store the way the runtime does, for tests that hold a
``Stores``."""

from agent_memory.sessions.service import Sessions
from agent_memory.stores.database import StoreDatabase
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import Stores


def sessions_of(stores: Stores, config: StoreConfig) -> Sessions:
    """The working memory of store ``config`` of ``stores``'s instance."""
    return Sessions(StoreDatabase(stores.client, stores.client, config, stores.clock))
