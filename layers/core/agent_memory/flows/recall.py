"""The use case an agent calls before its next model call: ``recall``."""

from __future__ import annotations

from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.memories.models import RecallRequest, RecallView
from agent_memory.memories.recall import recall as recall_memory


def recall_view(store: StoreHandle, request: RecallRequest) -> RecallView:
    """The session's working memory, the actor's profile and the actor's memories most
    relevant to the query (``memories.recall.recall``), within the answer's byte budget. The
    actor is the one the key may name (``reach.actor``); a key limited to actors sees another
    actor's session as a new conversation. A read (``StoreHandle.read``)."""

    def recall(store: StoreHandle) -> RecallView:
        asked = request.model_copy(update={"actor_id": reach.actor(store, request.actor_id)})
        budget = store.container.answer_budget_bytes
        profiles = store.profiles if store.config.profile_fields else None
        return recall_memory(
            store.sessions, store.memories, store.config, asked, budget, store.actors, profiles
        )

    return store.read(recall)
