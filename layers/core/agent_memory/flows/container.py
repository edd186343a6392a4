"""What the use cases need of the container that serves a request: ``Container``, and the
``Caller`` of a request.

``edge.runtime.Runtime`` is the container of a Lambda function (or of the local stack): it
builds each service on first use. The use cases (``flows``) never import it: they ask for
what this protocol names, so the edge builds on the use cases and not the other way round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from agent_memory.clock import Clock
from agent_memory.models import Principal

if TYPE_CHECKING:
    from agent_memory.background.scheduler import Scheduler
    from agent_memory.control.limits import LimitStore
    from agent_memory.control.plane import ControlPlane
    from agent_memory.control.usage import UsageStore
    from agent_memory.providers.client import ProviderClient
    from agent_memory.providers.secrets import Cipher
    from agent_memory.search.cache import IndexCache
    from agent_memory.webhooks.outbox import Outbox


class Container(Protocol):
    """The services of one container, each built when first read (so a use case loads only
    the modules of what it uses)."""

    @property
    def clock(self) -> Clock:
        """The clock every service reads."""
        ...

    @property
    def answer_budget_bytes(self) -> int:
        """The most bytes an answer may take as Lambda carries it (``answers.wire_bytes``)."""
        ...

    @property
    def allow_private_endpoints(self) -> bool:
        """Whether providers and webhooks may call private addresses (the local stack only)."""
        ...

    @property
    def cipher(self) -> Cipher:
        """Encrypts and decrypts provider keys and webhook secrets (``providers.secrets``)."""
        ...

    @property
    def control(self) -> ControlPlane:
        """Organizations, API keys and instances (``control.plane``)."""
        ...

    @property
    def limits(self) -> LimitStore:
        """Rate limits and daily quotas (``control.limits``)."""
        ...

    @property
    def usage(self) -> UsageStore:
        """Usage counters by day (``control.usage``)."""
        ...

    @property
    def outbox(self) -> Outbox:
        """Webhook deliveries waiting to be sent (``webhooks.outbox``)."""
        ...

    @property
    def scheduler(self) -> Scheduler:
        """Arms background runs (``background.scheduler``)."""
        ...

    @property
    def index_cache(self) -> IndexCache:
        """The container's bounded cache of actors' search indexes (``search.cache``)."""
        ...

    @property
    def provider_client(self) -> ProviderClient:
        """Provider calls a request waits for (embedding a text or a query)."""
        ...

    @property
    def rerank_provider_client(self) -> ProviderClient:
        """Provider calls of the rerank stage, which keeps the fused order when they fail."""
        ...

    @property
    def background_provider_client(self) -> ProviderClient:
        """Provider calls of background runs, which no client waits for."""
        ...


@dataclass(frozen=True)
class Caller:
    """Who calls (``principal``: organization, key, scope) and the ``container`` serving the
    request: what a use case of no one store (the organization's stores, its keys, its usage)
    is given."""

    principal: Principal
    container: Container
