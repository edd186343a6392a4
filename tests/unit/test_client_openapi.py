"""The Python client follows docs/openapi.json: every route has a client method, every request
field of the document is on the client's request model (and nothing else is) with a compatible
type, and every field of every success answer is on the client's answer model.

A route or field the API adds, renames or retypes without the client following fails here."""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from datetime import UTC, date, datetime
from typing import Any, Literal, Union, get_args, get_origin

import httpx
import pydantic
import pytest

import kividb_memory
from kividb_memory import (
    AsyncMemoryClient,
    AsyncStoreClient,
    MemoryClient,
    StoreClient,
    models as client_models,
)
from tests.support.common import ROOT

NOW = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "con_00000000000000000000"
DOC = json.loads((ROOT / "docs" / "openapi.json").read_text())
COMPONENTS: dict[str, Any] = DOC["components"]["schemas"]
# Request models the client sends with explicit nulls (None given = null): the document must
# allow null wherever the client model does. The others leave a None out of the body.
SENDS_NULLS = {"StorePut", "MemoryPatch"}


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in DOC["paths"].items()
        for method, op in ops.items()
        if method in ("get", "put", "post", "patch", "delete")
    ]


def _ref(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.rsplit("/", 1)[1] if ref else None


def _request_components() -> set[str]:
    names = {
        _ref(op["requestBody"]["content"]["application/json"]["schema"])
        for _, _, op in _operations()
        if "requestBody" in op
    }
    return _closure({n for n in names if n})


def _answer_components() -> set[str]:
    names: set[str] = set()
    for _, _, op in _operations():
        for status, answer in op["responses"].items():
            schema = answer.get("content", {}).get("application/json", {}).get("schema")
            if schema and (status.startswith("2") or _ref(schema) == "ErrorBody"):
                names.add(_ref(schema) or "")
    return _closure(names - {""})


def _closure(names: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(re.findall(r'"#/components/schemas/(\w+)"', json.dumps(COMPONENTS[name])))
    return seen


def _model(name: str) -> type[pydantic.BaseModel]:
    model = getattr(client_models, name, None)
    assert model is not None, f"the client has no model {name} (docs/openapi.json has one)"
    assert getattr(kividb_memory, name) is model, f"kividb_memory does not export {name}"
    return model


def _nullable(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    options = schema.get("anyOf")
    if options and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        return (rest[0] if len(rest) == 1 else {"anyOf": rest}), True
    return schema, False


def _parts(annotation: Any) -> tuple[list[Any], bool]:
    if get_origin(annotation) in (Union, types.UnionType):
        args = list(get_args(annotation))
        return [a for a in args if a is not type(None)], type(None) in args
    return [annotation], False


def _problems(where: str, schema: dict[str, Any], annotation: Any, *, request: bool) -> list[str]:
    """Why a value of ``schema`` and the client's ``annotation`` do not fit each other."""
    schema, doc_null = _nullable(schema)
    options, client_null = _parts(annotation)
    found = []
    if doc_null and not client_null:
        found.append(f"{where}: the document allows null, the client does not")
    if "anyOf" in schema:
        # a union: each of the document's alternatives must fit one of the client's
        for alternative in schema["anyOf"]:
            found += _problems(where, alternative, annotation, request=request)
        return found
    if (name := _ref(schema)) is not None:
        if not any(isinstance(o, type) and o.__name__ == name for o in options):
            found.append(f"{where}: the document has {name}, the client {annotation}")
        return found
    kind = schema.get("type")
    fits = []
    for option in options:
        origin, args = get_origin(option), get_args(option)
        if kind == "string" and "enum" in schema:
            fits.append(origin is Literal and set(args) == set(schema["enum"]))
        elif kind == "string" and schema.get("format") == "date-time":
            fits.append(option is datetime)
        elif kind == "string" and schema.get("format") == "date":
            fits.append(option is date)
        elif kind == "string":
            fits.append(option is str or (origin is Literal and "const" in schema))
        elif kind == "integer":
            fits.append(option is int)
        elif kind == "number":
            fits.append(option is float)
        elif kind == "boolean":
            fits.append(option is bool)
        elif kind == "array":
            inner = (
                _problems(f"{where}[]", schema["items"], args[0], request=request) if args else []
            )
            fits.append(origin is list and not inner)
        elif kind == "object":
            fits.append(origin is dict or option is dict)
        elif kind is None and schema.keys() <= {"title", "description"}:
            fits.append(option is Any)  # a value of any JSON type
        else:
            fits.append(False)
    if "const" in schema:
        fits.append(
            any(get_origin(o) is Literal and schema["const"] in get_args(o) for o in options)
        )
    if not any(fits):
        found.append(f"{where}: the document has {schema}, the client {annotation}")
    return found


def _hints(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    return typing.get_type_hints(model, vars(client_models))


def test_every_request_field_of_the_document_is_on_the_client_model_and_no_other():
    problems = []
    names = _request_components()
    assert {"StorePut", "EventsRequest", "EventIn", "RecallRequest", "MemoryIn"} <= names
    for name in sorted(names):
        model, doc = _model(name), COMPONENTS[name]
        hints = _hints(model)
        fields = set(model.model_fields)
        props = set(doc["properties"])
        if fields != props:
            problems.append(
                f"{name}: only in the document {props - fields}, only in the client "
                f"{fields - props}"
            )
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        if required != set(doc.get("required", [])):
            problems.append(f"{name}: required {required}, document {doc.get('required', [])}")
        # Both sent and read back (the store's settings): answers keep what a newer server adds.
        if model.model_config.get("extra") != "forbid" and name not in (
            "CustomType",
            "WebhookEndpoint",
            "ExtractionExample",
            "ExampleMessage",
            "ExampleMemory",
            "ProfileField",
        ):
            problems.append(f"{name}: unknown fields are not refused")
        for field in props & fields:
            schema = doc["properties"][field]
            annotation = hints[field]
            found = _problems(f"{name}.{field}", schema, annotation, request=True)
            if name not in SENDS_NULLS:  # a None is left out of the body, never sent as null
                found = [p for p in found if "allows null" not in p]
            problems.extend(found)
    assert problems == []


def test_every_answer_field_of_the_document_is_on_the_client_model():
    problems = []
    names = _answer_components()
    assert {"StoreView", "SessionView", "RecallView", "MemoryList", "ErrorBody"} <= names
    for name in sorted(names):
        model, doc = _model(name), COMPONENTS[name]
        hints = _hints(model)
        props = set(doc["properties"])
        missing = props - set(model.model_fields)
        if missing:
            problems.append(f"{name}: the client does not read {sorted(missing)}")
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        if not required <= set(doc.get("required", [])):
            problems.append(
                f"{name}: the client requires {required - set(doc.get('required', []))}"
                " which the document does not"
            )
        if model.model_config.get("extra") == "forbid":
            problems.append(f"{name}: a field a newer server adds would be refused")
        for field in props & set(model.model_fields):
            problems.extend(
                _problems(f"{name}.{field}", doc["properties"][field], hints[field], request=False)
            )
    assert problems == []


def test_answer_models_ignore_fields_a_newer_server_adds():
    view = client_models.ExtractionQueued.model_validate(
        {"session_id": "s", "status": "queued", "new_field": {"x": 1}}
    )
    assert view.session_id == "s" and not hasattr(view, "new_field")


# --- every route has a client method ----------------------------------------------------------


def _template_pattern(path: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) + "$")


def _answer_for(method: str, path: str) -> httpx.Response:
    """A 2xx answer of the route's documented model, built from the client's own models."""
    now = "2026-01-01T00:00:00Z"
    memory = {
        "id": "mem_00000000000000000000",
        "text": "t",
        "type": "semantic",
        "actor_id": None,
        "topics": [],
        "metadata": {},
        "importance": None,
        "confidence": None,
        "created_at": now,
        "updated_at": now,
        "expires_at": now,
        "source": None,
        "valid_from": now,
    }
    extraction = {"status": "idle", "unread": 0}
    key = {"key_id": "key_0123456789ab", "access": "read", "created_at": now}
    keyed = {
        "namespace": ["a"],
        "key": "k",
        "value": {},
        "created_at": now,
        "updated_at": now,
        "expires_at": now,
    }
    store = {
        "name": "s",
        "instance_id": "i",
        "llm_provider": "none",
        "llm_model": None,
        "llm_base_url": None,
        "has_llm_api_key": False,
        "embed_provider": "none",
        "embed_model": None,
        "embed_base_url": None,
        "has_embed_api_key": False,
        "dimensions": 3,
        "extraction_delay_seconds": 300,
        "summarize_after": 40,
        "keep_recent": 12,
        "session_ttl_seconds": 3600,
        "memory_ttl_seconds": 60,
        "dedupe_threshold": 0.9,
        "custom_types": [],
        "redact_pii": True,
        "created_at": now,
        "updated_at": now,
    }
    session = {
        "session_id": "c",
        "actor_id": None,
        "message_count": 0,
        "created_at": now,
        "last_event_at": now,
        "expires_at": now,
        "extraction": extraction,
    }
    before = {"id": "mem_00000000000000000000", "text": "t", "type": "semantic", "updated_at": now}
    step = {"index": 0, "action": "drop", "status": "applied", "before": [before]}
    run = {
        "consolidation_id": RUN,
        "actor_id": "a",
        "status": "applied",
        "trigger": "request",
        "mode": "apply",
        "created_at": now,
    }
    bodies: dict[str, Any] = {
        "OrganizationStoreList": {"stores": [store], "unreachable": []},
        "StoreList": {"stores": [store]},
        "StoreView": store,
        "EventsResult": {"session_id": "c", "added": 1, "message_count": 1},
        "SessionList": {"sessions": [session], "next_offset": None},
        "SessionView": {**session, "summary": None, "messages": []},
        "ExtractionQueued": {"session_id": "c", "status": "queued"},
        "PoppedMessage": {"session_id": "c", "message": None, "message_count": 0},
        "RecallView": {
            "session_id": "c",
            "actor_id": None,
            "summary": None,
            "messages": [],
            "memories": [memory],
            "context": "x",
        },
        "MemoryView": memory,
        "MemoryList": {"memories": [memory], "next_offset": None, "total": 1},
        "SearchResult": {"memories": [memory]},
        "KeyedMemoryView": keyed,
        "KeyCreated": {**key, "api_key": "kvm_x"},
        "KeyList": {"keys": [key]},
        "KeyedSearchResult": {"items": [keyed]},
        "NamespaceList": {"namespaces": [["a", "b"]]},
        "ActorForgotten": {"actor_id": "a", "deleted": 1},
        "ProfileView": {
            "actor_id": "a",
            "fields": {"city": {"value": "Porto", "updated_at": now, "source": {"by": "caller"}}},
        },
        "ProfileHistory": {"actor_id": "a", "field": "city", "versions": []},
        "ConsolidationQueued": {"consolidation_id": RUN, "status": "queued"},
        "ConsolidationList": {"consolidations": [run], "offset": 0, "limit": 20},
        "Consolidation": {**run, "steps": [step]},
        "SessionIdPage": {"session_ids": ["c"], "next_cursor": None},
        "SessionExport": {
            "session_id": "c",
            "actor_id": None,
            "summary": None,
            "message_count": 1,
            "created_at": now,
            "last_event_at": now,
            "expires_at": now,
            "read_seq": 0,
            "folded_seq": 0,
            "failures": 0,
            "last_error": None,
            "last_run_at": None,
            "pending": None,
            "next_after_seq": None,
            "messages": [{"seq": 1, "role": "user", "content": "x", "created_at": now}],
        },
        "SessionImported": {
            "session_id": "c",
            "message_count": 1,
            "expires_at": now,
            "messages_added": 1,
        },
        "MemoryExportPage": {
            "memories": [
                {
                    **memory,
                    "versions": [],
                    "occurred_at": None,
                    "valid_until": None,
                    "supersedes": None,
                    "superseded_by": None,
                    "vector": "AACAPw==",
                }
            ],
            "next_cursor": None,
        },
        "MemoryImportResult": {"imported": 1, "expired": []},
        "ProfileExportPage": {
            "profiles": [
                {
                    "actor_id": "ann",
                    "fields": {
                        "city": {"value": "Porto", "updated_at": now, "source": {"by": "caller"}}
                    },
                    "history": {},
                }
            ],
            "next_cursor": None,
        },
        "ProfileImportResult": {"imported": 1},
        "UsageReport": {
            "days": [
                {
                    "date": "2026-01-01",
                    "requests": 1,
                    "requests_by_route": {"GET /x": 1},
                    "messages_added": 0,
                    "memories_added": 0,
                    "memories_superseded": 0,
                    "memories_deleted": 0,
                    "extraction_runs": 0,
                    "summarization_runs": 0,
                    "llm_input_tokens": 0,
                    "llm_output_tokens": 0,
                    "embedding_tokens": 0,
                }
            ],
            "now": {"sessions": 0, "messages": 0, "memories": 0, "bytes": 0},
        },
        "WebhookSecret": {"secret": "whsec_AAAA", "created_at": now},
        "DeliveryList": {
            "deliveries": [
                {
                    "webhook_id": "msg_1",
                    "event": "memory.created",
                    "url": "https://h.test/",
                    "status": "delivered",
                    "attempts": 1,
                    "created_at": now,
                    "last_attempt_at": now,
                    "next_attempt_at": None,
                    "last_status_code": 204,
                    "last_error": None,
                }
            ]
        },
    }
    for doc_method, template, op in _operations():
        if doc_method == method and _template_pattern(template).match(path):
            status, answer = next(
                (s, a) for s, a in sorted(op["responses"].items()) if s.startswith("2")
            )
            schema = answer.get("content", {}).get("application/json", {}).get("schema")
            if schema is None:
                return httpx.Response(int(status))
            return httpx.Response(int(status), json=bodies[_ref(schema) or ""])
    return httpx.Response(404, json={"message": "Not Found"})


def _public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)} - {
        "close",
        "aclose",
        "send",
        "store",
    }


def test_every_route_of_the_document_has_a_client_method_and_every_method_a_route():
    seen: list[tuple[str, str, dict[str, str]]] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(
            (request.method, request.url.raw_path.decode().split("?")[0], dict(request.url.params))
        )
        return _answer_for(request.method, request.url.path)

    client = MemoryClient(
        "https://api.test", "key", http_client=httpx.Client(transport=httpx.MockTransport(record))
    )
    store = client.store("i", "s")
    called: dict[str, set[str]] = {"MemoryClient": set(), "StoreClient": set()}
    calls = [
        ("MemoryClient", "list_stores", lambda: client.list_stores(cursor="i/s", limit=2)),
        ("MemoryClient", "list_stores", lambda: client.list_stores("i", cursor="i/s", limit=2)),
        ("MemoryClient", "put_store", lambda: client.put_store("i", "s", dimensions=3)),
        ("MemoryClient", "get_store", lambda: client.get_store("i", "s")),
        ("MemoryClient", "delete_store", lambda: client.delete_store("i", "s")),
        (
            "MemoryClient",
            "create_key",
            lambda: client.create_key("read", stores=[("i", "s")], actors=["a"], expires_at=NOW),
        ),
        ("MemoryClient", "list_keys", lambda: client.list_keys("1.key_0123456789ab", 2)),
        ("MemoryClient", "delete_key", lambda: client.delete_key("key_0123456789ab")),
        ("MemoryClient", "organization_usage", lambda: client.organization_usage(NOW, NOW)),
        (
            "StoreClient",
            "add_events",
            lambda: store.add_events("c", [{"role": "user", "content": "x"}]),
        ),
        ("StoreClient", "recall", lambda: store.recall("c", query="q", actor_id="a", limit=2)),
        ("StoreClient", "list_sessions", lambda: store.list_sessions(offset=1, limit=2)),
        ("StoreClient", "get_session", lambda: store.get_session("c", recent=3, before_seq=9)),
        ("StoreClient", "delete_session", lambda: store.delete_session("c")),
        ("StoreClient", "extract", lambda: store.extract("c")),
        ("StoreClient", "pop_message", lambda: store.pop_message("c")),
        ("StoreClient", "add_memory", lambda: store.add_memory("t", vector=[1.0])),
        (
            "StoreClient",
            "list_memories",
            lambda: store.list_memories(
                offset=1,
                limit=2,
                actor_id="a",
                type="t",
                include_superseded=True,
                as_of=NOW,
                topics=["x"],
                metadata={"k": 1},
                created_after=NOW,
                created_before=NOW,
                occurred_after=NOW,
                occurred_before=NOW,
            ),
        ),
        ("StoreClient", "get_memory", lambda: store.get_memory("mem_1")),
        ("StoreClient", "update_memory", lambda: store.update_memory("mem_1", text="u")),
        ("StoreClient", "delete_memory", lambda: store.delete_memory("mem_1")),
        ("StoreClient", "search", lambda: store.search("q", mode="keyword")),
        ("StoreClient", "forget_actor", lambda: store.forget_actor("a")),
        ("StoreClient", "get_profile", lambda: store.get_profile("a")),
        ("StoreClient", "update_profile", lambda: store.update_profile("a", {"city": None})),
        ("StoreClient", "profile_history", lambda: store.profile_history("a", "city")),
        ("StoreClient", "consolidate", lambda: store.consolidate("a")),
        (
            "StoreClient",
            "list_consolidations",
            lambda: store.list_consolidations("a", ["proposed", "failed"], offset=1, limit=2),
        ),
        ("StoreClient", "get_consolidation", lambda: store.get_consolidation(RUN)),
        ("StoreClient", "apply_consolidation", lambda: store.apply_consolidation(RUN)),
        ("StoreClient", "discard_consolidation", lambda: store.discard_consolidation(RUN)),
        ("StoreClient", "revert_consolidation", lambda: store.revert_consolidation(RUN)),
        ("StoreClient", "restore_memory", lambda: store.restore_memory("mem_1")),
        ("StoreClient", "get_store", lambda: store.get_store()),
        ("StoreClient", "usage", lambda: store.usage(NOW, NOW)),
        ("StoreClient", "rotate_webhook_secret", lambda: store.rotate_webhook_secret()),
        ("StoreClient", "webhook_deliveries", lambda: store.webhook_deliveries()),
        (
            "StoreClient",
            "put_keyed_memory",
            lambda: store.put_keyed_memory(["a", "b"], "k", {"v": 1}, ttl_seconds=60),
        ),
        (
            "StoreClient",
            "get_keyed_memory",
            lambda: store.get_keyed_memory(["a", "b"], "k", refresh_ttl=True),
        ),
        ("StoreClient", "delete_keyed_memory", lambda: store.delete_keyed_memory(["a"], "k")),
        (
            "StoreClient",
            "search_keyed_memories",
            lambda: store.search_keyed_memories(["a"], filter={"v": 1}, limit=2, offset=1),
        ),
        (
            "StoreClient",
            "list_keyed_namespaces",
            lambda: store.list_keyed_namespaces(prefix=["a"], max_depth=2),
        ),
        (
            "StoreClient",
            "export_session_ids",
            lambda: store.export_session_ids(cursor="0", limit=10),
        ),
        (
            "StoreClient",
            "export_session",
            lambda: store.export_session("c", after_seq=0, limit=10),
        ),
        (
            "StoreClient",
            "import_session",
            lambda: store.import_session(
                "c",
                {"message_count": 1, "created_at": NOW, "last_event_at": NOW, "expires_at": NOW},
            ),
        ),
        ("StoreClient", "export_memories", lambda: store.export_memories(cursor="0:a", limit=5)),
        (
            "StoreClient",
            "import_memories",
            lambda: store.import_memories(
                [
                    {
                        "id": "mem_1",
                        "text": "t",
                        "created_at": NOW,
                        "updated_at": NOW,
                        "expires_at": NOW,
                        "vector": "AACAPw==",
                    }
                ]
            ),
        ),
        ("StoreClient", "export_profiles", lambda: store.export_profiles(cursor="0", limit=5)),
        (
            "StoreClient",
            "import_profiles",
            lambda: store.import_profiles(
                [
                    {
                        "actor_id": "ann",
                        "fields": {
                            "city": {
                                "value": "Porto",
                                "updated_at": NOW,
                                "source": {"by": "caller"},
                            }
                        },
                    }
                ]
            ),
        ),
    ]
    for owner, name, call in calls:
        call()
        called[owner].add(name)
    assert called["MemoryClient"] == _public(MemoryClient)
    assert called["StoreClient"] == _public(StoreClient)

    routes: dict[tuple[str, str], set[str]] = {}
    for method, path, params in seen:
        matches = [
            (m, t) for m, t, _ in _operations() if m == method and _template_pattern(t).match(path)
        ]
        # the most literal template wins (".../memories/search" over ".../memories/{id}")
        best = max(matches, key=lambda mt: -mt[1].count("{"), default=None)
        assert best is not None, f"{method} {path} is no route of the document"
        routes.setdefault(best, set()).update(params)
    assert set(routes) == {(m, t) for m, t, _ in _operations()}
    for (method, template), params in routes.items():
        op = DOC["paths"][template][method.lower()]
        query = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
        assert params == query, f"{method} {template}: the client sends {params}, not {query}"


def test_the_async_client_has_the_same_methods_and_parameters_as_the_sync_one():
    for sync, asynchronous in ((MemoryClient, AsyncMemoryClient), (StoreClient, AsyncStoreClient)):
        assert _public(sync) == _public(asynchronous)
        for name in _public(sync):
            a, b = getattr(sync, name), getattr(asynchronous, name)
            assert inspect.iscoroutinefunction(b), name
            assert inspect.signature(a).parameters.keys() == inspect.signature(b).parameters.keys()
            assert [p.default for p in inspect.signature(a).parameters.values()] == [
                p.default for p in inspect.signature(b).parameters.values()
            ], name


@pytest.mark.parametrize("name", sorted(_request_components() | _answer_components()))
def test_each_model_of_the_document_is_exported(name):
    assert getattr(kividb_memory, name) is _model(name)
