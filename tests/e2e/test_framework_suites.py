"""The frameworks' own tests, run against our adapters on the local stack.

Each suite runs in a pytest process of its own, in the framework's unpacked source distribution
(``tools.framework_tests``; ``make test`` fetches them), with a plugin of ours
(``tests/frameworks/``) that points the tests' session factories at the adapter; the tests run
unchanged. The tests chosen are those that check a session's behaviour through those factories;
the ones left out check the framework's own backend (its Redis keys, TTL option, connection
pool, private methods) and are listed with why in docs/integrations.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.common import unique
from tests.support.stack import model_store
from tools import framework_tests

PLUGINS = Path(__file__).resolve().parent.parent / "frameworks"

AGENTS_SESSION_TESTS = "tests/extensions/memory/test_redis_session.py"
AGENTS_TESTS = [
    "test_redis_session_direct_ops",
    "test_runner_integration",
    "test_session_isolation",
    "test_get_items_with_limit",
    "test_pop_from_empty_session",
    "test_add_empty_items_list",
    "test_unicode_content",
    "test_special_characters_and_json_safety",
    "test_data_integrity_with_problematic_strings",
    "test_concurrent_access",
    "test_get_items_limit_returns_fewer_when_history_exhausted",
    "test_session_settings_default",
    "test_redis_compaction_preserves_encryption_wrapper",  # two cases
]
AGENTS_CASES = len(AGENTS_TESTS) + 1


def _run_suite(
    root: Path, plugin: str, node_ids: list[str], env: dict[str, str], python: Path | None = None
) -> str:
    done = subprocess.run(
        [
            str(python or sys.executable),
            "-m",
            "pytest",
            "-q",
            "-p",
            plugin,
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(root),
            *node_ids,
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout


SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|error)s?\b")


def _outcomes(out: str) -> dict[str, int]:
    """The counts of pytest's summary line (the output's last line) by outcome, warnings left
    out: ``{"passed": 137, "deselected": 5}``. Read from that line alone, so a test whose name
    holds "failed" or "error" is not taken for a failure."""
    last = out.strip().splitlines()[-1]
    return {outcome: int(count) for count, outcome in SUMMARY.findall(last)}


def _env(stack, store: str) -> dict[str, str]:
    return {
        **os.environ,
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "KIVIDB_INSTANCE": "local",
        "KIVIDB_STORE": store,
        "PYTHONPATH": str(PLUGINS),
        # The outer run's options (e.g. --durations) are not for the framework's own run.
        "PYTEST_ADDOPTS": "",
    }


@pytest.fixture
def suite_store(memory):
    name = unique("suite")
    memory.put_store("local", name, dimensions=3)
    yield name
    memory.delete_store("local", name)


def test_the_agents_sdks_own_session_tests_pass_on_kividb_session(stack, suite_store):
    root = framework_tests.source("openai-agents")
    node_ids = [f"{AGENTS_SESSION_TESTS}::{name}" for name in AGENTS_TESTS]
    out = _run_suite(root, "kividb_agents_plugin", node_ids, _env(stack, suite_store))
    assert _outcomes(out) == {"passed": AGENTS_CASES}, out[-2000:]


LANGGRAPH_TESTS = ["tests/test_store.py", "tests/test_async_store.py"]
LANGGRAPH_SQLITE_ONLY = [
    "tests/test_store.py::test_vector_store_initialization",  # SQLite's tables, via store.conn
    "tests/test_store.py::test_nonnull_migrations",  # SqliteStore.MIGRATIONS
    "tests/test_store.py::test_escape_glob_literal",  # a private helper of its SQL
    "tests/test_store.py::test_namespace_match_pattern",  # a private helper of its SQL
    "tests/test_store.py::test_list_namespaces_prefix_uses_indexable_condition",  # its SQL
]
LANGGRAPH_CASES = 137


def test_langgraphs_own_store_tests_pass_on_kividb_store(stack):
    """LangGraph's store tests for its SQLite store, each store a new one of the stack's."""
    root = framework_tests.source("langgraph-checkpoint-sqlite")
    deselect = [arg for node in LANGGRAPH_SQLITE_ONLY for arg in ("--deselect", node)]
    env = {**_env(stack, "unused"), "KIVIDB_STORE": ""}
    out = _run_suite(root, "kividb_langgraph_plugin", [*LANGGRAPH_TESTS, *deselect], env)
    expected = {"passed": LANGGRAPH_CASES, "deselected": len(LANGGRAPH_SQLITE_ONLY)}
    assert _outcomes(out) == expected, out[-2000:]


STRANDS_TESTS = [
    "tests/strands/memory/test_injection_integration.py::"
    "test_memory_injection_reaches_model_but_not_durable_history",
]
STRANDS_SCENARIOS = PLUGINS / "strands_scenarios.py"  # ours, with Strands' test double: 6 tests
STRANDS_CASES = 7
STRANDS_PYTHON = Path(__file__).resolve().parents[2] / ".venv-strands" / "bin" / "python"


def test_strands_own_memory_injection_test_and_ours_pass_on_kividb_memory_store(
    open_stack, memory, provider, tmp_path
):
    """In the Strands virtualenv (Strands pins mcp<2.2; `make test` builds it). Our scenarios
    run from a copy in a folder of their own: beside this suite, pytest would load this
    project's conftest files into Strands' run."""
    assert STRANDS_PYTHON.is_file(), "make .venv-strands/.installed (make test does)"
    path = model_store(memory, provider)
    name = path.rsplit("/", 1)[1]
    try:
        root = framework_tests.source("strands-agents")
        env = {**_env(open_stack, name), "KIVIDB_ACTOR": "ann"}
        scenarios = tmp_path / "kividb_strands_scenarios.py"
        shutil.copyfile(STRANDS_SCENARIOS, scenarios)
        tests = [*STRANDS_TESTS, str(scenarios)]
        out = _run_suite(root, "kividb_strands_plugin", tests, env, STRANDS_PYTHON)
        assert _outcomes(out) == {"passed": STRANDS_CASES}, out[-2000:]
    finally:
        memory.delete_store("local", name)


CREWAI_TESTS = [
    "tests/memory/test_unified_memory.py",
    "tests/memory/test_memory_root_scope.py",
    "tests/memory/test_lancedb_filter_escaping.py",
    "tests/memory/test_lancedb_update.py",
    "tests/memory/test_dimension_mismatch.py",
    "tests/memory/test_storage_factory.py",
]
CREWAI_LEFT_OUT = [
    # 52,000 records through list_records: beyond the 11,000 a scope lists (the API reads
    # 1,000 a page, 10,000 deep); and over a minute of writes on this machine
    "tests/memory/test_unified_memory.py::test_lancedb_list_records_exceeding_scan_cap",
    # its records are 3,072-dimensional where the same run's mock embedder is 1,536: a store's
    # dimensions are set when it is made, LanceDB takes the first save's
    "tests/memory/test_unified_memory.py::test_composite_score_reranks_results",
    # "/share\\" as a prefix of "/share\\docs": a scope prefix matches whole segments here,
    # a string prefix (SQL LIKE) in LanceDB
    "tests/memory/test_lancedb_filter_escaping.py::"
    "test_percent_underscore_and_backslash_in_scope_names_match_literally",
    # reset_all, then vectors of another size in the same storage: LanceDB drops and remakes
    # its table; a store keeps its dimensions
    "tests/memory/test_dimension_mismatch.py::"
    "test_memory_reset_all_rebuilds_reopened_store_with_new_dimension",
]
CREWAI_CASES = 164
CREWAI_PYTHON = Path(__file__).resolve().parents[2] / ".venv-crewai" / "bin" / "python"


def test_crewais_own_memory_tests_pass_on_kividb_storage(stack):
    """In the CrewAI virtualenv (CrewAI pins mcp<2 and pydantic<2.13; `make test` builds it).
    Every LanceDB storage the tests make, directly or through ``Memory(storage=path)``, is a
    ``KiviDBStorage`` on a store of its own (tests/frameworks/kividb_crewai_plugin.py)."""
    assert CREWAI_PYTHON.is_file(), "make .venv-crewai/.installed (make test does)"
    root = framework_tests.source("crewai")
    deselect = [arg for node in CREWAI_LEFT_OUT for arg in ("--deselect", node)]
    env = {**_env(stack, "unused"), "KIVIDB_STORE": ""}
    out = _run_suite(root, "kividb_crewai_plugin", [*CREWAI_TESTS, *deselect], env, CREWAI_PYTHON)
    expected = {"passed": CREWAI_CASES, "deselected": len(CREWAI_LEFT_OUT)}
    assert _outcomes(out) == expected, out[-2000:]
