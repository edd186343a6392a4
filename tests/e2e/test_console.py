"""The web console in headless Chromium (Debian's /usr/bin/chromium driven by Playwright), against
the local stack, with real data: a LoCoMo replay through a store on the scripted model
(``tools.scripted_model``), so sessions have summaries and memories exist (seeded through the API
instead when the dataset is absent).

Every test checks, besides its own behaviour, that the page logged no console error it did not
expect (a failed fetch's status is expected only where the test provokes it), that no request
left 127.0.0.1, and, on each page it visits, that axe-core finds no critical or serious
accessibility violation. With ``KIVIDB_CONSOLE_SCREENSHOTS=<folder>`` (``make
console-screenshots``) each page's screenshot is saved there (the README links docs/console/).

The HTTP answers of the console's own routes (headers, 404s, traversal) are checked with httpx.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from agent_memory.scopes import KeyScope
from tests.support.browser import STATIC
from tests.support.common import ROOT, unique, wait_for
from tests.support.stack import API_KEY, Stack, model_store
from tools import admin
from tools.replay import DEFAULT_FILES
from tools.webhook_receiver import WebhookReceiver

# The machine is shared: give the page time before an assertion fails (Playwright's default is 5 s).
expect.set_options(timeout=15_000)
pytestmark = pytest.mark.usefixtures("console_built")

BASE = "/instances/local/agent-memory"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HAVE_DATA = all(path.is_file() for path in DEFAULT_FILES.values())
SESSION_1 = "locomo:conv-26:session-1"
SESSION_2 = "locomo:conv-26:session-2"
ACTOR = "locomo:conv-26"
UNAVAILABLE = "The database cannot be reached right now; retry in a moment."


# --- the stack, its data and the browser: one of each for the module --------------------------


@dataclass
class World:
    stack: Stack
    api: httpx.Client
    model: str  # path of the store on the scripted model, holding the replayed sessions
    notes: str  # path of a store without models (client vectors of 3 dimensions)
    made: list[str] = field(default_factory=list)

    def name(self, path: str) -> str:
        return path.rsplit("/", 1)[1]


def _seed_conversation(api: httpx.Client, store: str) -> None:
    """Without the LoCoMo file: two sessions of first-person sentences, through the API."""
    for number, topic in ((1, "painting"), (2, "hiking")):
        events = []
        for i in range(12):
            said = f"I went {topic} with my friends on day {i}."
            events.append({"role": "user", "name": "Caroline", "content": said})
            reply = f"That sounds lovely, tell me more about day {i}."
            events.append({"role": "assistant", "name": "Melanie", "content": reply})
        answer = api.post(
            f"{store}/sessions/locomo:conv-26:session-{number}/events",
            json={"actor_id": ACTOR, "events": events},
        )
        assert answer.status_code == 200, answer.text


@pytest.fixture(scope="module")
def world(open_stack: Stack, provider) -> Iterator[World]:
    api = open_stack.client()
    made: list[str] = []
    model = model_store(api, provider, made, summarize_after=10, keep_recent=4)
    if HAVE_DATA:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "tools.replay",
                "--url",
                open_stack.url,
                "--api-key",
                API_KEY,
                "--quiet",
                "--store",
                model.rsplit("/", 1)[1],
                "--sessions",
                "2",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    else:
        _seed_conversation(api, model)
    for session in (SESSION_1, SESSION_2):
        assert api.post(f"{model}/sessions/{session}/extract").status_code == 202

    def extracted() -> bool:
        views = [api.get(f"{model}/sessions/{s}").json() for s in (SESSION_1, SESSION_2)]
        # (the schedule the replay armed may still be due: "waiting" until it fires, in 30 s)
        return all(
            v["summary"]
            and v["extraction"]["unread"] == 0
            and v["extraction"]["status"] != "running"
            for v in views
        )

    wait_for(extracted, 60, "extraction and summaries of the replayed sessions")
    assert api.get(f"{model}/memories").json()["total"] > 0

    notes = f"{BASE}/{unique('notes')}"
    made.append(notes)
    assert api.put(notes, json={"dimensions": 3}).status_code == 201
    for text, actor, vector, kind in (
        ("Deploys to eu-west-1 on Fridays", "user-7", [1, 0, 0], "semantic"),
        ("Prefers green tea in the afternoon", "user-7", [0, 1, 0], "semantic"),
        ("Went to Lisbon in May 2023", "user-7", [0, 0, 1], "episodic"),
        ("Someone else likes chess", "user-9", [0.6, 0.8, 0], "semantic"),
    ):
        body = {"text": text, "actor_id": actor, "vector": vector, "type": kind}
        assert api.post(f"{notes}/memories", json=body).status_code == 201
    yield World(open_stack, api, model, notes, made)
    for path in made:
        api.delete(path)
    api.close()


# --- the console's own routes, over HTTP -------------------------------------------------------


def _asset_names() -> tuple[str, str]:
    page = (STATIC / "index.html").read_text()
    (script,) = re.findall(r'src="console/(app-[A-Z0-9]{8}\.js)"', page)
    (style,) = re.findall(r'href="console/(app-[A-Z0-9]{8}\.css)"', page)
    return script, style


def test_the_page_and_its_files_load_without_a_key_with_strict_headers(world):
    script, style = _asset_names()
    with httpx.Client(base_url=world.stack.url) as anonymous:
        page = anonymous.get("/console", headers={"Accept-Encoding": "identity"})
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert page.headers["cache-control"] == "no-cache"
        assert page.headers["content-security-policy"] == CSP
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["referrer-policy"] == "no-referrer"
        assert "content-encoding" not in page.headers
        assert page.content == (STATIC / "index.html").read_bytes()
        again = anonymous.get("/console", headers={"If-None-Match": page.headers["etag"]})
        assert again.status_code == 304 and again.content == b""

        code = anonymous.get(f"/console/{script}", headers={"Accept-Encoding": "gzip"})
        assert code.status_code == 200
        assert code.headers["content-type"] == "text/javascript; charset=utf-8"
        assert code.headers["cache-control"] == "public, max-age=31536000, immutable"
        assert code.headers["content-encoding"] == "gzip"
        assert code.content == (STATIC / script).read_bytes()  # httpx decodes the gzip
        refused = anonymous.get(f"/console/{style}", headers={"Accept-Encoding": "gzip;q=0"})
        assert "content-encoding" not in refused.headers
        assert refused.headers["content-type"] == "text/css; charset=utf-8"
        assert int(code.headers["content-length"]) < len(code.content)  # sent compressed
        assert code.headers["vary"] == "Accept-Encoding" and code.headers["etag"]


@pytest.mark.parametrize(
    "path",
    [
        "/console/index.html",
        "/console/nothing.js",
        "/console/../template.yaml",
        "/console/..%2F..%2Ftemplate.yaml",
        "/console/%2e%2e/%2e%2e/template.yaml",
        "/console/..%5c..%5ctemplate.yaml",
        "/console/static/index.html",
        "/console//etc/passwd",
        "/console/%2Fetc%2Fpasswd",
        "/console/console.py",
        "/console/app.js%00.html",
        "/console/" + "a" * 3000,
    ],
)
def test_any_other_console_path_is_a_404_in_the_error_shape(world, path):
    with httpx.Client(base_url=world.stack.url) as anonymous:
        answer = anonymous.get(httpx.URL(world.stack.url + path))
    if path == "/console/../template.yaml":
        # httpx resolves the dot segments first, as browsers do: this is GET /template.yaml,
        # which no route serves (API Gateway's own 404).
        assert answer.status_code == 404 and answer.json() == {"message": "Not Found"}
        return
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-security-policy"] == CSP
    body = answer.json()
    assert body["error"] == "not_found" and set(body) == {"error", "message"}
    assert "template" not in answer.text and "root:" not in answer.text


def test_the_console_routes_never_read_a_key_and_the_api_still_wants_one(world):
    with httpx.Client(base_url=world.stack.url) as anonymous:
        assert (
            anonymous.get("/console", headers={"Authorization": "Bearer nope"}).status_code == 200
        )
        refused = anonymous.get("/agent-memory")
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"


# --- sign in, sign out, 401 --------------------------------------------------------------------


def test_sign_in_keeps_the_key_in_this_tab_only_and_sign_out_forgets_it(console):
    page = console.page
    console.expected_statuses = {401}
    console.open()
    expect(page.get_by_role("heading", name="KiviDB agent memory")).to_be_visible()
    console.shot("sign-in")
    page.get_by_label("API key").fill("kvm_not_a_key_000000000000000000000000")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#api-key-problem")).to_contain_text("That key was refused")
    assert page.evaluate("sessionStorage.length") == 0
    page.get_by_label("API key").fill(console.stack.api_key)
    page.get_by_role("button", name="Sign in").click()
    console.heading("Agent memory")
    assert page.evaluate("sessionStorage.getItem('kividb.console.apiKey')") == console.stack.api_key
    assert page.evaluate("localStorage.length") == 0
    assert page.evaluate("document.cookie") == ""
    assert console.stack.api_key not in page.url
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def test_a_401_at_any_point_returns_to_sign_in_with_the_reason(console, world):
    console.expected_statuses = {401}
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.notes)}")
    console.heading(f"Store {world.name(world.notes)}")
    # The key stops being valid (as a revoked one would): the next call is a 401.
    console.page.evaluate("sessionStorage.setItem('kividb.console.apiKey', 'kvm_revoked_0000')")
    console.page.reload()
    expect(console.page.get_by_text("You were signed out.")).to_be_visible()
    expect(console.page.get_by_role("alert")).to_contain_text("API key")
    assert console.page.evaluate("sessionStorage.length") == 0
    assert console.page.url.endswith(f"#/instances/local/agent-memory/{world.name(world.notes)}")
    console.page.get_by_label("API key").fill(console.stack.api_key)
    console.page.get_by_role("button", name="Sign in").click()
    console.heading(f"Store {world.name(world.notes)}")  # back where the person was


# --- stores ------------------------------------------------------------------------------------


def test_every_store_is_listed_with_its_database_and_an_unreachable_one_is_named(
    console, world, capsys
):
    dead = unique("dead")
    control = ["--control-url", world.stack.redis_url, "--release-hold", "0"]
    assert (
        admin.main(
            [
                *control,
                "register-instance",
                "local",
                dead,
                "redis://127.0.0.1:1/0",
                "--allow-unreachable",
            ]
        )
        == 0
    )
    try:
        console.sign_in()
        page = console.page
        console.heading("Agent memory")
        row = page.get_by_role("row").filter(has_text=world.name(world.model))
        expect(row.get_by_role("cell").first).to_have_text("local")
        warning = page.get_by_role("alert").filter(has_text="could not be reached")
        expect(warning).to_contain_text(dead)
        expect(warning).to_contain_text("The database cannot be reached right now")
        console.shot("stores")
        page.get_by_role("navigation", name="Databases").get_by_role(
            "link", name="Database local"
        ).click()
        console.heading("Database local")
        expect(page.get_by_role("link", name=world.name(world.notes))).to_be_visible()
        console.shot("instance")
    finally:
        assert admin.main([*control, "remove-instance", "local", dead]) == 0
        capsys.readouterr()


def test_create_a_store_with_every_setting_and_the_apis_problems_beside_their_fields(
    console, world
):
    name = unique("made")
    path = f"{BASE}/{name}"
    world.made.append(path)
    console.expected_statuses = {422}
    console.sign_in("/instances/local/create")
    page = console.page
    console.heading("Create a store on local")
    page.get_by_label("Store name").fill(name)
    llm = page.get_by_role("group", name=re.compile("Language model"))
    llm.get_by_label("Provider").select_option("openai")
    llm.get_by_label("Model").fill("gpt-4o-mini")
    llm.get_by_role("button", name="Set key").click()
    page.get_by_label("New language model API key").fill("sk-test-0123456789")
    page.get_by_label("Dimensions").fill("8")
    # Each setting is labelled in words, its API name in its help.
    for label, setting, value in (
        ("Extraction delay (seconds)", "extraction_delay_seconds", "45"),
        ("Summarize after (messages)", "summarize_after", "30"),
        ("Keep recent (messages)", "keep_recent", "6"),
        ("Forget sessions after (seconds)", "session_ttl_seconds", "7200"),
        ("Keep memories for (seconds)", "memory_ttl_seconds", "86400"),
        ("Duplicate threshold", "dedupe_threshold", "0"),
    ):
        field = page.get_by_label(label, exact=True)
        field.fill(value)
        expect(page.locator(f"#h-{setting}")).to_contain_text(f"{setting} in the API")
    page.get_by_label("Redact personal data").uncheck()
    page.get_by_label("Redact card numbers").uncheck()
    page.get_by_role("button", name="Add a custom type").click()
    page.get_by_label("Type 1 name").fill("order_issue")
    page.get_by_label("Type 1 description").fill("A problem with an order")
    page.get_by_role("button", name="Create store").click()
    # The API's 422 detail, next to the field it names (and nothing was created).
    problem = page.locator("#p-dedupe_threshold")
    expect(problem).to_contain_text("greater than 0")
    field = page.get_by_label("Duplicate threshold", exact=True)
    expect(field).to_have_attribute("aria-invalid", "true")
    assert "p-dedupe_threshold" in (field.get_attribute("aria-describedby") or "")
    assert world.api.get(path).status_code == 404
    console.shot("create-store-invalid")
    field.fill("0.9")
    page.get_by_role("button", name="Create store").click()
    console.heading(f"Store {name}")
    expect(page.get_by_text("The store was created.")).to_be_visible()
    stored = world.api.get(path).json()
    assert {
        k: stored[k]
        for k in (
            "llm_provider",
            "llm_model",
            "has_llm_api_key",
            "dimensions",
            "extraction_delay_seconds",
            "summarize_after",
            "keep_recent",
            "session_ttl_seconds",
            "memory_ttl_seconds",
            "dedupe_threshold",
            "redact_pii",
            "redact_card_digit_runs",
            "custom_types",
        )
    } == {
        "llm_provider": "openai",
        "llm_model": "gpt-4o-mini",
        "has_llm_api_key": True,
        "dimensions": 8,
        "extraction_delay_seconds": 45,
        "summarize_after": 30,
        "keep_recent": 6,
        "session_ttl_seconds": 7200,
        "memory_ttl_seconds": 86400,
        "dedupe_threshold": 0.9,
        "redact_pii": False,
        "redact_card_digit_runs": False,
        "custom_types": [
            {"name": "order_issue", "description": "A problem with an order", "examples": None}
        ],
    }
    assert "sk-test" not in page.content()  # write-only: shown as present, never echoed
    expect(page.locator("dd[data-key]").first).to_have_text("present")


def creating(console, world, prefix: str) -> tuple[str, str, Any]:
    """Sign in on the create-a-store page with a new store's name typed: its name, its API path
    (deleted after the module) and the page. A 422 is expected: these tests provoke one."""
    name = unique(prefix)
    path = f"{BASE}/{name}"
    world.made.append(path)
    console.expected_statuses = {422}
    console.sign_in("/instances/local/create")
    console.page.get_by_label("Store name").fill(name)
    return name, path, console.page


def test_a_store_on_amazon_bedrock_asks_for_a_region_and_no_key(console, world):
    name, path, page = creating(console, world, "bedrock")
    llm = page.get_by_role("group", name=re.compile("Language model"))
    llm.get_by_label("Provider").select_option("bedrock")
    llm.get_by_label("Model").fill("amazon.nova-lite-v1:0")
    expect(llm.get_by_role("button", name="Set key")).to_have_count(0)  # the role signs
    embed = page.get_by_role("group", name=re.compile("Embeddings"))
    embed.get_by_label("Provider").select_option("bedrock")
    embed.get_by_label("Model").fill("amazon.titan-embed-text-v2:0")
    page.get_by_label("Dimensions").fill("256")
    page.get_by_role("button", name="Create store").click()
    expect(page.get_by_role("alert")).to_contain_text("aws_region is required")
    page.get_by_label("AWS region").fill("eu-central-1")
    page.get_by_role("button", name="Create store").click()
    console.heading(f"Store {name}")
    stored = world.api.get(path).json()
    assert {
        k: stored[k]
        for k in ("llm_provider", "embed_provider", "aws_region", "llm_base_url", "has_llm_api_key")
    } == {
        "llm_provider": "bedrock",
        "embed_provider": "bedrock",
        "aws_region": "eu-central-1",
        "llm_base_url": None,
        "has_llm_api_key": False,
    }


def test_a_reranker_is_chosen_with_its_key_and_candidates_and_shown_on_the_store(console, world):
    name, path, page = creating(console, world, "rerank")
    rerank = page.get_by_role("group", name=re.compile("Reranker"))
    rerank.get_by_label("Provider").select_option("llm")
    expect(rerank.get_by_label("Model")).to_have_count(0)  # the language model's is used
    page.get_by_role("button", name="Create store").click()
    expect(page.get_by_role("alert")).to_contain_text("scores with the store's language model")
    assert world.api.get(path).status_code == 404  # nothing was made
    rerank.get_by_label("Provider").select_option("cohere")
    rerank.get_by_label("Model").fill("rerank-v3.5")
    rerank.get_by_role("button", name="Set key").click()
    page.get_by_label("New reranker API key").fill("co-secret-key")
    rerank.get_by_label("Candidates").fill("80")
    page.get_by_role("button", name="Create store").click()
    console.heading(f"Store {name}")
    stored = world.api.get(path).json()
    assert {
        k: stored[k]
        for k in (
            "rerank_provider",
            "rerank_model",
            "rerank_base_url",
            "has_rerank_api_key",
            "rerank_candidates",
        )
    } == {
        "rerank_provider": "cohere",
        "rerank_model": "rerank-v3.5",
        "rerank_base_url": None,
        "has_rerank_api_key": True,
        "rerank_candidates": 80,
    }
    facts = page.locator("dl.facts")
    expect(facts.filter(has_text="Reranker provider")).to_contain_text("cohere")
    expect(page.locator('[data-key="present"]')).to_have_count(1)  # the reranker's, never shown
    expect(page.get_by_text("co-secret-key")).to_have_count(0)
    console.go(f"/instances/local/agent-memory/{name}/settings")
    rerank = page.get_by_role("group", name=re.compile("Reranker"))
    expect(rerank.get_by_text("A key is stored (it is never shown).")).to_be_visible()
    # Another provider: the key stays with the one it was given for, and voyage needs its own.
    rerank.get_by_label("Provider").select_option("voyage")
    expect(rerank.get_by_label("Model")).to_have_value("")  # not cohere's model
    rerank.get_by_label("Model").fill("rerank-2")
    expect(
        rerank.get_by_text(re.compile("The stored key is dropped with this change"))
    ).to_be_visible()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_role("alert")).to_contain_text("needs rerank_api_key")
    assert world.api.get(path).json() == stored  # nothing changed, the key kept
    rerank.get_by_role("button", name="Set key").click()
    page.get_by_label("New reranker API key").fill("pa-voyage-key")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("The settings were saved.")).to_be_visible()
    stored = world.api.get(path).json()
    assert (stored["rerank_provider"], stored["has_rerank_api_key"]) == ("voyage", True)
    # A value of a field the provider hides is not sent: none saves whatever Candidates held.
    console.go(f"/instances/local/agent-memory/{name}/settings")
    rerank = page.get_by_role("group", name=re.compile("Reranker"))
    rerank.get_by_label("Candidates").fill("0")
    rerank.get_by_label("Provider").select_option("none")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("The settings were saved.")).to_be_visible()
    stored = world.api.get(path).json()
    assert (
        stored["rerank_provider"],
        stored["rerank_model"],
        stored["has_rerank_api_key"],
        stored["rerank_candidates"],
    ) == ("none", None, False, 80)


def test_the_all_stores_page_creates_a_store_on_a_database_picked_or_typed(console, world):
    console.sign_in()
    page = console.page
    console.heading("Agent memory")
    database = page.get_by_label("Create a store on database")
    expect(database).to_have_value("local")  # the databases of the listing, to pick from
    page.get_by_role("button", name="Create a store", exact=True).click()
    console.heading("Create a store on local")
    expect(page.get_by_label("Store name")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    console.heading("Agent memory")
    # A database the listing does not name (one without stores): typed, from the keyboard.
    database.select_option(label="Another database (type its id)")
    page.get_by_role("button", name="Create a store", exact=True).click()
    typed = page.get_by_label("Database id")
    expect(typed).to_be_focused()
    expect(typed).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#p-create-instance")).to_have_text("Type the database's id.")
    console.accessible()
    typed.fill("local")
    typed.press("Enter")
    console.heading("Create a store on local")


def test_an_empty_organization_is_led_to_create_its_first_store(console, world, tenant):
    name = unique("first")
    console.sign_in(api_key=tenant.api_key)
    page = console.page
    console.heading("Agent memory")
    empty = page.locator(".state.empty")
    expect(empty).to_contain_text("No stores yet.")
    expect(empty).to_contain_text("with the form above")
    # No listing names a database of an organization without stores: the id is typed.
    database = page.get_by_role("textbox", name="Create a store on database")
    expect(database).to_have_value("")
    console.shot("stores-empty")
    database.fill(tenant.instance_id)
    page.get_by_role("button", name="Create a store", exact=True).click()
    console.heading(f"Create a store on {tenant.instance_id}")
    page.get_by_label("Store name").fill(name)
    page.get_by_role("button", name="Create store").click()
    console.heading(f"Store {name}")
    path = f"/instances/{tenant.instance_id}/agent-memory/{name}"
    with world.stack.client(tenant.api_key) as client:
        assert client.get(path).status_code == 200
        assert client.delete(path).status_code == 204


def test_the_base_url_hint_is_true_on_this_stack_and_on_the_service(console, world, provider):
    name = unique("custom")
    path = f"{BASE}/{name}"
    world.made.append(path)
    console.sign_in("/instances/local/create")
    page = console.page
    page.get_by_label("Store name").fill(name)
    llm = page.get_by_role("group", name=re.compile("Language model"))
    llm.get_by_label("Provider").select_option("custom")
    hint = llm.locator("#h-llm_base_url")
    # The console cannot tell which rule the API applies (no field says so): the hint gives both.
    expect(hint).to_have_text(
        "The base URL of an OpenAI-compatible server. The deployed service takes https:// URLs on "
        "public addresses only; a local stack started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 also "
        "takes http:// and loopback or private addresses, such as http://127.0.0.1:8765/v1."
    )
    # This stack allows them (tests/e2e/conftest.py): a loopback http:// URL is saved.
    llm.get_by_label("Model").fill("scripted")
    llm.get_by_label("Base URL").fill(provider.url)
    page.get_by_role("button", name="Create store").click()
    console.heading(f"Store {name}")
    assert world.api.get(path).json()["llm_base_url"] == provider.url


def test_change_settings_replace_and_remove_a_key_then_delete_after_typing_the_name(console, world):
    name = unique("edit")
    path = f"{BASE}/{name}"
    world.made.append(path)
    body = {"llm_provider": "openai", "llm_model": "gpt-4o-mini", "llm_api_key": "sk-old"}
    assert world.api.put(path, json=body).status_code == 201
    console.expected_statuses = {422}
    console.sign_in(f"/instances/local/agent-memory/{name}/settings")
    page = console.page
    console.heading(f"Settings of {name}")
    expect(page.get_by_text("A key is stored (it is never shown).")).to_be_visible()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Nothing changed")).to_be_visible()
    # keep_recent at or above summarize_after: the API names the problem; nothing is saved.
    page.get_by_label("Keep recent (messages)", exact=True).fill("50")
    page.get_by_role("button", name="Save settings").click()
    expect(
        page.get_by_role("alert").filter(has_text="must be below summarize_after")
    ).to_be_visible()
    assert world.api.get(path).json()["keep_recent"] == 12
    page.get_by_label("Keep recent (messages)", exact=True).fill("5")
    page.get_by_label("Summarize after (messages)", exact=True).fill("25")
    page.get_by_role("button", name="Replace key").click()
    page.get_by_label("New language model API key").fill("sk-new")
    console.shot("store-settings")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("The settings were saved.")).to_be_visible()
    stored = world.api.get(path).json()
    assert (stored["summarize_after"], stored["keep_recent"], stored["has_llm_api_key"]) == (
        25,
        5,
        True,
    )
    console.go(f"/instances/local/agent-memory/{name}/settings")
    page.get_by_role("button", name="Remove key").click()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("The settings were saved.")).to_be_visible()
    assert world.api.get(path).json()["has_llm_api_key"] is False

    page.get_by_role("button", name="Delete store…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("This removes 0 sessions and 0 memories")
    confirm = dialog.get_by_role("button", name="Delete store")
    expect(confirm).to_be_disabled()
    dialog.get_by_label(re.compile("to confirm")).fill(name[:-1])
    expect(confirm).to_be_disabled()
    dialog.get_by_label(re.compile("to confirm")).fill(name)
    console.shot("delete-store")
    confirm.click()
    console.heading("Database local")
    expect(
        page.get_by_role("status").filter(
            has_text=f"Store {name} was deleted, with its 0 sessions and 0 memories."
        )
    ).to_be_visible()
    assert world.api.get(path).status_code == 404
    page.reload()  # the confirmation is for the page the deletion led to, not for its address
    console.heading("Database local")
    expect(page.get_by_text(f"Store {name} was deleted")).to_have_count(0)


def test_a_store_shows_its_counts_and_why_its_last_extraction_failed(console, world):
    path = f"{BASE}/{unique('broken')}"
    world.made.append(path)
    body = {"llm_provider": "custom", "llm_model": "m", "llm_base_url": "http://127.0.0.1:9/v1"}
    assert world.api.put(path, json=body).status_code == 201
    events = {"actor_id": "u1", "events": [{"role": "user", "content": "I like tea."}]}
    assert world.api.post(f"{path}/sessions/s1/events", json=events).status_code == 200
    assert world.api.post(f"{path}/sessions/s1/extract").status_code == 202
    wait_for(lambda: world.api.get(path).json()["last_extraction_error"], 30, "a failed run")
    error = world.api.get(path).json()["last_extraction_error"]
    console.sign_in(f"/instances/local/agent-memory/{world.name(path)}")
    page = console.page
    box = page.locator(".extraction-error")
    expect(box.get_by_role("heading")).to_have_text("The last extraction failed")
    expect(box).to_contain_text(error)
    counts = page.get_by_role("list", name="Counts").get_by_role("listitem")
    expect(counts).to_have_text(["1 session", "0 memories", "1 waiting for extraction"])
    console.shot("store-extraction-error")
    console.go(f"/instances/local/agent-memory/{world.name(path)}/sessions/s1")
    expect(page.locator(".error-text")).to_have_text(error)
    console.accessible()
    console.go(f"/instances/local/agent-memory/{world.name(world.model)}")
    held = world.api.get(world.model).json()["counts"]
    expect(page.get_by_role("list", name="Counts")).to_contain_text(f"{held['memories']} memories")
    console.shot("store")


# --- sessions ----------------------------------------------------------------------------------


def test_sessions_are_listed_most_recent_first_with_extraction_and_paging(console, world):
    path = f"{BASE}/{unique('many')}"
    world.made.append(path)
    assert world.api.put(path, json={}).status_code == 201
    for i in range(23):
        events = {"actor_id": f"actor-{i}", "events": [{"role": "user", "content": f"hi {i}"}]}
        assert (
            world.api.post(f"{path}/sessions/chat-{i:02d}/events", json=events).status_code == 200
        )
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.model)}/sessions")
    page = console.page
    console.heading("Sessions")
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).get_by_role("rowheader")).to_have_text(SESSION_2)  # the latest first
    listed = world.api.get(f"{world.model}/sessions").json()["sessions"]
    for index, session in enumerate(listed):
        expect(rows.nth(index).locator(".badge")).to_have_text(session["extraction"]["status"])
    console.shot("sessions")
    console.go(f"/instances/local/agent-memory/{world.name(path)}/sessions")
    expect(rows).to_have_count(20)
    expect(rows.nth(0).get_by_role("rowheader")).to_have_text("chat-22")
    expect(page.get_by_text("Previous", exact=False).first).to_have_attribute(
        "aria-disabled", "true"
    )
    page.get_by_role("link", name="Next →").click()
    expect(rows).to_have_count(3)
    expect(rows.nth(2).get_by_role("rowheader")).to_have_text("chat-00")
    assert "offset=20" in page.url
    page.get_by_role("link", name="← Previous").click()
    expect(rows).to_have_count(20)


def test_a_session_shows_summary_messages_and_extraction_extracts_now_and_is_forgotten(
    console, world
):
    # The schedule the replay armed (30 s after its last message) may still be due: wait until
    # it has fired and its run is over, so that nothing changes the session while the page is
    # read (a snapshot taken meanwhile showed `running` to one read and `idle` to the next).
    def settled() -> dict[str, Any] | None:
        got = world.api.get(f"{world.model}/sessions/{SESSION_1}").json()
        state = got["extraction"]
        return got if state["status"] == "idle" and state["due_at"] is None else None

    view = wait_for(settled, 120, f"session {SESSION_1} with no run due or running")
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.model)}/sessions")
    page = console.page
    page.get_by_role("link", name=SESSION_1).click()
    console.heading(f"Session {SESSION_1}")
    expect(page.locator(".summary")).to_have_text(view["summary"])
    messages = page.locator("ol.messages > li")
    expect(messages).to_have_count(len(view["messages"]))
    first = view["messages"][0]
    expect(messages.first.locator(".role")).to_have_text(first["role"])
    if first.get("name"):
        expect(messages.first.locator(".name")).to_have_text(first["name"])
    expect(messages.first.locator(".content")).to_have_text(first["content"])
    expect(messages.first.locator("time")).to_have_attribute("datetime", first["created_at"])
    facts = page.locator("dl.extraction")
    expect(facts.locator(".badge")).to_have_text("idle")
    expect(facts).to_contain_text(str(view["extraction"]["unread"]))
    # Summarized: it counts more messages than it keeps verbatim, and every kept one is shown, so
    # the page says where the others went and offers no more.
    shown, total = len(view["messages"]), view["message_count"]
    assert 1 < shown < total - 1 and shown < 50
    expect(page.locator(".messages-shown")).to_have_text(
        f"The newest {shown} messages of {total}, oldest first; "
        f"the {total - shown} older ones are folded into the summary above."
    )
    expect(page.get_by_role("button", name=re.compile("Show up to"))).to_have_count(0)
    # When it will be forgotten, said as a time to come, with the store's rule.
    expect(page.locator("dl.facts dt", has_text=re.compile("^Forgotten at$"))).to_have_count(0)
    forgotten = page.locator("dl.facts dt:text-is('Forgotten after') + dd")
    expect(forgotten.locator("time")).to_have_attribute("datetime", view["expires_at"])
    expect(forgotten).to_contain_text("(an hour after its last message; a new message moves it)")
    console.shot("session")
    page.get_by_role("button", name="Extract now").click()
    expect(page.get_by_role("status").filter(has_text="Extraction was started")).to_be_visible()

    # Forget a session of its own (the replayed ones serve the other tests).
    events = {"actor_id": "u1", "events": [{"role": "user", "content": "Forget me."}]}
    assert world.api.post(f"{world.model}/sessions/doomed/events", json=events).status_code == 200
    console.go(f"/instances/local/agent-memory/{world.name(world.model)}/sessions/doomed")
    console.heading("Session doomed")
    expect(page.locator(".messages-shown")).to_have_text("Its one message.")
    page.get_by_role("button", name="Forget session…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Session doomed and its 1 message are removed for good.")
    dialog.get_by_role("button", name="Forget session").click()
    console.heading("Sessions")
    expect(
        page.get_by_role("status").filter(
            has_text="Session doomed was forgotten, with its 1 message."
        )
    ).to_be_visible()
    assert world.api.get(f"{world.model}/sessions/doomed").status_code == 404


def test_a_long_session_offers_more_messages_only_while_there_are_more(console, world):
    session = unique("long")
    for start in (0, 50):
        events = [
            {"role": "user", "content": f"line {i}"} for i in range(start, min(start + 50, 55))
        ]
        body = {"actor_id": "user-7", "events": events}
        assert (
            world.api.post(f"{world.notes}/sessions/{session}/events", json=body).status_code == 200
        )
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.notes)}/sessions/{session}")
    page = console.page
    messages = page.locator("ol.messages > li")
    expect(messages).to_have_count(50)
    expect(messages.first.locator(".content")).to_have_text("line 5")
    expect(page.locator(".messages-shown")).to_have_text(
        "The newest 50 messages of 55, oldest first."
    )
    page.get_by_role("button", name="Show up to 1,000 messages").click()
    expect(messages).to_have_count(55)
    expect(messages.first.locator(".content")).to_have_text("line 0")
    expect(page.locator(".messages-shown")).to_have_text("All 55 messages, oldest first.")
    expect(page.get_by_role("button", name=re.compile("Show up to"))).to_have_count(0)
    console.accessible()


def test_extract_now_is_explained_and_disabled_without_a_language_model(console, world):
    events = {"actor_id": "user-7", "events": [{"role": "user", "content": "Hello"}]}
    assert world.api.post(f"{world.notes}/sessions/plain/events", json=events).status_code == 200
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.notes)}/sessions/plain")
    button = console.page.get_by_role("button", name="Extract now")
    expect(button).to_be_disabled()
    expect(console.page.locator("#no-model")).to_have_text(
        "This store has no language model, so nothing is extracted."
    )
    console.accessible()


# --- memories ----------------------------------------------------------------------------------


def test_memories_browse_newest_first_filter_by_actor_and_type(console, world):
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.model)}/memories")
    page = console.page
    console.heading("Memories")
    listed = world.api.get(f"{world.model}/memories").json()
    expect(page.locator("tbody tr").first.get_by_role("rowheader")).to_contain_text(
        listed["memories"][0]["text"][:60]
    )
    expect(page.get_by_text(f"{listed['total']} memories")).to_be_visible()
    console.shot("memories")
    console.go(f"/instances/local/agent-memory/{world.name(world.notes)}/memories")
    page.get_by_label("Actor").fill("user-7")
    page.get_by_label("Type").select_option("episodic")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("tbody tr")).to_have_count(1)
    expect(page.locator("tbody tr")).to_contain_text("Went to Lisbon in May 2023")
    assert "actor_id=user-7" in page.url and "type=episodic" in page.url
    page.get_by_role("link", name="Clear filters").click()
    expect(page.locator("tbody tr")).to_have_count(4)
    console.accessible()


def test_keyed_memories_are_browsed_by_namespace_and_one_is_forgotten(console, world):
    path = f"{BASE}/{unique('keyed')}"
    world.made.append(path)
    assert world.api.put(path, json={"dimensions": 2}).status_code == 201
    kept = [
        (["users", "ann", "prefs"], "theme", {"color": "dark"}),
        (
            ["users", "ann", "prefs"],
            "<b>font</b>",
            {"size": 14, "html": "<img src=x onerror=alert(1)>"},
        ),
        (["users", "bob"], "theme", {"color": "light"}),
    ]
    for namespace, key, value in kept:
        body = {"namespace": namespace, "key": key, "value": value}
        assert world.api.put(f"{path}/keyed-memories", json=body).status_code == 200
    console.sign_in(f"/instances/local/agent-memory/{world.name(path)}/keyed")
    page = console.page
    expect(page.get_by_role("heading", name="Keyed memories", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="3 keyed memories", exact=True)).to_be_visible()
    page.get_by_role("link", name="users", exact=True).click()
    page.get_by_role("link", name="ann", exact=True).click()
    page.get_by_role("link", name="prefs", exact=True).click()
    expect(page.get_by_role("heading", name="2 keyed memories", exact=True)).to_be_visible()
    # text from the API is text: the key and the value's markup are shown, never run
    item = page.get_by_role("article", name="Key <b>font</b>")
    expect(item).to_contain_text('"html": "<img src=x onerror=alert(1)>"')
    console.shot("keyed")
    page.get_by_role("article", name="Key theme").get_by_role("button", name="Forget…").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_role("button", name="Forget", exact=True).click()
    expect(page.get_by_role("status").filter(has_text="Forgot key theme.")).to_be_visible()
    expect(page.get_by_role("heading", name="1 keyed memory", exact=True)).to_be_visible()
    gone = world.api.get(
        f"{path}/keyed-memories", params={"namespace": "users.ann.prefs", "key": "theme"}
    )
    assert gone.status_code == 404
    kept_bob = world.api.get(
        f"{path}/keyed-memories", params={"namespace": "users.bob", "key": "theme"}
    )
    assert kept_bob.status_code == 200


def test_keys_are_made_with_their_secret_shown_once_listed_and_revoked(console, world):
    console.sign_in("/keys")
    page = console.page
    console.heading("API keys")
    store = world.name(world.notes)
    page.get_by_label("Name").fill("ann's phone")
    page.get_by_label("Access").select_option("write")
    page.get_by_label("Stores").fill(f"local/{store}")
    page.get_by_label("Actors").fill("ann")
    page.get_by_role("button", name="Make key").click()
    secret = page.get_by_label("The new API key")
    expect(secret).to_contain_text("kvm_")
    api_key = secret.inner_text().strip()
    console.shot("keys")
    console.accessible()
    made = next(k for k in world.api.get("/keys").json()["keys"] if k["name"] == "ann's phone")
    assert made["stores"] == [{"instance_id": "local", "store": store}] and made["actors"] == [
        "ann"
    ]
    row = page.get_by_role("row").filter(has_text=made["key_id"])
    expect(row).to_contain_text(f"local/{store}")
    expect(row).to_contain_text("ann")
    page.get_by_role("button", name="I have copied it").click()
    expect(page.get_by_label("The new API key")).to_have_count(0)  # shown once
    assert api_key not in page.content()
    # the scoped key works, then is revoked from the page
    with httpx.Client(
        base_url=world.stack.url, headers={"Authorization": f"Bearer {api_key}"}
    ) as c:
        assert c.get("/agent-memory").status_code == 200
        row.get_by_role("button", name="Revoke…").click()
        page.get_by_role("dialog").get_by_role("button", name="Revoke", exact=True).click()
        expect(
            page.get_by_role("status").filter(has_text=f"Revoked key {made['key_id']}")
        ).to_be_visible()
        assert c.get("/agent-memory").status_code == 401
    # a bad request: the API's problem beside the field
    console.expected_statuses = {422}
    page.get_by_label("Stores").fill("no-such-instance/s")
    page.get_by_role("button", name="Make key").click()
    expect(page.locator("#key-stores-problem, .problem").first).to_contain_text("no-such-instance")


def test_the_keys_page_shows_every_page_of_keys_and_no_expired_one(console, world, tenant):
    """GET /keys gives 1,000 keys a page: the page follows next_cursor to the last key, and
    an expired key is not listed."""
    keys = tenant.control.api_keys
    made = [keys.issue(tenant.org_id, KeyScope(access="read"))[0] for _ in range(1_050)]
    expired = keys.issue(tenant.org_id, KeyScope(access="read", expires_at=1))[0]
    console.sign_in("/keys", api_key=tenant.api_key)
    page = console.page
    console.heading("API keys")
    rows = page.locator("table.list tbody tr")
    expect(rows).to_have_count(1 + len(made))  # the admin key and every one made
    expect(page.get_by_role("row").filter(has_text=made[-1])).to_have_count(1)
    expect(page.get_by_role("row").filter(has_text=expired)).to_have_count(0)


def test_a_scoped_key_is_told_it_cannot_manage_keys(console, world):
    store = world.name(world.notes)
    key = world.api.post(
        "/keys", json={"access": "read", "stores": [{"instance_id": "local", "store": store}]}
    ).json()
    console.expected_statuses = {403}
    console.sign_in("/keys", api_key=key["api_key"])
    expect(console.page.get_by_role("alert")).to_contain_text("This key cannot manage keys.")
    expect(console.page.get_by_role("button", name="Make key")).to_have_count(0)
    world.api.delete(f"/keys/{key['key_id']}")


def test_a_stores_usage_is_charted_by_day_with_its_table_and_what_it_holds(console, world):
    store = world.name(world.notes)
    console.sign_in(f"/instances/local/agent-memory/{store}/usage")
    page = console.page
    console.heading("Usage")
    expected = world.api.get(f"{world.notes}/usage").json()
    held = page.get_by_role("list", name="Held now")
    expect(held).to_contain_text(f"{expected['now']['memories']} memories")
    chart = page.get_by_role("img", name=re.compile(r"^Requests per day: "))
    expect(chart).to_be_visible()
    expect(chart.locator("rect")).to_have_count(30)
    page.get_by_label("Show").select_option("memories_added")
    added = sum(d["memories_added"] for d in expected["days"])
    expect(
        page.get_by_role("img", name=re.compile(r"^Memories added per day: "))
    ).to_have_attribute("aria-label", re.compile(rf"^Memories added per day: {added:,} in 30 days"))
    console.shot("usage")
    page.get_by_text("The days as a table").click()
    today = expected["days"][-1]
    row = page.get_by_role("row").filter(has_text=today["date"])
    expect(row.get_by_role("cell").nth(2)).to_have_text(f"{today['memories_added']:,}")


def test_webhooks_are_set_a_secret_shown_once_and_deliveries_listed(console, world):
    path = f"{BASE}/{unique('hooks')}"
    world.made.append(path)
    assert world.api.put(path, json={"dimensions": 3}).status_code == 201
    with WebhookReceiver() as receiver:
        console.sign_in(f"/instances/local/agent-memory/{world.name(path)}/webhooks")
        page = console.page
        console.heading("Webhooks")
        expect(page.get_by_text("No endpoints: nothing is sent.")).to_be_visible()
        # Nothing to save yet: no save button; adding an endpoint is the primary action.
        expect(page.get_by_role("button", name="Save endpoints")).to_have_count(0)
        expect(page.get_by_role("button", name="Add an endpoint")).to_have_class("primary")
        console.shot("webhooks-empty")
        console.expected_statuses = {422}
        page.get_by_role("button", name="Add an endpoint").click()
        expect(page.get_by_role("button", name="Save endpoints")).to_have_class("primary")
        page.get_by_label("URL").fill("https://user:pw@hooks.example.com/")
        page.get_by_role("button", name="Save endpoints").click()
        expect(page.locator(".problem").first).to_contain_text("credentials")
        page.get_by_label("URL").fill(receiver.url)
        page.get_by_role("checkbox", name="memory.created").check()
        page.get_by_role("button", name="Save endpoints").click()
        expect(page.get_by_role("status").filter(has_text="Endpoints saved.")).to_be_visible()
        expect(page.get_by_role("button", name="Save endpoints")).to_have_count(0)  # all saved
        saved = world.api.get(path).json()
        assert (
            saved["webhooks"]
            == [{"url": receiver.url, "events": ["extraction.completed", "memory.created"]}]
            and saved["has_webhook_secret"]
        )
        page.get_by_role("button", name="Make a new secret").click()
        secret = page.get_by_label("The new signing secret").inner_text().strip()
        assert secret.startswith("whsec_")
        body = {"text": "Gus fixes bikes", "vector": [1, 0, 0]}
        assert world.api.post(f"{path}/memories", json=body).status_code == 201
        receiver.wait_for(1)
        page.get_by_role("button", name="I have copied it").click()
        expect(page.get_by_label("The new signing secret")).to_have_count(0)  # shown once
        assert secret not in page.content()
        page.get_by_role("button", name="Refresh").click()
        row = page.get_by_role("row").filter(has_text="memory.created")
        expect(row).to_contain_text("delivered")
        expect(row).to_contain_text("HTTP 204")
        console.shot("webhooks")


def test_search_in_each_mode_shows_scores_and_explains_the_vector_modes(console, world):
    console.expected_statuses = {422}
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.notes)}/search")
    page = console.page
    console.heading("Search memories")
    # No embedding model: keyword is this store's best mode, chosen and named.
    expect(page.locator("input[name=mode][value=keyword]")).to_be_checked()
    expect(page.locator("label.radio", has_text="Keyword")).to_contain_text("(this store's best)")
    expect(page.locator("#modes-help")).to_contain_text("keyword search is its best mode")
    semantic = page.get_by_label("Semantic (cosine)")
    expect(semantic).to_be_disabled()
    expect(page.get_by_label("Hybrid (both, fused)")).to_be_disabled()
    expect(page.locator("#modes-help")).to_contain_text("no embedding model")
    page.get_by_label("Query", exact=True).fill("eu-west-1")
    page.get_by_role("button", name="Search").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("Deploys to eu-west-1 on Fridays")
    expect(rows.first.locator(".score")).to_have_text(re.compile(r"^\d+\.\d{4}$"))
    expect(page.get_by_role("status").filter(has_text="by keyword search")).to_be_visible()
    page.get_by_label(re.compile("Query vector")).fill("[1, 0, 0]")
    expect(semantic).to_be_enabled()
    semantic.check()
    page.get_by_label("Actor (optional)").fill("user-7")
    page.get_by_role("button", name="Search").click()
    expect(rows.first).to_contain_text("Deploys to eu-west-1 on Fridays")
    expect(rows.first.locator(".similarity")).to_have_text("1.0000")
    expect(rows.first.locator(".score")).to_have_text(re.compile(r"^0\.\d{4}$"))
    page.get_by_label("Hybrid (both, fused)").check()
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("status").filter(has_text="comparable across queries")).to_be_visible()
    console.shot("search")
    page.get_by_label(re.compile("Query vector")).fill("[1, 0]")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#p-query_vector")).to_contain_text("has 2 numbers")
    # With an embedding model (the scripted one), every mode is open without a vector, and the
    # search is hybrid unless another mode is chosen, as the API's and the clients' default.
    console.go(f"/instances/local/agent-memory/{world.name(world.model)}/search")
    console.heading("Search memories")
    expect(page.get_by_label("Semantic (cosine)")).to_be_enabled()
    expect(page.locator("input[name=mode][value=hybrid]")).to_be_checked()
    expect(page.locator("label.radio", has_text="Hybrid")).to_contain_text("(this store's best)")
    expect(page.locator("#modes-help")).to_contain_text("hybrid search")
    page.get_by_label("Query", exact=True).fill("Caroline")
    with page.expect_request(lambda r: r.url.endswith("/memories/search")) as sent:
        page.get_by_role("button", name="Search").click()
    assert json.loads(sent.value.post_data or "{}")["mode"] == "hybrid"
    expect(page.get_by_role("status").filter(has_text="by hybrid search")).to_be_visible()
    expect(rows.first.locator(".score")).to_have_text(re.compile(r"^\d+\.\d{4}$"))
    console.shot("search-hybrid")
    page.get_by_label("Semantic (cosine)").check()
    page.get_by_role("button", name="Search").click()
    expect(rows.first.locator(".score")).to_have_text(re.compile(r"^-?\d+\.\d{4}$"))
    console.accessible()


def test_search_takes_a_minimum_score_and_says_which_time_the_query_named(console, world):
    console.expected_statuses = {422}
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.notes)}/search")
    page = console.page
    console.heading("Search memories")
    expect(page.get_by_label(re.compile("Rerank with"))).to_have_count(0)  # no reranker here
    page.get_by_label("Query", exact=True).fill("eu-west-1")
    rows = page.locator("tbody tr")
    page.get_by_role("button", name="Search").click()
    expect(rows).to_have_count(1)
    page.get_by_label("Minimum score (optional)").fill("0.99")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Nothing matched.")).to_be_visible()
    page.get_by_label("Minimum score (optional)").fill("2")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#p-min_score")).to_contain_text("less than or equal to 1")
    page.get_by_label("Minimum score (optional)").fill("")
    page.get_by_label("Query", exact=True).fill("deploys to eu-west-1 in May 2023")
    page.get_by_role("button", name="Search").click()
    said = page.locator("[data-time-window]")
    expect(said).to_contain_text("May 2023")
    expect(said).to_contain_text("2023-05-01T00:00:00Z to 2023-06-01T00:00:00Z")
    expect(rows.first).to_contain_text("Deploys to eu-west-1")  # ranked, not filtered
    page.get_by_label("Only memories of the time the query names").check()
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("Nothing matched.")).to_be_visible()
    expect(said).to_contain_text("only they are kept")
    console.accessible()


def test_a_memory_shows_every_field_its_source_session_and_versions_edits_and_forgets(
    console, world
):
    extracted = world.api.get(f"{world.model}/memories", params={"limit": 1}).json()["memories"][0]
    console.sign_in(
        f"/instances/local/agent-memory/{world.name(world.model)}/memories/{extracted['id']}"
    )
    page = console.page
    console.heading("Memory")
    expect(page.locator(".memory-text")).to_have_text(extracted["text"])
    for name in (
        "Id",
        "Type",
        "Actor",
        "Topics",
        "Importance",
        "Confidence",
        "Source",
        "Kept",
        "Last changed",
        "Expires",
        "Metadata",
    ):
        expect(page.locator("dl.facts dt", has_text=re.compile(f"^{name}$"))).to_have_count(1)
    expires = page.locator("dl.facts dt:text-is('Expires') + dd time")
    expect(expires).to_have_attribute("datetime", extracted["expires_at"])
    source = extracted["source"]["session_id"]
    page.get_by_role("link", name=source).click()
    console.heading(f"Session {source}")
    page.go_back()
    console.heading("Memory")

    path = f"{BASE}/{world.name(world.notes)}"
    memory = world.api.get(f"{path}/memories", params={"actor_id": "user-9"}).json()["memories"][0]
    console.go(f"/instances/local/agent-memory/{world.name(world.notes)}/memories/{memory['id']}")
    expect(page.locator(".memory-text")).to_have_text("Someone else likes chess")
    expect(page.get_by_text("No earlier versions")).to_be_visible()
    page.get_by_role("button", name="Edit memory").click()
    form = page.get_by_role("form", name="Edit memory")
    form.get_by_label("Text").fill("Someone else likes chess and go")
    form.get_by_label("Topics").fill("games, board games")
    form.get_by_label("Importance").fill("0.8")
    form.get_by_label(re.compile("^Vector")).fill("[0.6, 0.8, 0]")
    form.get_by_role("button", name="Save memory").click()
    expect(page.get_by_text("The memory was saved")).to_be_visible()
    expect(page.locator(".memory-text")).to_have_text("Someone else likes chess and go")
    expect(page.locator("ol.versions > li")).to_have_count(1)
    expect(page.locator("ol.versions > li").first).to_contain_text("Someone else likes chess")
    after = world.api.get(f"{path}/memories/{memory['id']}").json()
    assert (after["topics"], after["importance"], len(after["versions"])) == (
        ["games", "board games"],
        0.8,
        1,
    )
    console.shot("memory")
    page.get_by_role("button", name="Forget memory…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(
        "“Someone else likes chess and go” and its 1 earlier version are removed for good."
    )
    dialog.get_by_role("button", name="Forget memory").click()
    console.heading("Memories")
    expect(
        page.get_by_role("status").filter(
            has_text="The memory “Someone else likes chess and go” was forgotten, "
            "with its 1 earlier version."
        )
    ).to_be_visible()
    assert world.api.get(f"{path}/memories/{memory['id']}").status_code == 404


# Where each character of an element's text starts a new line: its index and the text.
LINE_STARTS = """(element) => {
  const starts = [];
  let top = null, index = 0;
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++, index++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (top !== null && rect.top > top + 2) starts.push(index);
      top = rect.top;
    }
  }
  return { text: element.textContent, starts };
}"""


def test_ids_wrap_only_after_a_separator_show_whole_on_hover_and_copy(
    console, world, browser_context
):
    browser_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=world.stack.url)
    name = world.name(world.model)
    console.sign_in(f"/instances/local/agent-memory/{name}/sessions")
    page = console.page
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        wrapped = 0
        for where in ("sessions", "memories"):
            console.go(f"/instances/local/agent-memory/{name}/{where}")
            console.idle()
            ids = page.locator("tbody .id-text")
            expect(ids.first).to_be_visible()
            for index in range(ids.count()):
                shown = ids.nth(index).evaluate(LINE_STARTS)
                for start in shown["starts"]:
                    assert shown["text"][start - 1] in ".:_@/-", (where, shown)
                wrapped += bool(shown["starts"])
        assert wrapped > 0, "no id wrapped at 390 pixels: the test checks nothing"
        console.shot("memories-phone")
        actor = page.locator("tbody tr").first.locator("td .id")
        expect(actor).to_have_attribute("title", ACTOR)  # the whole id on hover
        actor.get_by_role("button", name=f"Copy the actor {ACTOR}").click()
        expect(actor.get_by_role("button")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == ACTOR
    finally:
        page.set_viewport_size({"width": 1280, "height": 860})


def test_labels_are_words_on_every_page_never_field_names(console, world):
    name = world.name(world.model)
    memory = world.api.get(f"{world.model}/memories", params={"limit": 1}).json()["memories"][0]
    console.sign_in(f"/instances/local/agent-memory/{name}")
    for where, heading in (
        ("", f"Store {name}"),
        ("/settings", f"Settings of {name}"),
        ("/sessions", "Sessions"),
        (f"/sessions/{SESSION_1}", f"Session {SESSION_1}"),
        ("/memories", "Memories"),
        (f"/memories/{memory['id']}", "Memory"),
        (f"/actors/{ACTOR}", f"Actor {ACTOR}"),
        ("/search", "Search memories"),
        ("/webhooks", "Webhooks"),
        ("/try", "Try it"),
    ):
        console.go(f"/instances/local/agent-memory/{name}{where}")
        console.heading(heading)
        labels, raw = console.labels()
        assert labels or where == "/webhooks", where  # (no endpoints, no deliveries: none)
        assert raw == [], f"{where or 'the store page'} labels fields by their API names: {raw}"


# --- try it ------------------------------------------------------------------------------------


def test_try_it_shows_exactly_what_recall_returns_then_adds_the_turn(console, world):
    console.sign_in(f"/instances/local/agent-memory/{world.name(world.model)}/try")
    page = console.page
    console.heading("Try it")
    session = unique("try")
    page.get_by_label("Session").fill(SESSION_1)
    page.get_by_label("Actor").fill(ACTOR)
    page.get_by_label("User message").fill("What does Caroline like to paint?")
    with page.expect_response(lambda r: r.url.endswith("/recall")) as answered:
        page.get_by_role("button", name="Recall").click()
    response = answered.value
    assert response.status == 200
    assert json.loads(response.request.post_data or "{}") == {
        "session_id": SESSION_1,
        "actor_id": ACTOR,
        "query": "What does Caroline like to paint?",
    }
    expected = response.json()
    assert expected["memories"] and expected["summary"]
    context = page.get_by_label("Context string")
    expect(context).to_be_visible()
    assert context.inner_text() == expected["context"]
    page.get_by_text("The JSON answer").click()
    shown = json.loads(page.get_by_label("Recall answer").inner_text())
    assert shown == expected
    console.shot("try-it")

    page.get_by_label("Session").fill(session)
    page.get_by_label("Actor").fill("visitor-1")
    page.get_by_label("User message").fill("I keep bees on my roof.")
    page.get_by_role("button", name="Recall").click()
    expect(context).to_contain_text("Memory for this conversation")
    page.get_by_label("Assistant reply (optional)").fill("Bees on a roof, noted.")
    page.get_by_role("button", name="Add the turn's messages").click()
    expect(page.get_by_role("status").filter(has_text="the session now holds 2")).to_be_visible()
    now = page.locator(".session-now ol.messages > li")
    expect(now).to_have_count(2)
    expect(now.nth(1).locator(".content")).to_have_text("Bees on a roof, noted.")
    stored = world.api.get(f"{world.model}/sessions/{session}").json()
    assert [m["content"] for m in stored["messages"]] == [
        "I keep bees on my roof.",
        "Bees on a roof, noted.",
    ]
    assert stored["actor_id"] == "visitor-1"
    page.get_by_role("link", name=session).click()
    console.heading(f"Session {session}")
    expect(page.locator("ol.messages > li")).to_have_count(2)


# --- states, hostile text, keyboard, CSP -------------------------------------------------------


def test_a_503_shows_a_retry_banner_and_retries_after_retry_after(console, world):
    console.expected_statuses = {503}
    page = console.page
    store = world.name(world.notes)
    failures = {"left": 1}

    def unavailable(route: Any) -> None:
        if failures["left"] and route.request.method == "GET":
            failures["left"] -= 1
            route.fulfill(
                status=503,
                headers={"Retry-After": "2", "Content-Type": "application/json"},
                body=json.dumps({"error": "database_unavailable", "message": UNAVAILABLE}),
            )
            return
        route.fallback()

    page.route(f"**{BASE}/{store}", unavailable)
    console.sign_in(f"/instances/local/agent-memory/{store}")
    banner = page.locator(".banner")
    expect(banner).to_contain_text("The service is unavailable for a moment.")
    expect(banner).to_contain_text("database_unavailable")
    expect(page.locator(".state.error")).to_contain_text("retrying when the service is back")
    console.shot("retry-banner")
    # Retry-After: 2 counts down, then the store loads by itself.
    console.heading(f"Store {store}")
    expect(page.get_by_role("list", name="Counts")).to_be_visible(timeout=8000)
    expect(banner).to_have_count(0)


def test_empty_states_say_what_to_do_next(console, world):
    path = f"{BASE}/{unique('empty')}"
    world.made.append(path)
    assert world.api.put(path, json={}).status_code == 201
    console.sign_in(f"/instances/local/agent-memory/{world.name(path)}")
    page = console.page
    expect(page.get_by_text("This store is empty.")).to_be_visible()
    expect(page.get_by_role("link", name="Try it").last).to_be_visible()
    console.shot("store-empty")
    console.go(f"/instances/local/agent-memory/{world.name(path)}/sessions")
    expect(page.get_by_text("No sessions yet.")).to_be_visible()
    console.go(f"/instances/local/agent-memory/{world.name(path)}/memories")
    expect(page.get_by_text("No memories yet.")).to_be_visible()
    console.go("/no/such/page")
    console.heading("No such page")


def test_an_address_naming_no_database_or_no_store_says_so_with_a_way_back(console, world):
    # (422: the memory id "m1" is malformed; the page's other call, the store's, says 404)
    console.expected_statuses = {404, 422}
    nope = unique("nope")
    console.sign_in(f"/instances/{nope}/agent-memory")
    page = console.page
    console.heading("No such database")
    state = page.get_by_role("alert")
    expect(state).to_contain_text(f"There is no database instance {nope} in your organization.")
    expect(state).to_contain_text("instance_not_found")  # the API's answer, as detail
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    expect(page.get_by_role("navigation", name="Databases")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Create a store"))).to_have_count(0)
    console.shot("no-such-database")
    # Under it, every page says the same: no store tabs, no form.
    for below in (
        f"/instances/{nope}/create",
        f"/instances/{nope}/agent-memory/notes/sessions",
        f"/instances/{nope}/agent-memory/notes/memories/m1",
    ):
        console.go(below)
        console.heading("No such database")
        expect(page.get_by_role("navigation", name="Store")).to_have_count(0)
        expect(page.locator("form")).to_have_count(0)
    page.get_by_role("link", name="See every store").click()
    console.heading("Agent memory")
    tabs = page.get_by_role("navigation", name="Databases")
    expect(tabs.get_by_role("link", name="Database local")).to_be_visible()
    expect(tabs.get_by_role("link", name=f"Database {nope}")).to_have_count(0)

    nowhere = unique("nowhere")
    for section in ("", "/sessions", "/memories", "/search", "/try", "/settings"):
        console.go(f"/instances/local/agent-memory/{nowhere}{section}")
        console.heading("No such store")
        state = page.get_by_role("alert")
        expect(state).to_contain_text("This store does not exist. Create it from the stores page.")
        expect(state.locator(".muted")).to_contain_text("store_not_found")
        expect(state.locator(".muted")).to_contain_text(f"Store '{nowhere}' does not exist")
        expect(page.get_by_role("navigation", name="Store")).to_have_count(0)
    console.shot("no-such-store")
    page.get_by_role("link", name="stores page").click()
    console.heading("Database local")
    expect(page.get_by_role("link", name="Create a store here")).to_be_visible()


HOSTILE = [
    '<img src=x onerror="alert(1)">',
    "<script>alert(2)</script>",
    "\u202eevil.exe\u202c and \u2066isolated\u2069",
    "A" * 30_000,
]


def test_text_from_the_api_is_shown_as_text_whatever_it_holds(console, world):
    store = world.name(world.notes)
    session = unique("hostile")
    events = {
        "actor_id": "user-7",
        "events": [{"role": "user", "content": text, "name": "<b>Mallory</b>"} for text in HOSTILE],
    }
    assert (
        world.api.post(f"{world.notes}/sessions/{session}/events", json=events).status_code == 200
    )
    body = {
        "text": "<img src=x onerror=alert(3)> \u202eRTL",
        "actor_id": "user-7",
        "vector": [0.5, 0.5, 0.7],
        "topics": ["<i>t</i>"],
    }
    memory = world.api.post(f"{world.notes}/memories", json=body).json()
    console.sign_in(f"/instances/local/agent-memory/{store}/sessions/{session}")
    page = console.page
    contents = page.locator("ol.messages .content")
    expect(contents).to_have_count(len(HOSTILE))
    for index, text in enumerate(HOSTILE):
        assert contents.nth(index).inner_text() == text
    expect(page.locator("ol.messages .name").first).to_have_text("<b>Mallory</b>")
    assert page.locator("main img, main script, main b").count() == 0
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 1280, "a 30,000-character word must wrap, not widen the page"
    console.accessible()
    console.go(f"/instances/local/agent-memory/{store}/memories/{memory['id']}")
    expect(page.locator(".memory-text")).to_have_text(body["text"])
    assert page.locator("main img").count() == 0
    console.go(f"/instances/local/agent-memory/{store}/sessions/{session}")
    page.get_by_role("button", name="Forget session…").click()
    page.get_by_role("dialog").get_by_role("button", name="Forget session").click()
    console.heading("Sessions")


def test_the_console_works_from_the_keyboard(console, world):
    console.sign_in()
    page = console.page
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    # Tab to the model store's link and open it with Enter.
    link = page.get_by_role("link", name=world.name(world.model))
    for _ in range(60):
        page.keyboard.press("Tab")
        if link.evaluate("node => node === document.activeElement"):
            break
    expect(link).to_be_focused()
    page.keyboard.press("Enter")
    console.heading(f"Store {world.name(world.model)}")
    expect(page.get_by_role("heading", level=1)).to_be_focused()  # focus moves to the new page
    page.get_by_role("button", name="Delete store…").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label(re.compile("to confirm"))).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert world.api.get(world.model).status_code == 200


def test_the_content_security_policy_refuses_inline_and_foreign_scripts(console, world):
    console.sign_in()
    page = console.page
    messages: list[str] = []
    page.on("console", lambda m: messages.append(m.text))
    ran = page.evaluate(
        """() => new Promise((done) => {
            window.__inline = false;
            const s = document.createElement('script');
            s.textContent = 'window.__inline = true';
            document.head.appendChild(s);
            setTimeout(() => done(window.__inline), 200);
        })"""
    )
    assert ran is False
    assert any("Content Security Policy" in m for m in messages)
    console.errors = [e for e in console.errors if "Content Security Policy" not in e]
