"""The console's part of memory an operator can steer, in headless Chromium against the local
stack: the store form's extraction instructions, examples, custom types' examples and profile
fields (with the API's 422 beside the field it names and its 409 for a held field in words), an
actor's page (its profile with where each value came from, a field's history, changing and
clearing fields by type, its memories and sessions, forgetting it), and Try it showing recall's
profile and the context's order.

The stores are made through the API, on the scripted model (``tools.scripted_model``), whose
extraction fills a profile from "my name is ..." / "I live in ..." / "My pets are ..."; other
values are set through ``PATCH .../profile``. Each browser test also checks what every console
test checks (tests/support/browser.py): no unexpected console error, no request leaving
127.0.0.1, the key in no URL, and axe-core on each page it shoots.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.common import unique, wait_for
from tests.support.stack import Stack, model_store

expect.set_options(timeout=15_000)

BASE = "/instances/local/agent-memory"
FIELDS = [
    {"name": "name", "description": "What the user is called", "type": "text"},
    {"name": "city", "description": "Where the user lives", "type": "text"},
    {"name": "pets", "description": "The user's pets, by name", "type": "list"},
    {"name": "age", "description": "How old the user is", "type": "number"},
    {"name": "vegan", "description": "Whether the user eats no animal products", "type": "boolean"},
    {"name": "birthday", "description": "The user's date of birth", "type": "date"},
]
INSTRUCTIONS = "Keep the user's facts and preferences. Never keep opinions about the weather."
EXAMPLES = [{"messages": [{"role": "user", "content": "Lovely weather today!"}], "memories": []}]
TYPES = [{"name": "preference", "description": "What the user likes", "examples": ["Likes tea"]}]
CHAT = [
    {"role": "user", "content": "Hi, my name is Ann. I think the weather is awful today."},
    {"role": "assistant", "content": "Nice to meet you, Ann."},
    {"role": "user", "content": "I live in Lisbon. My pets are Oscar and Pixel."},
]


@dataclass
class Steered:
    """A store on the scripted model with instructions, an example, a custom type with an
    example and six profile fields; actor ``ann``'s session ``chat-1`` extracted (name, city
    and pets by extraction), her age and diet set by a caller."""

    stack: Stack
    api: httpx.Client
    path: str
    made: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]

    def page(self, rest: str = "") -> str:
        return f"{BASE}/{self.name}{rest}"

    def profile(self, actor: str) -> dict[str, Any]:
        answer = self.api.get(f"{self.path}/actors/{actor}/profile")
        assert answer.status_code == 200, answer.text
        return {name: entry["value"] for name, entry in answer.json()["fields"].items()}

    def patch(self, actor: str, fields: dict[str, Any]) -> None:
        answer = self.api.patch(f"{self.path}/actors/{actor}/profile", json={"fields": fields})
        assert answer.status_code == 200, answer.text


def _steered_store(api: httpx.Client, provider, made: list[str]) -> str:
    return model_store(
        api,
        provider,
        made,
        extraction_instructions=INSTRUCTIONS,
        extraction_examples=EXAMPLES,
        custom_types=TYPES,
        profile_fields=FIELDS,
    )


@pytest.fixture(scope="module")
def steered(open_stack: Stack, provider) -> Iterator[Steered]:
    api = open_stack.client()
    made: list[str] = []
    world = Steered(open_stack, api, _steered_store(api, provider, made), made)
    events = {"actor_id": "ann", "events": CHAT}
    answer = api.post(f"{world.path}/sessions/chat-1/events", json=events)
    assert answer.status_code == 200, answer.text
    assert api.post(f"{world.path}/sessions/chat-1/extract").status_code == 202
    wait_for(lambda: len(world.profile("ann")) == 3, 60, "extraction to fill ann's profile")
    world.patch("ann", {"age": 41, "vegan": True})
    yield world
    for path in made:
        api.delete(path)
    api.close()


def _fresh_store(steered: Steered, provider) -> str:
    """Another store like the module's (same settings, no data), deleted with the module's."""
    return _steered_store(steered.api, provider, steered.made).rsplit("/", 1)[1]


# --- the store form ----------------------------------------------------------------------------


def test_the_store_form_edits_instructions_examples_type_examples_and_profile_fields(
    console, steered, provider
):
    name = _fresh_store(steered, provider)
    console.sign_in(f"{BASE}/{name}/settings")
    page = console.page
    console.heading(f"Settings of {name}")
    expect(page.get_by_label("Instructions")).to_have_value(INSTRUCTIONS)
    expect(page.locator("[data-count]")).to_have_text(f"{len(INSTRUCTIONS)} of 2,000 characters")
    expect(page.get_by_label("Example 1, message 1")).to_have_value("Lovely weather today!")
    expect(page.locator("fieldset.example").first).to_contain_text(
        "None: this example teaches what not to keep."
    )
    expect(page.get_by_label("Type 1 examples")).to_have_value("Likes tea")
    expect(page.get_by_label("Field 3 name")).to_have_value("pets")
    expect(page.get_by_label("Field 3 holds")).to_have_value("list")

    changed = "Keep where the user lives and works. Never keep small talk."
    page.get_by_label("Instructions").fill(changed)
    page.get_by_label("Type 1 examples").fill("Likes tea\nPrefers window seats")
    page.get_by_role("button", name="Add an example").click()
    page.get_by_label("Example 2, message 1").fill("I moved to Porto last week.")
    page.get_by_role("button", name="Add a message to example 2").click()
    page.get_by_label("Example 2, message 2").fill("Welcome to Porto!")
    page.get_by_role("button", name="Add a memory to example 2").click()
    page.get_by_label("Example 2, memory 1").fill("The user lives in Porto")
    example = page.locator("fieldset.example").nth(1)
    example.get_by_label("Type", exact=True).last.select_option("preference")
    page.get_by_role("button", name="Remove field 6").click()  # birthday: no actor holds one
    page.get_by_role("button", name="Add a profile field").click()
    page.get_by_label("Field 6 name").fill("languages")
    page.get_by_label("Field 6 holds").select_option("list")
    page.get_by_label("Field 6 description").fill("The languages the user speaks")
    console.shot("store-steering")
    with page.expect_response(lambda r: r.request.method == "PUT") as answered:
        page.get_by_role("button", name="Save settings").click()
    sent = json.loads(answered.value.request.post_data or "{}")
    # Only what changed is sent.
    assert set(sent) == {
        "extraction_instructions",
        "extraction_examples",
        "custom_types",
        "profile_fields",
    }, sent
    console.heading(f"Store {name}")
    expect(page.get_by_role("status").filter(has_text="The settings were saved.")).to_be_visible()
    stored = steered.api.get(f"{BASE}/{name}").json()
    assert stored["extraction_instructions"] == changed
    assert stored["extraction_examples"] == [
        *EXAMPLES,
        {
            "messages": [
                {"role": "user", "content": "I moved to Porto last week."},
                {"role": "assistant", "content": "Welcome to Porto!"},
            ],
            "memories": [{"text": "The user lives in Porto", "type": "preference"}],
        },
    ]
    assert stored["custom_types"][0]["examples"] == ["Likes tea", "Prefers window seats"]
    assert [(f["name"], f["type"]) for f in stored["profile_fields"]] == [
        ("name", "text"),
        ("city", "text"),
        ("pets", "list"),
        ("age", "number"),
        ("vegan", "boolean"),
        ("languages", "list"),
    ]
    # The store page shows them, in words.
    settings = page.locator("dl.facts").last
    expect(settings).to_contain_text("Never keep small talk.")
    expect(settings).to_contain_text("Keeps nothing (an example of what not to keep).")
    expect(settings).to_contain_text("Keeps [preference] “The user lives in Porto”.")
    expect(settings).to_contain_text("Examples: “Likes tea”, “Prefers window seats”")
    expect(settings).to_contain_text("languages (a list of texts): The languages the user speaks")
    _, raw = console.labels()
    assert raw == [], raw
    # Nothing changed since: saving again sends nothing.
    page.get_by_role("link", name="Change settings").click()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Nothing changed: there is nothing to save.")).to_be_visible()


def test_the_apis_422_is_shown_beside_the_field_it_names_and_nothing_changes(
    console, steered, provider
):
    name = _fresh_store(steered, provider)
    before = steered.api.get(f"{BASE}/{name}").json()
    console.sign_in(f"{BASE}/{name}/settings")
    page = console.page
    console.expected_statuses.add(422)
    page.get_by_label("Instructions").fill("k" * 2001)
    expect(page.locator("[data-count]")).to_have_text("2,001 of 2,000 characters")
    page.get_by_label("Field 1 name").fill("first name")
    page.get_by_label("Example 1, message 1").fill("   ")
    page.get_by_role("button", name="Save settings").click()
    instructions = page.locator("[id='p-extraction_instructions']")
    expect(instructions).to_have_text("String should have at most 2000 characters")
    expect(page.get_by_label("Instructions")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("[id='p-profile_fields.0.name']")).to_have_text(
        "Use only letters, digits and . _ : @ -, up to 64 characters."
    )
    expect(page.get_by_label("Field 1 name")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("[id='p-extraction_examples.0.messages.0.content']")).to_have_text(
        "String should have at least 1 character"  # (the form sends a message trimmed)
    )
    # Every problem is also listed above the form, by the API's name of its field.
    expect(page.locator("form .notice.error li")).to_have_count(3)
    console.shot("store-steering-invalid")

    # An example's memory of a type the same change removes: the API names the whole list, the
    # form shows it beside that memory's type.
    page.get_by_label("Instructions").fill("Keep facts.")
    page.get_by_label("Field 1 name").fill("name")
    page.get_by_label("Example 1, message 1").fill("I drink tea every morning.")
    page.get_by_role("button", name="Add a memory to example 1").click()
    page.get_by_label("Example 1, memory 1").fill("Drinks tea every morning")
    example = page.locator("fieldset.example").first
    example.get_by_label("Type", exact=True).last.select_option("preference")
    page.get_by_role("button", name="Remove type 1").click()
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("[id='p-extraction_examples.0.memories.0.type']")).to_contain_text(
        "type 'preference' is not one of this store's types"
    )
    after = steered.api.get(f"{BASE}/{name}").json()
    assert after == before


def test_removing_a_profile_field_actors_hold_is_refused_with_how_many_in_words(
    console, steered, provider
):
    name = _fresh_store(steered, provider)
    path = f"{BASE}/{name}"
    for actor, fields in (("a1", {"age": 30, "city": "Faro"}), ("a2", {"age": 31})):
        answer = steered.api.patch(f"{path}/actors/{actor}/profile", json={"fields": fields})
        assert answer.status_code == 200, answer.text
    console.sign_in(f"{path}/settings")
    page = console.page
    console.expected_statuses.add(409)
    page.get_by_role("button", name="Remove field 4").click()  # age
    page.get_by_role("button", name="Remove field 2").click()  # city
    page.get_by_role("button", name="Save settings").click()
    held = page.locator(".held")
    expect(held).to_contain_text("age: 2 actors hold a value.")
    expect(held).to_contain_text("city: 1 actor holds a value.")
    expect(held).to_contain_text("clear it on each actor's page first, or keep the field")
    expect(page.locator("form > .notice.error").first).to_contain_text(
        "Not saved: actors hold values of the profile fields this change removes: "
        "age (2 actors), city (1 actor)."
    )
    console.shot("store-profile-field-held")
    page.get_by_role("button", name="Keep age").click()
    expect(page.get_by_label("Field 5 name")).to_have_value("age")
    expect(page.get_by_role("button", name="Keep age")).to_have_count(0)
    expect(page.get_by_role("button", name="Keep city")).to_be_visible()
    stored = steered.api.get(path).json()
    assert [f["name"] for f in stored["profile_fields"]] == [f["name"] for f in FIELDS]


# --- an actor's page ---------------------------------------------------------------------------


def test_an_actors_page_shows_each_value_with_when_and_by_whom_and_its_memories_and_sessions(
    console, steered
):
    profile = steered.api.get(f"{steered.path}/actors/ann/profile").json()["fields"]
    console.sign_in(steered.page("/actors/ann"))
    page = console.page
    console.heading("Actor ann")
    expect(page.get_by_text("5 of 6 fields known.")).to_be_visible()
    row = page.locator("tr[data-field='city']")
    expect(row.locator("td.value")).to_have_text("Lisbon")
    expect(row.locator("time")).to_have_attribute("datetime", profile["city"]["updated_at"])
    expect(row).to_contain_text("extraction of session chat-1, messages #1 to #3")
    pets = page.locator("tr[data-field='pets'] td.value li")
    expect(pets).to_have_text(["Oscar", "Pixel"])
    expect(page.locator("tr[data-field='age']")).to_contain_text("a caller, through the API")
    expect(page.locator("tr[data-field='vegan'] td.value")).to_have_text("yes")
    birthday = page.locator("tr[data-field='birthday']")
    expect(birthday.locator("td.value")).to_have_text("not known")
    expect(birthday.get_by_role("button", name="Clear birthday…")).to_have_count(0)
    expect(birthday.get_by_role("button", name="Set birthday")).to_be_visible()

    memories = steered.api.get(f"{steered.path}/memories", params={"actor_id": "ann"}).json()
    assert memories["total"] > 0
    expect(page.locator(".memories-count")).to_contain_text(
        f"{memories['total']} memor"  # (memory or memories)
    )
    first = page.locator("table.list").nth(1).locator("tbody tr").first
    expect(first.get_by_role("rowheader")).to_have_text(memories["memories"][0]["text"])
    assert not any("weather" in m["text"] for m in memories["memories"])  # the instructions
    sessions = page.locator("table.list").nth(2).locator("tbody tr")
    expect(sessions).to_have_count(1)
    expect(sessions.first.get_by_role("rowheader")).to_have_text("chat-1")
    console.shot("actor")

    row.get_by_role("link", name="chat-1").click()
    console.heading("Session chat-1")


def test_a_field_is_set_changed_and_cleared_by_type_and_its_history_listed_newest_first(
    console, steered
):
    actor = unique("bo")
    steered.patch(actor, {"city": "Porto"})
    console.sign_in(steered.page(f"/actors/{actor}"))
    page = console.page
    console.heading(f"Actor {actor}")
    console.expected_statuses.add(422)

    page.get_by_role("button", name="Change city").click()
    page.get_by_label("New value (a text)").fill("Braga")
    page.get_by_role("button", name="Save city").click()
    expect(page.get_by_role("status").filter(has_text="The field city was set.")).to_be_visible()
    expect(page.locator("tr[data-field='city'] td.value")).to_have_text("Braga")

    page.get_by_role("button", name="Set pets").click()
    page.get_by_label("New value (a list of texts)").fill("Rex\n\n  Mia  \n")
    page.get_by_role("button", name="Save pets").click()
    expect(page.locator("tr[data-field='pets'] td.value li")).to_have_text(["Rex", "Mia"])

    page.get_by_role("button", name="Set age").click()
    page.get_by_label("New value (a number)").fill("forty")
    page.get_by_role("button", name="Save age").click()
    expect(page.locator("#edit-problem")).to_have_text("number: must be a number")
    expect(page.get_by_label("New value (a number)")).to_have_attribute("aria-invalid", "true")
    console.shot("actor-field-invalid")
    assert "age" not in steered.profile(actor)  # a refused value changes nothing
    page.get_by_label("New value (a number)").fill("42.5")
    page.get_by_role("button", name="Save age").click()
    expect(page.locator("tr[data-field='age'] td.value")).to_have_text("42.5")

    page.get_by_role("button", name="Set vegan").click()
    page.get_by_label("No", exact=True).check()
    page.get_by_role("button", name="Save vegan").click()
    expect(page.locator("tr[data-field='vegan'] td.value")).to_have_text("no")

    page.get_by_role("button", name="Set birthday").click()
    page.get_by_label("New value (a date)").fill("1990-04-05")
    page.get_by_role("button", name="Save birthday").click()
    expect(page.locator("tr[data-field='birthday'] td.value")).to_have_text("1990-04-05")
    assert steered.profile(actor) == {
        "city": "Braga",
        "pets": ["Rex", "Mia"],
        "age": 42.5,
        "vegan": False,
        "birthday": "1990-04-05",
    }

    page.get_by_role("button", name="Clear city…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(f"The value Braga leaves actor {actor}'s profile")
    dialog.get_by_role("button", name="Clear city").click()
    expect(page.get_by_role("status").filter(has_text="The field city was cleared")).to_be_visible()
    expect(page.locator("tr[data-field='city'] td.value")).to_have_text("not known")
    assert "city" not in steered.profile(actor)

    page.get_by_role("link", name="History of city").click()
    history = page.locator(".profile-history")
    expect(history.get_by_role("heading")).to_have_text("History of city")
    expect(history).to_contain_text("3 versions, newest first")
    versions = history.locator("ol.versions > li")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_contain_text("cleared")
    expect(versions.nth(0)).to_contain_text("Cleared")
    expect(versions.nth(1)).to_contain_text("Braga")
    expect(versions.nth(2)).to_contain_text("Porto")
    expect(versions.nth(2)).to_contain_text("by a caller, through the API")
    assert "history=city" in page.url
    expect(history.get_by_role("heading")).to_be_focused()  # and scrolled to
    console.shot("actor-history")
    page.get_by_role("link", name="Hide the history").click()
    expect(page.locator(".profile-history")).to_have_count(0)
    # No memories: forgetting names only the profile.
    expect(page.locator(".danger-zone")).to_contain_text(
        "Removes its profile (4 profile fields, and every field's history), at once"
    )


def test_forgetting_an_actor_confirms_what_goes_and_says_what_was_forgotten(console, steered):
    actor = unique("leaving")
    for text in ("Leaves for Mars in May", "Packs light"):
        body = {"text": text, "actor_id": actor}
        assert steered.api.post(f"{steered.path}/memories", json=body).status_code == 201
    steered.patch(actor, {"name": "Lee", "city": "Faro"})
    events = {"actor_id": actor, "events": [{"role": "user", "content": "Bye."}]}
    session = unique("goodbye")
    answer = steered.api.post(f"{steered.path}/sessions/{session}/events", json=events)
    assert answer.status_code == 200
    console.sign_in(steered.page(f"/actors/{actor}"))
    page = console.page
    zone = page.locator(".danger-zone")
    expect(zone).to_contain_text(
        "Removes its 2 memories and its profile (2 profile fields, and every field's history)"
    )
    page.get_by_role("button", name="Forget actor…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading")).to_have_text(f"Forget actor {actor}?")
    expect(dialog).to_contain_text("all 2 memories")
    expect(dialog).to_contain_text("its profile: 2 profile fields (name, city) and their history")
    expect(dialog).to_contain_text(
        "Its 1 session stays, and its unread and new messages are still extracted"
    )
    console.shot("forget-actor")
    dialog.get_by_role("button", name="Forget actor").click()
    expect(
        page.get_by_role("status").filter(
            has_text=f"Forgot 2 memories and 2 profile fields of actor {actor}."
        )
    ).to_be_visible()
    expect(zone).to_contain_text("there is nothing to forget")
    expect(zone.get_by_role("button")).to_have_count(0)
    expect(page.get_by_text("No memories of this actor.")).to_be_visible()
    assert steered.profile(actor) == {}
    listed = steered.api.get(f"{steered.path}/memories", params={"actor_id": actor}).json()
    assert listed["total"] == 0
    history = steered.api.get(
        f"{steered.path}/actors/{actor}/profile/history", params={"field": "city"}
    ).json()
    assert history["versions"] == []
    assert steered.api.get(f"{steered.path}/sessions/{session}").status_code == 200


def test_actor_ids_elsewhere_link_to_the_actors_page(console, steered):
    console.sign_in(steered.page("/memories"))
    page = console.page
    page.locator("tbody").get_by_role("link", name="ann", exact=True).first.click()
    console.heading("Actor ann")
    console.go(steered.page("/sessions/chat-1"))
    console.heading("Session chat-1")
    page.locator("dl.facts").get_by_role("link", name="ann").click()
    console.heading("Actor ann")
    console.go(steered.page("/sessions"))
    console.heading("Sessions")
    page.locator("tbody tr", has_text="chat-1").get_by_role("link", name="ann").click()
    console.heading("Actor ann")
    console.go(steered.page("/memories?actor_id=ann"))
    link = page.locator(".actor-link")
    expect(link).to_contain_text("shows its profile and sessions, and forgets everything")
    link.get_by_role("link", name="ann").click()
    console.heading("Actor ann")
    _, raw = console.labels()
    assert raw == [], raw


def test_a_key_limited_to_the_actor_sees_its_page_but_is_told_it_cannot_list_sessions(
    console, steered
):
    scope = {"instance_id": "local", "store": steered.name}
    made = steered.api.post("/keys", json={"access": "read", "stores": [scope], "actors": ["ann"]})
    assert made.status_code == 201, made.text
    key = made.json()
    try:
        console.expected_statuses = {403}
        console.sign_in(steered.page("/actors/ann"), api_key=key["api_key"])
        console.heading("Actor ann")
        city = console.page.locator("tr[data-field='city'] td.value")
        expect(city).to_have_text("Lisbon")  # the profile, memories: the actor's own data
        expect(console.page.locator(".memories-count")).to_be_visible()
        expect(console.page.locator("[data-sessions-forbidden]")).to_contain_text(
            "This key cannot list the store's sessions: a key limited to actors"
        )
        console.accessible()
    finally:
        steered.api.delete(f"/keys/{key['key_id']}")


def test_a_store_without_profile_fields_says_where_to_declare_them(console, steered):
    name = unique("plain")
    path = f"{BASE}/{name}"
    steered.made.append(path)
    assert steered.api.put(path, json={"dimensions": 3}).status_code == 201
    console.sign_in(f"{path}/actors/nobody")
    page = console.page
    console.heading("Actor nobody")
    expect(page.get_by_text("This store declares no profile fields.")).to_be_visible()
    expect(page.locator(".danger-zone")).to_contain_text("there is nothing to forget")
    page.get_by_role("link", name="settings", exact=True).click()
    console.heading(f"Settings of {name}")


# --- try it ------------------------------------------------------------------------------------


def _shared_start(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_try_it_shows_the_profile_and_the_contexts_order_and_the_start_it_keeps(console, steered):
    console.sign_in(steered.page("/try"))
    page = console.page
    console.heading("Try it")
    page.get_by_label("Session").fill("chat-1")
    page.get_by_label("User message").fill("Where do I live?")
    with page.expect_response(lambda r: r.url.endswith("/recall")) as answered:
        page.get_by_role("button", name="Recall").click()
    first = answered.value.json()
    assert first["profile"] == steered.profile("ann")
    shown = page.locator("dl.profile-recalled")
    expect(shown.locator("dt")).to_have_text(list(first["profile"]))
    expect(shown.locator("dd").nth(2).locator("li")).to_have_text(["Oscar", "Pixel"])
    headings = [line[3:] for line in first["context"].split("\n") if line.startswith("## ")]
    assert headings[0] == "About the user" and headings[-1] == "Long-term memories about the user"
    expect(page.locator("ol.sections li")).to_have_text(headings)
    context = page.get_by_label("Context string")
    assert context.inner_text() == first["context"]
    expect(page.locator(".same-start-said")).to_have_count(0)  # no previous recall yet
    page.get_by_text("The JSON answer").click()
    assert json.loads(page.get_by_label("Recall answer").inner_text()) == first

    page.get_by_label("User message").fill("What are my pets called?")
    with page.expect_response(lambda r: r.url.endswith("/recall")) as answered:
        page.get_by_role("button", name="Recall").click()
    second = answered.value.json()
    expect(context).to_have_text(second["context"])
    same = _shared_start(first["context"], second["context"])
    total = len(second["context"])
    # The profile and the recent messages come before the memories, which alone change.
    assert same >= second["context"].index("## Long-term memories"), (same, second["context"])
    expect(page.locator(".same-start-said")).to_contain_text(
        f"The first {same:,} characters of {total:,} ({100 * same // total}%) are the same as "
        "the previous recall's context of this session"
    )
    assert page.locator(".same-start").inner_text() == second["context"][:same]
    console.shot("try-it-profile")
    page.get_by_role("link", name="ann").click()
    console.heading("Actor ann")
