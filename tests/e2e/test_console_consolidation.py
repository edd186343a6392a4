"""The console's consolidation, in headless Chromium against the local stack: an actor's runs
with "Consolidate now", a run's page with each step's memories before and after, applying and
discarding a proposal and reverting an applied run (each confirmed by a dialog that names what
changes), a 409 in words, and restoring a replaced version from a memory's chain.

The stores are made through the API on the scripted model (``tools.scripted_consolidation``:
it merges what states the same fact), their runs kept for review. Each browser test also checks
what every console test checks (tests/support/browser.py): no unexpected console error, no
request leaving 127.0.0.1, the key in no URL, and axe-core on each page it shoots.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.common import wait_for
from tests.support.stack import Stack, model_store

expect.set_options(timeout=15_000)

BASE = "/instances/local/agent-memory"
TEA = "The user loves green tea every morning."
TEA_AGAIN = "The user loves green tea every single morning."
HIKING = "The user goes hiking in the Alps each summer."


@pytest.fixture
def world(open_stack: Stack, provider) -> Iterator[tuple[httpx.Client, str]]:
    """A store in review mode on the scripted model; (client, store path). Deleted after."""
    api = open_stack.client()
    made: list[str] = []
    path = model_store(api, provider, made, consolidation_mode="review", dedupe_threshold=0.999)
    yield api, path
    for each in made:
        api.delete(each)
    api.close()


def _keep(api: httpx.Client, path: str, text: str, actor: str, **more) -> str:
    answer = api.post(f"{path}/memories", json={"text": text, "actor_id": actor, **more})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def _current(api: httpx.Client, path: str, actor: str) -> dict[str, str]:
    page = api.get(f"{path}/memories", params={"actor_id": actor, "limit": 100}).json()
    return {m["id"]: m["text"] for m in page["memories"]}


def _run(api: httpx.Client, path: str, run_id: str) -> dict:
    return dict(api.get(f"{path}/consolidations/{run_id}").json())


def _proposed(api: httpx.Client, path: str, actor: str) -> str:
    """Ask for a run of ``actor`` through the API and wait for its proposal; its id."""
    answer = api.post(f"{path}/actors/{actor}/consolidate")
    assert answer.status_code == 202, answer.text
    run_id = str(answer.json()["consolidation_id"])
    wait_for(lambda: _run(api, path, run_id)["status"] == "proposed", 60, "the proposal")
    return run_id


def test_an_actors_run_is_asked_for_read_step_by_step_applied_and_reverted(console, world):
    api, path = world
    name = path.rsplit("/", 1)[1]
    a, b = _keep(api, path, TEA, "ann"), _keep(api, path, TEA_AGAIN, "ann")
    hiking = _keep(api, path, HIKING, "ann")
    console.sign_in(f"{BASE}/{name}/actors/ann")
    page = console.page
    section = page.locator("[data-consolidations]")
    expect(section).to_contain_text("No consolidation of this actor yet.")
    console.idle()
    section.get_by_role("button", name="Consolidate now").click()
    expect(
        page.get_by_role("status").filter(has_text=re.compile(r"Consolidation con_\w+ is"))
    ).to_be_visible()
    (run_id,) = [
        r["consolidation_id"] for r in api.get(f"{path}/consolidations").json()["consolidations"]
    ]
    wait_for(lambda: _run(api, path, run_id)["status"] == "proposed", 60, "the proposal")
    section.get_by_role("button", name="Refresh").click()
    row = section.locator(f"tr[data-run='{run_id}']")
    expect(row).to_contain_text("proposed")
    expect(row).to_contain_text("3 memories examined, 1 step planned")
    console.shot("actor-consolidations")

    row.get_by_role("link").click()
    console.heading("Consolidation")
    step = page.locator("li.step[data-step='0']")
    expect(step).to_contain_text("Merge")
    expect(step.locator("[data-before]")).to_contain_text(TEA)
    expect(step.locator("[data-before]")).to_contain_text(TEA_AGAIN)
    expect(step.locator("[data-after]")).to_contain_text(TEA_AGAIN)
    expect(step.locator("[data-after] a")).to_have_count(0)  # not kept yet: no page to link
    expect(page.get_by_role("button", name="Revert…")).to_have_count(0)
    console.shot("consolidation-proposed")

    page.get_by_role("button", name="Apply…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("These changes are made:")
    expect(dialog).to_contain_text(f"“{TEA}”, “{TEA_AGAIN}” are replaced by “{TEA_AGAIN}”")
    dialog.get_by_role("button", name="Apply").click()
    expect(
        page.get_by_role("status").filter(has_text="The consolidation was applied.")
    ).to_be_visible()
    expect(page.locator(".facts")).to_contain_text("applied")
    merged = _run(api, path, run_id)["steps"][0]["after"]["id"]
    expect(step.locator("[data-after] a")).to_have_attribute("href", re.compile(merged + "$"))
    assert _current(api, path, "ann") == {merged: TEA_AGAIN, hiking: HIKING}

    page.get_by_role("button", name="Revert…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("These changes are undone:")
    expect(dialog).to_contain_text(
        f"“{TEA_AGAIN}” is retired; “{TEA}”, “{TEA_AGAIN}” become current again"
    )
    dialog.get_by_role("button", name="Revert").click()
    expect(
        page.get_by_role("status").filter(has_text="The consolidation was reverted.")
    ).to_be_visible()
    assert set(_current(api, path, "ann").values()) == {TEA, TEA_AGAIN, HIKING}
    assert merged not in _current(api, path, "ann")
    assert {a, b}.isdisjoint({merged})


def test_a_proposal_is_discarded_and_a_stale_one_is_a_409_in_words(console, world):
    api, path = world
    name = path.rsplit("/", 1)[1]
    a = _keep(api, path, TEA, "bo")
    _keep(api, path, TEA_AGAIN, "bo")
    first = _proposed(api, path, "bo")
    console.sign_in(f"{BASE}/{name}/consolidations/{first}")
    page = console.page
    console.heading("Consolidation")
    console.idle()
    page.get_by_role("button", name="Discard…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("The plan's 1 step is dropped: no memory changes.")
    dialog.get_by_role("button", name="Discard").click()
    expect(
        page.get_by_role("status").filter(has_text="The consolidation was discarded.")
    ).to_be_visible()
    expect(page.get_by_role("button", name="Apply…")).to_have_count(0)
    assert len(_current(api, path, "bo")) == 2

    # A proposal whose memories changed since: no step holds, the API's 409 shown in words.
    second = _proposed(api, path, "bo")
    assert api.patch(f"{path}/memories/{a}", json={"text": "The user loves black tea."}).is_success
    console.expected_statuses.add(409)
    console.go(f"{BASE}/{name}/consolidations/{second}")
    console.heading("Consolidation")
    page.get_by_role("button", name="Apply…").click()
    page.get_by_role("dialog").get_by_role("button", name="Apply").click()
    expect(page.locator(".notice, [role=alert]").first).to_contain_text("Not applied:")
    assert _run(api, path, second)["status"] == "proposed"


def test_a_replaced_version_is_restored_from_the_memorys_chain(console, world):
    api, path = world
    name = path.rsplit("/", 1)[1]
    old = _keep(api, path, TEA, "cy")
    newer = _keep(api, path, "The user loves black tea every morning.", "cy", supersedes=old)
    console.sign_in(f"{BASE}/{name}/memories/{newer}")
    page = console.page
    console.heading("Memory")
    chain = page.locator("[data-chain]")
    expect(chain.locator("li")).to_have_count(2)
    expect(chain.locator(f"li[data-link='{newer}']")).to_contain_text("Current since")
    expect(chain.locator(f"li[data-link='{newer}'] button")).to_have_count(0)
    console.shot("memory-chain")
    chain.locator(f"li[data-link='{old}']").get_by_role("button").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"“{TEA}” becomes current again, as a new memory")
    expect(dialog).to_contain_text(
        "“The user loves black tea every morning.” is replaced and stays readable in this chain."
    )
    dialog.get_by_role("button", name="Restore version").click()
    console.heading("Memory")
    expect(page.locator("blockquote.memory-text")).to_have_text(TEA)
    expect(page.locator(".facts")).to_contain_text(f"restored from {old}")
    current = _current(api, path, "cy")
    assert list(current.values()) == [TEA] and old not in current and newer not in current
    expect(page.locator("[data-chain] li")).to_have_count(3)
