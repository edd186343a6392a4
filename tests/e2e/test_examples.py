"""Each file of examples/ runs as its docstring says, against the local stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.common import unique

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("example", "said"),
    [
        ("openai_agents_session.py", ["You are Ann.", "the session keeps 4 items"]),
        ("langchain_history.py", ["You are Ann.", "the session keeps 4 messages"]),
        (
            "langgraph_store.py",
            [
                "I will remember teal.",
                "Your favourite colour is teal.",
                "namespaces: [('users', 'ann', 'preferences')]",
            ],
        ),
    ],
)
def test_an_example_runs_against_the_local_stack(stack, memory, example, said):
    name = unique("example")
    env = {
        **os.environ,
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "KIVIDB_INSTANCE": "local",
        "KIVIDB_STORE": name,
    }
    try:
        done = subprocess.run(
            [sys.executable, str(EXAMPLES / example)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.splitlines() == said, done.stdout
    finally:
        memory.delete_store("local", name)


TS_SAID = {
    "quickstart.ts": ["## Recent messages", 'user: "I live in Porto"'],
    "openai-agents-session.ts": ["You are Ann.", "the session keeps 4 items"],
    "ai-sdk-memory.ts": ["You are Ann.", "the session keeps 4 messages"],
    "strands-memory.ts": ["You keep bees.", "the session keeps 2 messages"],
}


@pytest.mark.parametrize(("example", "said"), TS_SAID.items())
def test_a_typescript_example_runs_against_the_local_stack(stack, memory, example, said):
    """examples/typescript/, built by `make test` (tsc, strict), run twice: what it prints
    holds each of ``said``, in order, both times (an example starts afresh)."""
    built = EXAMPLES / "typescript" / "dist" / example.replace(".ts", ".js")
    assert built.is_file(), "build the examples first: make test (or make e2e) builds them"
    name = unique("example")
    env = {
        **os.environ,
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "KIVIDB_STORE": name,
    }
    try:
        for _ in range(2):
            done = subprocess.run(
                ["node", str(built)], env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr[-3000:]
            lines = iter(done.stdout.splitlines())
            assert all(any(part in line for line in lines) for part in said), done.stdout
    finally:
        memory.delete_store("local", name)


def test_every_example_is_run_here():
    ran = {"openai_agents_session.py", "langchain_history.py", "langgraph_store.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == ran
    assert {p.name for p in (EXAMPLES / "typescript" / "src").glob("*.ts")} == set(TS_SAID)
