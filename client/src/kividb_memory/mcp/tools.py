"""The MCP tools, defined once for every transport.

:func:`build_server` makes the SDK's ``MCPServer`` with six tools; the stdio server
(``python -m kividb_memory.mcp``) and the remote one (``POST /mcp``, :mod:`.remote`) differ only
in ``connect``, which gives a tool call its :class:`~kividb_memory.MemoryClient`: the process's
own for stdio, one with the caller's key for the remote server. Every tool makes one API call
through that client, with each of its arguments in the request, but ``memory_forget``, which
reads the memory's chain (``GET``) before it deletes it (``DELETE`` forgets the whole chain and
answers no body), so that its answer lists every memory it forgot (the parity test,
``test_every_argument_of_every_tool_reaches_the_api`` in ``tests/e2e/test_mcp.py``, checks
every request on the wire).

Errors: the API's errors come back as tool errors (``isError``) with the API's status, code and
message (and each field's problem, named as the tool's argument); arguments that do not fit the
schema (an unknown argument, or a value of another type: arguments are never coerced), or that
the client cannot put in a request (an id ``.`` or ``..``), are tool errors naming the argument
and the problem; an API that cannot be reached is a tool error too. Nothing a caller sends
makes the server fail, and no tool error is the SDK's bare ``Error executing tool <name>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from kividb_memory import models as m
from kividb_memory._http import __version__
from kividb_memory.client import MemoryClient, StoreClient
from kividb_memory.errors import (
    ApiConnectionError,
    ApiError,
    UnexpectedResponseError,
)

R = TypeVar("R")

TOOL_ANSWER_BYTES = 1_500_000
"""The most a recall or search answer the tools pass on may weigh (its JSON in UTF-8, written
once more as a JSON string, as Lambda carries it): a tool result holds it twice (as text and
as structured content), escaped once more in the JSON-RPC answer, and the remote server's
answer must stay under Lambda's 6 MB (6,291,456 bytes) like every answer of the API."""

INSTANCE_ENV = "KIVIDB_INSTANCE"
STORE_ENV = "KIVIDB_STORE"

TOOL_NAMES = (
    "list_memory_stores",
    "memory_add_messages",
    "memory_recall",
    "memory_search",
    "memory_add",
    "memory_forget",
)


def carried_bytes(answer: BaseModel) -> int:
    """The bytes ``answer`` takes as Lambda carries it: its JSON, written as a JSON string
    without ASCII escapes, in UTF-8 (the server's ``agent_memory.answers.wire_bytes``)."""
    text = answer.model_dump_json()
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def fitted_search(found: m.SearchResult, budget: int) -> m.SearchResult:
    """``found`` with as many of its best results as keep it under ``budget`` bytes
    (``carried_bytes``), at least one; ``memories_omitted`` counts the others too."""
    if carried_bytes(found) <= budget or len(found.memories) <= 1:
        return found

    def cut(kept: int) -> m.SearchResult:
        left_out = found.memories_omitted + len(found.memories) - kept
        return found.model_copy(
            update={"memories": found.memories[:kept], "memories_omitted": left_out}
        )

    low, high = 1, len(found.memories)  # cut(high) is over the budget
    while high - low > 1:
        middle = (low + high) // 2
        if carried_bytes(cut(middle)) <= budget:
            low = middle
        else:
            high = middle
    return cut(low)


@dataclass(frozen=True)
class Defaults:
    """The instance and store a tool uses when the call names none (``KIVIDB_INSTANCE``,
    ``KIVIDB_STORE`` for stdio; the ``X-KiviDB-Instance`` and ``X-KiviDB-Store`` headers for the
    remote server)."""

    instance_id: str | None = None
    store: str | None = None


@dataclass(frozen=True)
class Connection:
    """What a tool call uses: the client (with the caller's key) and the defaults."""

    client: MemoryClient
    defaults: Defaults


Connect = Callable[[Context[Any, Any]], Connection]
"""Gives a tool call its connection (raises ``ToolError`` when it cannot)."""


class MessageArg(BaseModel):
    """One message of ``memory_add_messages``."""

    model_config = ConfigDict(extra="forbid")

    role: Annotated[m.Role, Field(description="Who wrote it: user, assistant, system or tool.")]
    content: Annotated[str, Field(description="The message text, verbatim.")]
    name: Annotated[
        str | None,
        Field(description="Who spoke, when the role alone does not say (e.g. a user's name)."),
    ] = None


MAX_CHAIN_SHOWN = 50
"""How many memories of a chain the API's GET of a memory shows on each side of it."""


class MemoryForgotten(BaseModel):
    """What ``memory_forget`` answers: the API's DELETE of a memory forgets its whole chain
    (every version it replaced and every memory that replaced it) and answers 204 with no body,
    so the ids come from the chain the API's GET showed just before."""

    memory_id: Annotated[str, Field(description="The memory asked to be forgotten.")]
    deleted: Annotated[bool, Field(description="Always true: the whole chain is gone.")]
    deleted_ids: Annotated[
        list[str],
        Field(
            description="Every memory forgotten, oldest first: memory_id and the memories of "
            "its chain (the versions it replaced and the memories that replaced it)."
        ),
    ]
    complete: Annotated[
        bool,
        Field(
            description="false when the chain may have been longer than the API shows (at "
            "most 50 memories on each side of memory_id): then more memories may have been "
            "forgotten than deleted_ids lists."
        ),
    ]


class StoresListed(BaseModel):
    """What ``list_memory_stores`` answers: a page of the stores, the instances that could not
    be read (only when listing the whole organization), and ``next_cursor``: the ``cursor`` of
    the next page, or null on the last."""

    stores: list[m.StoreView]
    unreachable: list[m.UnreachableInstance]
    next_cursor: str | None = None


InstanceArg = Annotated[
    str | None,
    Field(
        description="The database instance id (list_memory_stores shows each store's). "
        f"May be omitted when the server has a default instance ({INSTANCE_ENV})."
    ),
]
StoreArg = Annotated[
    str | None,
    Field(
        description="The store's name within the instance. May be omitted when the server has "
        f"a default store ({STORE_ENV})."
    ),
]
SessionArg = Annotated[
    str,
    Field(
        description="The conversation's id, chosen by the caller (letters, digits, '.', '_', "
        "':', '@' and '-'); the same id for every turn of one conversation."
    ),
]
ActorArg = Annotated[
    str | None,
    Field(description="The user the memories belong to (an id of the caller's choosing)."),
]
LimitArg = Annotated[
    int | None,
    Field(ge=1, le=100, description="How many memories at most (1 to 100; default 10)."),
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
FORGET = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

# The API names body fields; the tools name their arguments (REST "events" is "messages").
_FIELD_PREFIXES = (("path.", ""), ("events.", "messages."), ("events", "messages"))


def _argument(field: str) -> str:
    for rest, tool in _FIELD_PREFIXES:
        if field.startswith(rest):
            field = tool + field[len(rest) :]
            break
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", field)


def describe(exc: ApiError | ApiConnectionError | UnexpectedResponseError) -> str:
    """A tool error's text for a client exception: the API's status, code and message, and
    each field's problem under the tool argument's name."""
    if not isinstance(exc, ApiError):
        return f"The KiviDB API did not answer as expected: {exc.message}"
    text = f"KiviDB API error {exc.status} {exc.code}: {exc.message}"
    if exc.details:
        text += " " + "; ".join(f"{_argument(d.field)}: {d.problem}" for d in exc.details)
    if exc.retry_after is not None:
        text += f" (retry after {exc.retry_after:g} s)"
    if exc.code == "vector_required":
        # The API's message says to send a vector; no tool can, so say what an assistant can do.
        text += (
            " (This store has no embedding model and these tools send no vectors: search it "
            "with mode 'keyword'; adding a memory needs a store with an embedding model.)"
        )
    return text


def _strict(tool: Tool) -> Tool:
    """``tool`` with an argument model as strict as the API's request models: it refuses
    arguments it does not have (the SDK's argument model ignores them, which would let a
    misspelt argument vanish; ``additionalProperties: false`` in its schema), and it coerces
    nothing (pydantic's strict mode, nested messages included: ``true``, ``"5"`` and ``5.0``
    are not an integer ``limit``). The one leniency left is the SDK's own, before validation:
    a list or object argument sent as a JSON text (``"[\"a\"]"``, as some clients do) is read
    as that list or object."""
    base = tool.fn_metadata.arg_model
    strict = cast(
        "type[ArgModelBase]",
        type(base.__name__, (base,), {"model_config": ConfigDict(extra="forbid", strict=True)}),
    )
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


class _Tools:
    """The six tools' bodies over ``connect``."""

    def __init__(self, connect: Connect) -> None:
        self.connect = connect

    def _store(
        self, ctx: Context[Any, Any], instance_id: str | None, store: str | None
    ) -> StoreClient:
        connection = self.connect(ctx)
        instance = instance_id or connection.defaults.instance_id
        name = store or connection.defaults.store
        if not instance:
            raise ToolError(
                "instance_id is required: this server has no default instance "
                f"({INSTANCE_ENV} for the stdio server, the X-KiviDB-Instance header for the "
                "remote one); list_memory_stores shows each store's instance_id"
            )
        if not name:
            raise ToolError(
                f"store is required: this server has no default store ({STORE_ENV} for the "
                "stdio server, the X-KiviDB-Store header for the remote one); "
                "list_memory_stores shows the stores"
            )
        # The client refuses an id it cannot put in a path ("store cannot be '..': ...").
        return self._call(lambda: connection.client.store(instance, name))

    @staticmethod
    def _call(fn: Callable[[], R]) -> R:
        try:
            return fn()
        except (ApiError, ApiConnectionError, UnexpectedResponseError) as exc:
            raise ToolError(describe(exc)) from exc
        except ValueError as exc:  # an argument the client itself refused
            raise ToolError(str(exc)) from exc

    def list_memory_stores(
        self,
        ctx: Context[Any, Any],
        instance_id: Annotated[
            str | None,
            Field(
                description="Only the stores of this database instance; omit it to list every "
                "store of the organization."
            ),
        ] = None,
        cursor: Annotated[
            str | None,
            Field(
                description="The next_cursor of the page before, for the page after it (with "
                "the same instance_id); omit it for the first page."
            ),
        ] = None,
        limit: Annotated[
            int | None,
            Field(ge=1, le=1000, description="At most this many stores (1 to 1,000, the default)."),
        ] = None,
    ) -> StoresListed:
        """List the memory stores this API key can use: each store's instance_id and name
        (the arguments the other tools take), its settings and models. A page at a time: when
        next_cursor is not null, call again with it as cursor for the rest."""
        client = self.connect(ctx).client
        if instance_id is None:
            listed = self._call(lambda: client.list_stores(cursor=cursor, limit=limit))
            return StoresListed(
                stores=listed.stores,
                unreachable=listed.unreachable,
                next_cursor=listed.next_cursor,
            )
        one = self._call(lambda: client.list_stores(instance_id, cursor=cursor, limit=limit))
        return StoresListed(stores=one.stores, unreachable=[], next_cursor=one.next_cursor)

    def memory_add_messages(
        self,
        ctx: Context[Any, Any],
        session_id: SessionArg,
        messages: Annotated[
            list[MessageArg],
            Field(min_length=1, description="The turn's messages, oldest first (at most 100)."),
        ],
        actor_id: Annotated[
            str | None,
            Field(
                description="The user this conversation belongs to; their long-term memories "
                "are extracted from it. Fixed by the session's first call."
            ),
        ] = None,
        instance_id: InstanceArg = None,
        store: StoreArg = None,
    ) -> m.EventsResult:
        """Add a conversation turn's messages to the session's working memory (after each turn).
        Answers how many were added and the session's message count."""
        handle = self._store(ctx, instance_id, store)
        events = [message.model_dump(exclude_none=True) for message in messages]
        return self._call(lambda: handle.add_events(session_id, events, actor_id=actor_id))

    def memory_recall(
        self,
        ctx: Context[Any, Any],
        session_id: SessionArg,
        query: Annotated[
            str | None,
            Field(
                description="What to find memories for; defaults to the session's latest user "
                "message."
            ),
        ] = None,
        actor_id: ActorArg = None,
        limit: LimitArg = None,
        instance_id: InstanceArg = None,
        store: StoreArg = None,
    ) -> Annotated[CallToolResult, m.RecallView]:
        """Recall what to know before answering in a conversation: the session's summary and
        recent messages and the user's relevant long-term memories, with the user's profile
        when the store keeps one, as one context text (the structured result has each part).
        A new session is not an error: it recalls nothing."""
        handle = self._store(ctx, instance_id, store)
        recalled: m.RecallView = self._call(
            lambda: handle.recall(
                session_id,
                query=query,
                actor_id=actor_id,
                limit=limit,
                max_bytes=TOOL_ANSWER_BYTES,
            )
        )
        return CallToolResult(
            content=[TextContent(type="text", text=recalled.context)],
            structured_content=recalled.model_dump(mode="json"),
        )

    def memory_search(
        self,
        ctx: Context[Any, Any],
        query: Annotated[str, Field(description="What to look for.")],
        mode: Annotated[
            m.SearchMode,
            Field(
                description="semantic (by meaning), keyword (BM25 over the words) or hybrid "
                "(both; the default). semantic and hybrid need the store to have an embedding "
                "model; keyword works on every store."
            ),
        ] = "hybrid",
        actor_id: Annotated[
            str | None, Field(description="Only this user's memories; omit to search them all.")
        ] = None,
        types: Annotated[
            list[str] | None,
            Field(
                description="Only memories of these types (semantic, episodic, or the store's "
                "custom types); at most 5."
            ),
        ] = None,
        limit: LimitArg = None,
        min_score: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Leave out memories scoring below this (scores are 0 to 1, about "
                "how likely a memory answers the query; a close match scores about 0.1 to "
                "0.4); omit to keep every result.",
            ),
        ] = None,
        time_filter: Annotated[
            bool | None,
            Field(
                description="When the query names a time ('in May 2023', 'last week'): true "
                "keeps only memories of that time; omitted or false ranks them first."
            ),
        ] = None,
        instance_id: InstanceArg = None,
        store: StoreArg = None,
    ) -> m.SearchResult:
        """Search long-term memories, best first, each with its score from 0 to 1 (those below
        min_score are left out, and the lowest ranked when the answer would be too large:
        memories_omitted says how many). A time the query names ranks that time's memories
        first (time_window in the answer says which it read)."""
        handle = self._store(ctx, instance_id, store)

        def search() -> m.SearchResult:
            return handle.search(
                query,
                mode=mode,
                actor_id=actor_id,
                types=types,
                limit=limit,
                min_score=min_score,
                time_filter=time_filter,
            )

        found = self._call(search)
        return fitted_search(found, TOOL_ANSWER_BYTES)

    def memory_add(
        self,
        ctx: Context[Any, Any],
        text: Annotated[str, Field(description="The fact to remember, in one sentence or so.")],
        actor_id: Annotated[str | None, Field(description="The user the memory is about.")] = None,
        type: Annotated[
            str | None,
            Field(
                description="semantic (a lasting fact; the default), episodic (something that "
                "happened), or one of the store's custom types."
            ),
        ] = None,
        topics: Annotated[
            list[str] | None, Field(description="A few topic words (at most 10).")
        ] = None,
        instance_id: InstanceArg = None,
        store: StoreArg = None,
    ) -> m.MemoryView:
        """Remember a fact as a long-term memory. Personal identifiers are redacted; a memory
        the user already has is not kept twice (the answer says duplicate: true)."""
        handle = self._store(ctx, instance_id, store)
        return self._call(
            lambda: handle.add_memory(text, actor_id=actor_id, type=type, topics=topics)
        )

    def memory_forget(
        self,
        ctx: Context[Any, Any],
        memory_id: Annotated[
            str, Field(description="The memory's id (mem_...), as search or recall show it.")
        ],
        instance_id: InstanceArg = None,
        store: StoreArg = None,
    ) -> MemoryForgotten:
        """Forget (delete) a long-term memory for good, with its whole chain: the earlier
        versions it replaced and the later memories that replaced it, the current one included
        (the API forgets a fact's whole history; it cannot delete one version alone). The answer
        lists the id of every memory forgotten (deleted_ids)."""
        handle = self._store(ctx, instance_id, store)
        # Read the chain first: the API's DELETE answers 204 with no body.
        found: m.MemoryView = self._call(lambda: handle.get_memory(memory_id))
        chain = [link.id for link in found.chain or []] or [found.id]
        if found.id not in chain:  # pragma: no cover - the API's chain includes the memory
            chain.append(found.id)
        place = chain.index(found.id)
        complete = place < MAX_CHAIN_SHOWN and len(chain) - 1 - place < MAX_CHAIN_SHOWN
        self._call(lambda: handle.delete_memory(memory_id))
        return MemoryForgotten(
            memory_id=memory_id, deleted=True, deleted_ids=chain, complete=complete
        )


_ANNOTATIONS: dict[str, tuple[str, ToolAnnotations]] = {
    "list_memory_stores": ("List memory stores", READ),
    "memory_add_messages": ("Add messages to a session", WRITE),
    "memory_recall": ("Recall memory for a session", READ),
    "memory_search": ("Search memories", READ),
    "memory_add": ("Remember a fact", WRITE),
    "memory_forget": ("Forget a memory and its whole chain", FORGET),
}


def build_server(connect: Connect, defaults: Defaults | None = None) -> MCPServer[Any]:
    """The MCP server with the six tools, each calling the API through ``connect(ctx)``;
    ``defaults`` (the stdio server's) are named in the server's instructions."""
    defaults = defaults or Defaults()
    bodies = _Tools(connect)
    tools = []
    for name in TOOL_NAMES:
        title, annotations = _ANNOTATIONS[name]
        tool = Tool.from_function(
            getattr(bodies, name),
            name=name,
            title=title,
            annotations=annotations.model_copy(update={"title": title}),
        )
        tools.append(_strict(tool))
    where = ""
    if defaults.instance_id or defaults.store:
        where = (
            f" Defaults here: instance {defaults.instance_id or '(none)'}, store "
            f"{defaults.store or '(none)'}."
        )
    return MCPServer(
        "kividb-memory",
        log_level="WARNING",
        title="KiviDB agent memory",
        version=__version__,
        instructions=(
            "Working memory per conversation and long-term memory per user. Before answering "
            "in a conversation, call memory_recall with its session_id; after the turn, call "
            "memory_add_messages with the new messages. memory_search, memory_add and "
            "memory_forget manage long-term memories; list_memory_stores shows the stores." + where
        ),
        tools=tools,
    )
