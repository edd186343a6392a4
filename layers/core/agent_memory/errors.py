"""Domain errors. Plain exceptions with a stable code; ``edge.http_errors`` maps them to HTTP.

Each class carries ``code`` (the stable machine-readable string clients switch on) and a message
a person can act on. No class knows a status code: that mapping lives in ``edge.http_errors`` only.
"""

from __future__ import annotations

from typing import Any


class AgentMemoryError(Exception):
    """Base of every error the core raises on purpose."""

    code = "error"

    def __init__(self, message: str, *, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class Unauthorized(AgentMemoryError):
    """The API key is missing, malformed, unknown or revoked."""

    code = "unauthorized"


class Forbidden(AgentMemoryError):
    """The API key may not do this: a read-only key's write, or a scoped key managing stores or
    keys. Outside its scope a key gets the 404 a stranger gets instead (``agent_memory.scopes``)."""

    code = "forbidden"


class NotFound(AgentMemoryError):
    """Base of the ``*_not_found`` family."""

    code = "not_found"


class InstanceNotFound(NotFound):
    """No such instance, or it belongs to another organization (the two are indistinguishable)."""

    code = "instance_not_found"

    def __init__(self, instance_id: str) -> None:
        super().__init__(f"Instance '{instance_id}' does not exist in your organization.")


class StoreNotFound(NotFound):
    """No store of that name on the instance. ``next_step``: what the caller can do about it on the
    route that answers (``edge.resolver.Api``'s ``store_not_found_step``), '' where nothing fits."""

    code = "store_not_found"

    def __init__(self, store: str, next_step: str = "") -> None:
        self.store = store
        step = f"; {next_step}" if next_step else ""
        super().__init__(f"Store '{store}' does not exist on this instance{step}.")


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session '{session_id}' does not exist or has expired.")


class MemoryNotFound(NotFound):
    code = "memory_not_found"

    def __init__(self, memory_id: str) -> None:
        super().__init__(f"Memory '{memory_id}' does not exist or has expired.")


class ConsolidationNotFound(NotFound):
    """No consolidation run of that id in the store (or one of an actor the key does not
    reach)."""

    code = "consolidation_not_found"

    def __init__(self, consolidation_id: str) -> None:
        super().__init__(f"Consolidation '{consolidation_id}' does not exist in this store.")


class SupersededNotFound(MemoryNotFound):
    """A memory body's ``supersedes`` names no memory that is kept (or it expired)."""

    def __init__(self, memory_id: str) -> None:
        NotFound.__init__(
            self,
            f"Memory '{memory_id}', named by 'supersedes', does not exist or has expired; "
            "nothing was kept.",
            details=[{"field": "supersedes", "problem": "no such memory"}],
        )


class KeyNotFound(NotFound):
    """No API key of that id in the caller's organization."""

    code = "key_not_found"

    def __init__(self, org_id: str, key_id: str) -> None:
        super().__init__(f"Organization '{org_id}' has no API key '{key_id}'.")


class RouteNotFound(NotFound):
    code = "route_not_found"


class Conflict(AgentMemoryError):
    code = "conflict"


class StoreTooLarge(Conflict):
    """A search or a filtered listing without ``actor_id`` would read more of the store than
    one call may (``memories.reads.STORE_WIDE_MAX_BYTES``)."""

    code = "store_too_large"


class AnswerTooLarge(Conflict):
    """The answer would weigh more than an answer may (``answers``: the function's
    ``answer_budget_bytes``, under Lambda's 6 MB) and the route cannot page it; the message says
    how much and what to ask for instead. Raised by the resolver after the answer is encoded
    (``edge.resolver.Api``), so no route can answer over its budget."""

    code = "answer_too_large"


class ActorMismatch(Conflict):
    """A session already belongs to another actor."""

    code = "actor_mismatch"

    def __init__(self, session_id: str, owner: str | None, given: str) -> None:
        """``owner`` None: not named (to a key limited to actors, another actor's id is not
        shown)."""
        whose = f"actor '{owner}'" if owner is not None else "another actor"
        super().__init__(
            f"Session '{session_id}' belongs to {whose}, not '{given}'; "
            "use a new session id for another actor."
        )


class AlreadySuperseded(Conflict):
    """A memory body's ``supersedes`` names a memory that another memory already replaced:
    only a current memory can be superseded (so a chain never forks)."""

    code = "already_superseded"

    def __init__(self, memory_id: str, superseded_by: str | None) -> None:
        by = f" by '{superseded_by}'" if superseded_by else ""
        newer = f"supersede '{superseded_by}'" if superseded_by else "supersede the current one"
        super().__init__(
            f"Memory '{memory_id}' was already superseded{by}; {newer} instead. Nothing was kept.",
            details=[{"field": "supersedes", "problem": "not current"}],
        )


class SupersedeActorMismatch(Conflict):
    """A memory body's ``supersedes`` names a memory of another actor (or of no actor while the
    body has one, or the other way round): a memory only replaces its own actor's memories."""

    code = "actor_mismatch"

    def __init__(self, memory_id: str) -> None:
        super().__init__(
            f"Memory '{memory_id}' belongs to another actor; a memory can only supersede a "
            "memory of its own actor. Nothing was kept.",
            details=[{"field": "supersedes", "problem": "belongs to another actor"}],
        )


class InstanceConflict(Conflict):
    """An instance registration that would share something with another registration: the
    database is already registered (to another organization, or as another instance of the same
    one), or the instance id is another organization's. The message never names another
    organization."""

    code = "instance_conflict"


class SessionBusy(Conflict):
    """A background run (extraction or summarization) is reading the session: its newest
    message cannot be taken back until the run ends; retry after ``retry_after_seconds``."""

    code = "session_busy"
    retry_after_seconds = 1

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"A background run is reading session '{session_id}' now; retry in a second. "
            "Nothing was removed."
        )


class IdempotencyKeyInProgress(Conflict):
    """A write with this ``Idempotency-Key`` is still running (another call sent it first and
    has not answered yet); retry after ``retry_after_seconds`` to get its answer."""

    code = "idempotency_key_in_progress"
    retry_after_seconds = 1

    def __init__(self) -> None:
        super().__init__(
            "A request with this Idempotency-Key is still running; retry in a second to get "
            "its answer. Nothing was written by this one.",
            details=[{"field": "header.idempotency-key", "problem": "in progress"}],
        )


class RateLimited(AgentMemoryError):
    """Over a limit of the organization or of its key (``control.limits``): 429 with
    ``Retry-After``; nothing was done. ``details`` names the limit."""

    code = "rate_limited"

    def __init__(self, message: str, retry_after_seconds: int, limit: str) -> None:
        super().__init__(message, details=[{"field": limit, "problem": "limit reached"}])
        self.retry_after_seconds = max(1, retry_after_seconds)
        self.limit = limit


class QuotaExceeded(RateLimited):
    """A daily quota is used up (messages or memories added per day, UTC)."""

    code = "quota_exceeded"


class PayloadTooLarge(AgentMemoryError):
    code = "payload_too_large"


class ValidationFailed(AgentMemoryError):
    """Input the models accept field by field but the domain rejects as a whole."""

    code = "validation_error"


class IdempotencyKeyReused(ValidationFailed):
    """An ``Idempotency-Key`` already used, within its 24 hours, for another request (another
    route, path, query or body)."""

    code = "idempotency_key_reused"

    def __init__(self) -> None:
        super().__init__(
            "This Idempotency-Key was already used for a different request in the last 24 "
            "hours; send a new key for a new request. Nothing was written.",
            details=[{"field": "header.idempotency-key", "problem": "used for another request"}],
        )


class DatabaseUnavailable(AgentMemoryError):
    """The Redis-protocol database could not be reached; the client should retry later."""

    code = "database_unavailable"

    retry_after_seconds = 1


class ImportBusy(DatabaseUnavailable):
    """Another import into the store held its import lock for as long as an import waits
    (``memories.transfer.IMPORT_LOCK_WAIT_SECONDS``): the same 503 with Retry-After as
    ``DatabaseUnavailable``, which the client retries (an import is idempotent)."""


class UnreachableDatabase(DatabaseUnavailable):
    """An instance's database could not be reached while it was registered, so its ownership
    marker could not be written; nothing was registered (``register_instance``)."""


class WritesRefused(DatabaseUnavailable):
    """The database answers reads but refuses writes: it is full (``maxmemory`` reached under
    ``noeviction``, reply ``OOM``), a read-only replica (``READONLY``), or cannot persist
    (``MISCONF``: a failed RDB save under ``stop-writes-on-bgsave-error``). The same 503 with
    Retry-After as ``DatabaseUnavailable``; a read skips the writes it makes on the side (see
    ``database.client.unless_writes_refused``)."""


class DatabaseRefused(DatabaseUnavailable):
    """The database was reached but no usable connection could be made to it: it refused the
    connection handshake (``HELLO``), the credentials (``AUTH``) or the database number
    (``SELECT``), or it does not answer in the Redis protocol. The instance's problem, so the
    same 503 with Retry-After as ``DatabaseUnavailable`` on the routes; registering such a
    database is refused (``control.instances.InstanceRegistry.register_instance``), except for
    ``CredentialsRefused``. The message names the reason, never the URL or a password."""


class CredentialsRefused(DatabaseRefused):
    """The database refused the credentials of the instance's URL (``AUTH`` / ``HELLO AUTH``:
    ``WRONGPASS``, ``NOAUTH``). Such a database is registered, without an ownership marker,
    as one that cannot be reached is: its credentials may be set after the registration."""


class SchedulerUnavailable(AgentMemoryError):
    """Background work could not be scheduled or started: EventBridge Scheduler or Lambda answered
    an error or could not be reached (``agent_memory.background.scheduler``). The client should
    retry later; nothing the request wrote is lost."""

    code = "scheduler_unavailable"

    retry_after_seconds = 1


class KeyServiceUnavailable(AgentMemoryError):
    """The key service (KMS) throttled, timed out or failed while a provider API key was being
    encrypted or decrypted; the client should retry later. Nothing was changed."""

    code = "key_service_unavailable"

    retry_after_seconds = 1


class StoredKeyUnreadable(Conflict):
    """A store's stored provider API key cannot be decrypted any more (the encryption key was
    rotated away, disabled or lost); sending the API key again with PUT fixes it."""

    code = "stored_key_unreadable"


class EndpointRefused(ValidationFailed):
    """A custom provider endpoint is not allowed: not ``https://``, or its host resolves to an
    address that is not public (loopback, private, link-local such as cloud metadata, ...).

    The message names the host and the reason, never the full URL or a key.
    """

    code = "endpoint_refused"


class ProviderUnavailable(AgentMemoryError):
    """A model provider could not be reached, timed out, or kept answering 429 / 5xx until the
    retries ran out; the client may retry later.

    ``retry_after_seconds`` is the provider's own ``Retry-After`` when it gave one we would not
    wait for (whole seconds rounded up, at most ``providers.client.RETRY_AFTER_MAX_SECONDS``: an
    hour), else ``None``.
    """

    code = "provider_unavailable"

    def __init__(
        self,
        message: str,
        *,
        retry_after_seconds: int | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.retry_after_seconds = retry_after_seconds


class ProviderRejected(AgentMemoryError):
    """A model provider refused the request (a 4xx other than 429: bad key, unknown model, input
    too long...) or answered something unusable. Retrying the same request will not help.

    ``status`` is the provider's HTTP status when there was one; ``provider_code`` the provider's
    own error code when it had one of a strict shape (``invalid_api_key``, ``rate_limit_error``; see
    ``providers.client.ProviderClient``); ``mentions`` the names of our own request fields that the
    provider's error body names (``{"response_format"}``), so a caller can react to a refused field
    without reading provider text.
    """

    code = "provider_rejected"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        details: list[dict[str, Any]] | None = None,
        provider_code: str | None = None,
        mentions: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(message, details=details)
        self.status = status
        self.provider_code = provider_code
        self.mentions = mentions


class ModelAnswerInvalid(ProviderRejected):
    """The language model answered 200 but not with a usable JSON object: the answer was cut
    off at its token limit, held no JSON object, or held invalid JSON, and asking once more did
    not help. The message says which; it never quotes the answer (it may hold user data)."""

    code = "model_answer_invalid"


class EmbeddingMismatch(ProviderRejected):
    """The embedding provider answered 200 but its vectors do not fit the store: wrong number of
    dimensions, missing or repeated items, or values that are not finite numbers."""

    code = "embedding_mismatch"


class EmbeddingRequired(ValidationFailed):
    """The store has no embedding model (``embed_provider`` is ``none``), so the request must
    carry its own vector."""

    code = "vector_required"

    def __init__(self, field: str | None = None) -> None:
        wanted = f"'{field}'" if field else "'vector' (or 'query_vector' when searching)"
        super().__init__(
            "This store has no embedding model (embed_provider is 'none'), so the request must "
            f"carry {wanted}; or set embed_provider on the store.",
            details=[{"field": field, "problem": "required"}] if field else None,
        )


class VectorInvalid(ValidationFailed):
    """A client-supplied vector has the wrong length, a NaN or infinite value, or is all zeros."""

    code = "vector_invalid"


class KeyedMemoryNotFound(NotFound):
    """No live keyed memory under that namespace and key."""

    code = "keyed_memory_not_found"

    def __init__(self, namespace: list[str], key: str) -> None:
        super().__init__(
            f"No keyed memory under key {key!r} in namespace {namespace!r} (or it expired)."
        )
