"""The rule that keeps a tenant crossing from being one forgotten line away: a handler under
``functions/`` is one sentence (validated request in, one use case of ``agent_memory.flows``
called, model out) and never checks a scope, reserves quota, counts usage, tells webhooks or adds
a metric itself; those belong to the use case (docs/design.md, "Use cases").

The checker reads each handler's source (``ast``), so it also runs on sources made up here, to
show that it catches what it is for."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.common import ROOT

FUNCTIONS = ROOT / "functions"
NOT_HANDLERS = {"console", "mcp", "authorizer"}
"""``console`` serves static files (no API route); ``mcp`` is the MCP server, which calls this
API over HTTP with the caller's key, so every tool goes through a handler checked here; the
``authorizer`` is the authentication itself (``edge.auth.authorize``), in front of every
route."""

FORBIDDEN_CALLS = {
    # scope checks (agent_memory.scopes, flows.reach)
    "actor",
    "actor_for",
    "whole_store",
    "writes",
    "claim_session",
    "reachable_session",
    "reachable_memory",
    "reachable_superseded",
    "require_write",
    "require_whole_store",
    "require_admin",
    # quota, usage, webhook events, metrics
    "reserve",
    "count",
    "count_usage",
    "tell",
    "notify",
    "flush",
    "add_metric",
}
FORBIDDEN_MODULES = {
    "agent_memory.scopes",
    "agent_memory.flows.reach",
    "agent_memory.flows.quota",
    "agent_memory.flows.effects",
    "aws_lambda_powertools.metrics",
}
FORBIDDEN_ATTRIBUTES = {
    # a handler reaches services only through a use case: never a store's parts, the
    # container's services or the caller's identity
    "runtime",
    "principal",
    "sessions",
    "memories",
    "keyed",
    "session_transfer",
    "memory_transfer",
    "control",
    "limits",
    "usage",
    "outbox",
    "effects",
    "scope",
}
ONE_SENTENCE = (
    "its body (after the docstring) must be `return <use case call>`, or "
    "`<use case call>` then `return no_content()`"
)


def handler_problems(source: str) -> list[str]:
    """What breaks the rule in a handler module's ``source``: one line each, empty when none."""
    tree = ast.parse(source)
    problems: list[str] = []
    use_cases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module in FORBIDDEN_MODULES:
                problems.append(f"imports {node.module}")
            if node.module.startswith("agent_memory.flows."):
                use_cases |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in FORBIDDEN_CALLS:
                problems.append(f"calls {name}() itself (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            problems.append(f"reads .{node.attr} (line {node.lineno}): call a use case instead")
    for function in _entry_points(tree):
        problems += [f"{function.name}: {p}" for p in _sentence_problems(function, use_cases)]
    return problems


def _entry_points(tree: ast.Module) -> list[ast.FunctionDef]:
    """The module's routes (functions decorated ``@app.<method>``) and its ``lambda_handler``
    when it is a function of its own (the background and webhook functions)."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        routes = any(
            isinstance(d, ast.Call)
            and isinstance(d.func, ast.Attribute)
            and d.func.attr in {"get", "post", "put", "patch", "delete"}
            for d in node.decorator_list
        )
        if routes or node.name == "lambda_handler":
            found.append(node)
    return found


def _sentence_problems(function: ast.FunctionDef, use_cases: set[str]) -> list[str]:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    shapes_ok = (len(body) == 1 and isinstance(body[0], ast.Return)) or (
        len(body) == 2
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Call)
        and isinstance(body[1], ast.Return)
        and ast.unparse(body[1]) == "return no_content()"
    )
    if not shapes_ok:
        return [ONE_SENTENCE]
    called = {
        node.func.id
        for statement in body
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    if not called & use_cases:
        return ["calls no use case of agent_memory.flows"]
    return []


def _handler_modules() -> list[Path]:
    modules = []
    for folder in sorted(FUNCTIONS.iterdir()):
        if folder.is_dir() and folder.name not in NOT_HANDLERS:
            modules += [p for p in folder.glob("*.py") if p.stem == folder.name]
    return modules


def test_every_function_folder_has_its_handler_module_checked_here():
    checked = {p.parent.name for p in _handler_modules()}
    folders = {p.name for p in FUNCTIONS.iterdir() if p.is_dir()} - NOT_HANDLERS
    assert checked == folders and len(checked) >= 38


@pytest.mark.parametrize("module", _handler_modules(), ids=lambda p: p.parent.name)
def test_a_handler_is_one_sentence_and_leaves_scope_quota_usage_events_and_metrics_to_its_use_case(
    module,
):
    assert handler_problems(module.read_text()) == []


GOOD = '''
from agent_memory.flows.memories import forget_memory, memory_view
from agent_memory.edge.routes import no_content

@app.get("/x")
def get_x(instance_id, store, memory_id):
    """A memory."""
    return memory_view(app.store(instance_id, store), memory_id)

@app.delete("/x")
def delete_x(instance_id, store, memory_id):
    forget_memory(app.store(instance_id, store), memory_id)
    return no_content()
'''

BAD = {
    "checks the actor itself": """
from agent_memory.flows.memories import memory_list
@app.get("/x")
def get_x(instance_id, store, actor_id):
    handle = app.store(instance_id, store)
    handle.actor(actor_id)
    return memory_list(handle, actor_id)
""",
    "reserves quota itself": """
from agent_memory.flows.memories import keep_memory
@app.post("/x")
def post_x(instance_id, store, body):
    app.runtime.reserve(app.principal, instance_id, "memories", 1)
    return keep_memory(app.store(instance_id, store), body)
""",
    "adds a metric": """
from agent_memory.observability import metrics
from agent_memory.flows.memories import keep_memory
@app.post("/x")
def post_x(instance_id, store, body):
    return keep_memory(app.store(instance_id, store), body) or metrics.add_metric(name="X")
""",
    "calls a part directly": """
@app.patch("/x")
def patch_x(instance_id, store, memory_id, body):
    return app.store(instance_id, store).memories.patch(memory_id, body)
""",
    "takes two steps": """
from agent_memory.flows.memories import memory_view
@app.get("/x")
def get_x(instance_id, store, memory_id):
    store_handle = app.store(instance_id, store)
    return memory_view(store_handle, memory_id)
""",
}


def test_the_checker_passes_a_handler_that_keeps_the_rule():
    assert handler_problems(GOOD) == []


@pytest.mark.parametrize("source", BAD.values(), ids=list(BAD))
def test_the_checker_catches_each_way_of_breaking_the_rule(source):
    assert handler_problems(source) != []
