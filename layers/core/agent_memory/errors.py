"""Domain errors. Plain exceptions with a stable code; ``api.error_response`` maps them to HTTP.

Each class carries ``code`` (the stable machine-readable string clients switch on) and a message
a person can act on. No class knows a status code: that mapping lives in ``api`` only.
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


class NotFound(AgentMemoryError):
    """Base of the ``*_not_found`` family."""

    code = "not_found"


class InstanceNotFound(NotFound):
    """No such instance, or it belongs to another organization (the two are indistinguishable)."""

    code = "instance_not_found"

    def __init__(self, instance_id: str) -> None:
        super().__init__(f"Instance '{instance_id}' does not exist in your organization.")


class StoreNotFound(NotFound):
    code = "store_not_found"

    def __init__(self, store: str) -> None:
        super().__init__(
            f"Store '{store}' does not exist on this instance; create it with PUT first."
        )


class SessionNotFound(NotFound):
    code = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session '{session_id}' does not exist or has expired.")


class RouteNotFound(NotFound):
    code = "route_not_found"


class Conflict(AgentMemoryError):
    code = "conflict"


class ActorMismatch(Conflict):
    """A session already belongs to another actor."""

    code = "actor_mismatch"

    def __init__(self, session_id: str, owner: str, given: str) -> None:
        super().__init__(
            f"Session '{session_id}' belongs to actor '{owner}', not '{given}'; "
            "use a new session id for another actor."
        )


class PayloadTooLarge(AgentMemoryError):
    code = "payload_too_large"


class ValidationFailed(AgentMemoryError):
    """Input the models accept field by field but the domain rejects as a whole."""

    code = "validation_error"


class DatabaseUnavailable(AgentMemoryError):
    """The Redis-protocol database could not be reached; the client should retry later."""

    code = "database_unavailable"

    retry_after_seconds = 1
