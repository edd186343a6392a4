"""KiviDB agent memory: a typed Python client for the API, and an MCP server (``[mcp]`` extra).

::

    from kividb_memory import MemoryClient

    with MemoryClient() as client:  # KIVIDB_API_URL, KIVIDB_API_KEY
        store = client.store("local", "support-agent")
        memory = store.recall("chat-1", query="When do we deploy?", actor_id="user-7")

``docs/client.md`` in the project describes the methods, retries and errors; ``docs/mcp.md``
the MCP server (``python -m kividb_memory.mcp``).
"""

from kividb_memory._http import __version__
from kividb_memory.client import (
    UNSET,
    AsyncMemoryClient,
    AsyncStoreClient,
    MemoryClient,
    StoreClient,
)
from kividb_memory.errors import (
    ApiConnectionError,
    ApiError,
    AuthenticationError,
    BadGatewayError,
    ConflictError,
    KiviDBError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    UnavailableError,
    UnexpectedResponseError,
    ValidationError,
)
from kividb_memory.models import (
    ActorForgotten,
    CustomType,
    ErrorBody,
    ErrorDetail,
    EventIn,
    EventsRequest,
    EventsResult,
    ExtractionQueued,
    ExtractionStatus,
    MemoryIn,
    MemoryLink,
    MemoryList,
    MemoryPatch,
    MemorySource,
    MemoryVersion,
    MemoryView,
    Message,
    OrganizationStoreList,
    RecallRequest,
    RecallView,
    SearchRequest,
    SearchResult,
    SessionList,
    SessionSummary,
    SessionView,
    StoreCounts,
    StoreList,
    StorePut,
    StoreView,
    UnreachableInstance,
)

__all__ = [
    "UNSET",
    "ActorForgotten",
    "ApiConnectionError",
    "ApiError",
    "AsyncMemoryClient",
    "AsyncStoreClient",
    "AuthenticationError",
    "BadGatewayError",
    "ConflictError",
    "CustomType",
    "ErrorBody",
    "ErrorDetail",
    "EventIn",
    "EventsRequest",
    "EventsResult",
    "ExtractionQueued",
    "ExtractionStatus",
    "KiviDBError",
    "MemoryClient",
    "MemoryIn",
    "MemoryLink",
    "MemoryList",
    "MemoryPatch",
    "MemorySource",
    "MemoryVersion",
    "MemoryView",
    "Message",
    "NotFoundError",
    "OrganizationStoreList",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RecallRequest",
    "RecallView",
    "SearchRequest",
    "SearchResult",
    "ServerError",
    "SessionList",
    "SessionSummary",
    "SessionView",
    "StoreClient",
    "StoreCounts",
    "StoreList",
    "StorePut",
    "StoreView",
    "UnavailableError",
    "UnexpectedResponseError",
    "UnreachableInstance",
    "ValidationError",
    "__version__",
]
