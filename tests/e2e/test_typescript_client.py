"""The TypeScript client (clients/typescript/, docs/client.md "TypeScript") through Node's own
test runner: every method against the local stack, its retry rules against a scripted loopback
server, a stopped database; each adapter driven by its framework (the OpenAI Agents SDK's
Runner, the Vercel AI SDK's generateText and streamText with its mock model, a Strands agent);
and the package as a user gets it: `npm pack`, installed into an empty project, imported and
used from there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from bench.faults import Database
from kividb_memory.chat_export import ChatExportError, parse_chat_export
from local.launch import running_stack
from tests.support.chat_exports import chatgpt_export, claude_export, locomo_sessions, malformed
from tests.support.common import ROOT, needs_data
from tests.support.stack import API_KEY, Stack
from tools.scripted_model import ScriptedServer

TS = ROOT / "clients" / "typescript"


@pytest.fixture(scope="module")
def built() -> None:
    assert shutil.which("node") and shutil.which("npm"), "the TypeScript tests need node and npm"
    assert (TS / "dist" / "index.js").is_file(), "build the client first: make typescript"


def _node(args: list[str], cwd, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        args, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return done.stdout


def _suite(files: list[str], stack: Stack, passes: int, provider=None) -> None:
    """Node's test runner on ``files`` of the client against the stack (and the scripted
    provider, when given): every test passes, ``passes`` of them."""
    env = {"KIVIDB_API_URL": stack.url, "KIVIDB_API_KEY": stack.api_key}
    if provider is not None:
        env["KIVIDB_PROVIDER_URL"] = provider.url
    out = _node(["node", "--test", *files], TS, env)
    assert "# fail 0" in out and f"# pass {passes}\n" in out, out[-2000:]


def test_every_method_against_the_api_and_the_retry_rules(built, stack: Stack):
    _suite(["test/client.test.mjs", "test/retries.test.mjs"], stack, 22)


def test_consolidation_runs_are_read_applied_discarded_reverted_and_restored(
    built, stack: Stack, provider
):
    _suite(["test/consolidation.test.mjs"], stack, 2, provider)


def test_the_agents_sdk_runs_turns_on_the_openai_agents_session(built, stack: Stack):
    """`@kividb/memory/openai-agents` driven by `@openai/agents-core`'s own Runner with a
    scripted model (the SDK's `Model` interface): tool calls and results kept and read back."""
    _suite(["test/openai-agents.test.mjs"], stack, 4)


def test_the_ai_sdk_runs_the_middleware_and_the_tools(built, stack: Stack, provider):
    """`@kividb/memory/ai-sdk` under `generateText` and `streamText` of `ai` with its own
    `MockLanguageModelV4`: recall's context in front, turns kept whole, the tools called."""
    _suite(["test/ai-sdk.test.mjs"], stack, 11, provider)


def test_a_strands_agent_runs_on_the_memory_store(built, stack: Stack, provider: ScriptedServer):
    """`@kividb/memory/strands` in a Strands `Agent`'s `MemoryManager` (its tools, injection
    and extraction), the model Strands' `VercelModel` over `ai`'s `MockLanguageModelV3`."""
    _suite(["test/strands.test.mjs"], stack, 7, provider)


def test_langgraph_js_runs_graphs_and_agents_on_the_store(built, stack: Stack, provider):
    """`@kividb/memory/langgraph` under `@langchain/langgraph` itself: a `StateGraph` compiled
    with the store, `createReactAgent`'s tools through `getStore()` on LangChain's
    `FakeStreamingChatModel`, and the `BaseStore` contract (batches, filters, paging,
    namespaces, invalid labels, vectors of an `IndexConfig`, TTL)."""
    _suite(["test/langgraph.test.mjs"], stack, 10, provider)


def test_claudes_tool_runner_uses_the_memory_tool(built, stack: Stack, provider):
    """`@kividb/memory/anthropic` under the Anthropic SDK's tool runner against a loopback
    Messages API: a scripted conversation with all six commands and hostile paths."""
    _suite(["test/anthropic.test.mjs"], stack, 3, provider)


@needs_data
def test_the_chat_import_reads_exports_as_the_python_client_does(built, stack: Stack, tmp_path):
    """`importChat` and `parseChatExport` on ChatGPT and Claude exports built from LoCoMo: the
    same sessions as `kividb_memory.chat_export` reads (its parse, written to `expected.json`),
    imported and read back; each malformed export refused in the Python client's words."""
    sessions = locomo_sessions(count=3)
    exports = {"chatgpt": chatgpt_export(sessions), "claude": claude_export(sessions)}
    expected = {}
    for source, export in exports.items():
        (tmp_path / f"{source}.json").write_text(json.dumps(export))
        expected[source] = [
            {
                "session_id": c.session_id,
                "title": c.title,
                "created_at": _iso(c.created_at),
                "messages": [
                    {
                        "role": m.role,
                        "content": m.content,
                        "created_at": _iso(m.created_at),
                        "name": m.name,
                        "item": m.item,
                    }
                    for m in c.messages
                ],
            }
            for c in parse_chat_export(export, source)  # type: ignore[arg-type]
        ]
    (tmp_path / "expected.json").write_text(json.dumps(expected))
    cases = [("chatgpt", h) for h in ("no mapping", "missing node", "loop", "role", "time")]
    cases += [("claude", h) for h in ("sender", "time", "messages", "no id")]
    for n, (source, how) in enumerate(cases):
        broken = malformed(exports[source], source, how)
        (tmp_path / f"malformed-{n}.json").write_text(json.dumps(broken))
        with pytest.raises(ChatExportError) as refused:
            parse_chat_export(broken, source)  # type: ignore[arg-type]
        error = {"source": source, "error": str(refused.value)}
        (tmp_path / f"error-{n}.json").write_text(json.dumps(error))
    name = f"ts-chat-{uuid.uuid4().hex[:8]}"
    env = {
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "KIVIDB_CHAT_EXPORTS": str(tmp_path),
        "KIVIDB_STORE": name,
    }
    with stack.memory() as memory:
        memory.put_store("local", name, dimensions=3)
        try:
            out = _node(["node", "--test", "test/chat-export.test.mjs"], TS, env)
        finally:
            memory.delete_store("local", name)
    assert "# fail 0" in out and "# pass 3" in out, out[-2000:]


def _iso(moment: datetime) -> str:
    """As JavaScript's `toISOString` writes a time: UTC, milliseconds, `Z`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _docs_snippet(section: str) -> str:
    """The first ```js block of docs/integrations.md's section ``section``."""
    text = (ROOT / "docs" / "integrations.md").read_text()
    part = text[text.index(f"## {section}\n") :]
    begin = part.index("```js\n") + len("```js\n")
    return part[begin : part.index("```\n", begin)]


class _ScriptedClaude(BaseHTTPRequestHandler):
    """A Messages API on loopback: the first call asks the memory tool to create a file, the
    next ones answer in words (what it was sent is kept in ``bodies``)."""

    bodies: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.bodies.append(body)
        create = {"command": "create", "path": "/memories/ann.md", "file_text": "moved to Porto"}
        if len(self.bodies) == 1:
            content = [{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": create}]
        else:
            content = [{"type": "text", "text": "Noted: you moved to Porto."}]
        answer = {
            "id": f"msg_{len(self.bodies)}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if len(self.bodies) == 1 else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_the_integration_docs_snippets_run_as_written(built, stack: Stack):
    """The LangGraph.js and memory tool snippets of docs/integrations.md, as they are written,
    run in examples/typescript/ (where `@kividb/memory` is installed as a copy beside the
    frameworks) against the store `support-agent`; the memory tool's Claude is a loopback
    Messages API (`ANTHROPIC_BASE_URL`, which the SDK reads)."""
    folder = ROOT / "examples" / "typescript" / "dist"
    assert (folder.parent / "node_modules" / "@kividb" / "memory").is_dir(), "make test builds it"
    folder.mkdir(exist_ok=True)
    _ScriptedClaude.bodies = []
    claude = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedClaude)
    threading.Thread(target=claude.serve_forever, daemon=True).start()
    env = {
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "ANTHROPIC_API_KEY": "sk-test",
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{claude.server_address[1]}",
    }
    outputs = {}
    with stack.memory() as memory:
        memory.put_store("local", "support-agent")
        try:
            for name, section in (
                ("langgraph", "TypeScript: LangGraph.js"),
                ("anthropic", "TypeScript: Claude's memory tool"),
            ):
                script = folder / f"docs-{name}.mjs"
                script.write_text(_docs_snippet(section))
                outputs[name] = _node(["node", str(script)], folder.parent, env)
            kept = memory.store("local", "support-agent").get_keyed_memory(
                ["ann", "claude-memory"], "ann.md"
            )
        finally:
            memory.delete_store("local", "support-agent")
            claude.shutdown()
    assert outputs["langgraph"].strip() == "[ 'theme: dark' ]"
    assert outputs["anthropic"].strip() == "Noted: you moved to Porto."
    assert kept.value == {"content": "moved to Porto"}
    assert _ScriptedClaude.bodies[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]


def test_a_stopped_database_is_a_503_with_retry_after_and_retried(built, tmp_path):
    """A stack on a redis-server of its own: killed before the Node test starts (it sees 503
    `database_unavailable` with `Retry-After`, then retries a write), started again 2 s later."""
    database = Database(tmp_path / "redis")
    database.start()
    env = {
        "REDIS_URL": database.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path / "local"),
        "KIVIDB_WORKERS": "1",
    }
    try:
        with running_stack(env, log=tmp_path / "stack.log", timeout=120) as (url, _):
            with Stack(url, API_KEY, database.url).memory() as memory:
                memory.put_store("local", "down", dimensions=3)
            database.kill()
            node = subprocess.Popen(
                ["node", "--test", "test/unavailable.test.mjs"],
                cwd=TS,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={
                    **os.environ,
                    "KIVIDB_API_URL": url,
                    "KIVIDB_API_KEY": API_KEY,
                    "KIVIDB_STORE": "down",
                },
            )
            time.sleep(2.0)
            database.start()
            out, _ = node.communicate(timeout=120)
    finally:
        database.stop()
    assert node.returncode == 0 and "# pass 1" in out, out[-4000:]


def _readme_block(fence: str) -> str:
    """The first code block fenced ``fence`` (e.g. "```ts") of the README's TypeScript section."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From TypeScript") :]
    begin = section.index(fence + "\n") + len(fence) + 1
    return section[begin : section.index("```\n", begin)]


TYPED_ESM = """import { MemoryClient, NotFoundError, type Schemas } from "@kividb/memory";
const store = new MemoryClient({ baseUrl: "http://127.0.0.1:1", apiKey: "k" }).store("local", "s");
const view: Schemas["RecallView"] = await store.recall("chat", { actorId: "ann" });
const context: string = view.context;
export const found: boolean = context.length > 0 && !(view instanceof NotFoundError);
"""
TYPED_CJS = """import { MemoryClient, NotFoundError, type Schemas } from "@kividb/memory";
export async function main(): Promise<boolean> {
  const client = new MemoryClient({ baseUrl: "http://127.0.0.1:1", apiKey: "k" });
  const store = client.store("local", "s");
  const view: Schemas["RecallView"] = await store.recall("chat", { actorId: "ann" });
  const context: string = view.context;
  return context.length > 0 && !(view instanceof NotFoundError);
}
"""
WRONG = """import { MemoryClient } from "@kividb/memory";
export const n: number = new MemoryClient().store("a", "b").name;
"""


def test_the_packed_package_installs_into_an_empty_project_and_works(built, stack: Stack, tmp_path):
    """`npm pack`, installed into a project made as `npm init -y` makes one (CommonJS): the
    README's snippets run as `.mjs` (import) and `.cjs` (require), and type-check both ways
    (`.mts` resolves the import build's declarations, `.cts` the require build's; a wrong
    type is an error in both, so the check can fail). Packed without the package's `prepack`
    build: `make test` built dist/ from the same sources, and a build here would rewrite dist/
    while another run's tests beside this one import it."""
    command = ["npm", "pack", "--json", "--ignore-scripts", "--pack-destination", str(tmp_path)]
    packed = _node(command, TS, {})
    (info,) = json.loads(packed)
    tarball = tmp_path / info["filename"]
    files = {f["path"] for f in info["files"]}
    for name in ("index", "openai-agents", "ai-sdk", "strands", "langgraph", "anthropic"):
        assert {f"dist/{name}.js", f"dist/{name}.d.ts", f"dist/cjs/{name}.js"} <= files, name
    assert {"dist/cjs/package.json", "package.json"} <= files
    assert not any(f.startswith(("src/", "test/", "node_modules/", "scripts/")) for f in files)
    project = tmp_path / "app"
    project.mkdir()
    _node(["npm", "init", "-y"], project, {})
    assert json.loads((project / "package.json").read_text()).get("type", "commonjs") == "commonjs"
    # Offline (nothing downloads at test time) npm cannot read the registry's metadata of the
    # optional peers, which it reads only to check their ranges: legacy-peer-deps skips that
    # check. No peer is installed either way; online, a plain `npm install` does the same.
    install = ["npm", "install", "--no-audit", "--no-fund", "--offline", "--legacy-peer-deps"]
    _node([*install, str(tarball)], project, {})
    esm, cjs = _readme_block("```ts"), _readme_block("```js")
    assert "import { MemoryClient }" in esm and 'require("@kividb/memory")' in cjs
    (project / "main.mjs").write_text(esm)
    (project / "main.cjs").write_text(cjs)
    env = {"KIVIDB_API_URL": stack.url, "KIVIDB_API_KEY": stack.api_key}
    with stack.memory() as memory:
        memory.put_store("local", "support-agent")
        try:
            from_esm = _node(["node", "main.mjs"], project, env)
            from_cjs = _node(["node", "main.cjs"], project, env)
        finally:
            memory.delete_store("local", "support-agent")
    assert '] user: "I live in Porto"' in from_esm, from_esm
    assert '] user: "I live in Porto"' in from_cjs, from_cjs
    # `require` of the package root, as `npm init -y`'s index.js would do it
    out = _node(
        ["node", "-e", 'console.log(typeof require("@kividb/memory").MemoryClient)'], project, {}
    )
    assert out.strip() == "function"

    tsc = ["node", str(TS / "node_modules" / "typescript" / "bin" / "tsc")]
    options = ["--noEmit", "--strict", "--module", "nodenext", "--target", "es2022"]
    options += ["--lib", "es2023,dom"]
    (project / "typed.mts").write_text(TYPED_ESM)
    (project / "typed.cts").write_text(TYPED_CJS)
    _node([*tsc, *options, "typed.mts", "typed.cts"], project, {})
    for suffix in ("mts", "cts"):
        (project / f"wrong.{suffix}").write_text(WRONG)
        done = subprocess.run(
            [*tsc, *options, f"wrong.{suffix}"], cwd=project, capture_output=True, text=True
        )
        assert done.returncode != 0 and "TS2322" in done.stdout, done.stdout
