"""Memory an operator can steer, over HTTP through the local stack with the scripted model
(``tools.scripted_model``): instructions that extraction follows, actor profiles filled by
extraction and by callers with each field's history, the profile in recall and its context,
forgetting an actor, and bad settings and values refused with nothing changed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from kividb_memory import ConflictError, MemoryClient, NotFoundError, ValidationError
from tests.support.common import wait_for
from tests.support.stack import model_store

FIELDS = [
    {"name": "name", "description": "What the user is called", "type": "text"},
    {"name": "city", "description": "Where the user lives", "type": "text"},
    {"name": "pets", "description": "The user's pets, by name", "type": "list"},
    {"name": "age", "description": "How old the user is", "type": "number"},
]
INSTRUCTIONS = "Keep the user's facts and preferences. Never keep opinions about the weather."


@pytest.fixture
def api(open_stack) -> Iterator[MemoryClient]:
    with open_stack.memory() as client:
        yield client


@pytest.fixture
def steered(api, provider) -> Iterator[str]:
    made: list[str] = []
    path = model_store(
        api,
        provider,
        made,
        extraction_instructions=INSTRUCTIONS,
        extraction_examples=[
            {
                "messages": [{"role": "user", "content": "Lovely weather today!"}],
                "memories": [],
            }
        ],
        profile_fields=FIELDS,
    )
    yield path.rsplit("/", 1)[1]
    for made_path in made:
        with contextlib.suppress(NotFoundError):
            api.delete_store("local", made_path.rsplit("/", 1)[1])


def test_extraction_fills_the_profile_and_follows_the_instructions(api, steered):
    store = api.store("local", steered)
    store.add_events(
        "chat-1",
        [
            {"role": "user", "content": "Hi, my name is Ann. I think the weather is awful today."},
            {"role": "assistant", "content": "Nice to meet you, Ann."},
            {"role": "user", "content": "I live in Lisbon. My pets are Oscar and Pixel."},
        ],
        actor_id="ann",
    )
    store.extract("chat-1")
    profile = wait_for(
        lambda: (p := store.get_profile("ann")) and len(p.fields) == 3 and p,
        60,
        "the profile to fill",
    )
    assert {name: entry.value for name, entry in profile.fields.items()} == {
        "name": "Ann",
        "city": "Lisbon",
        "pets": ["Oscar", "Pixel"],
    }
    source = profile.fields["city"].source
    assert (source.by, source.session_id, source.first_seq, source.last_seq) == (
        "extraction",
        "chat-1",
        1,
        3,
    )
    texts = [m.text for m in store.list_memories(actor_id="ann").memories]
    assert texts and not any("weather" in t for t in texts), texts  # never keep the weather
    recalled = store.recall("chat-1", query="where do I live?")
    assert recalled.profile == {"name": "Ann", "city": "Lisbon", "pets": ["Oscar", "Pixel"]}
    context = recalled.context
    assert context.index("## About the user") < context.index("## Recent messages")
    assert '- city: "Lisbon"' in context and '- pets: "Oscar", "Pixel"' in context
    usage = store.usage().days[-1]
    assert usage.profile_updates == 3


def test_a_caller_sets_and_clears_fields_each_change_a_version(api, steered):
    store = api.store("local", steered)
    first = store.update_profile("bob", {"city": "Porto", "age": 41})
    assert {n: e.value for n, e in first.fields.items()} == {"city": "Porto", "age": 41}
    assert first.fields["age"].source.by == "caller"
    store.update_profile("bob", {"city": "Braga"})
    store.update_profile("bob", {"city": "Braga"})  # the same value: no new version
    cleared = store.update_profile("bob", {"age": None})
    assert set(cleared.fields) == {"city"}
    history = store.profile_history("bob", "city")
    assert [v.value for v in history.versions] == ["Braga", "Porto"]
    assert [v.value for v in store.profile_history("bob", "age").versions] == [None, 41]
    again = store.update_profile("bob", {"city": "Faro"}, idempotency_key="one-change")
    replay = store.update_profile("bob", {"city": "Faro"}, idempotency_key="one-change")
    assert again == replay
    assert len(store.profile_history("bob", "city").versions) == 3


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"shoe_size": 42}, "fields.shoe_size"),
        ({"age": "forty"}, "fields.age"),
        ({"age": True}, "fields.age"),
        ({"pets": [1, 2]}, "fields.pets"),
        ({"name": "   "}, "fields.name"),
        ({"city": "Porto", "age": "old"}, "fields.age"),
    ],
)
def test_a_bad_patch_is_422_naming_the_field_and_changes_nothing(api, steered, fields, named):
    store = api.store("local", steered)
    store.update_profile("cy", {"city": "Evora"})
    with pytest.raises(ValidationError) as refused:
        store.update_profile("cy", fields)
    assert named in {d.field for d in refused.value.details}
    assert {n: e.value for n, e in store.get_profile("cy").fields.items()} == {"city": "Evora"}


def test_bad_steering_settings_are_422_naming_the_field_and_change_nothing(
    api, open_stack, steered
):
    before = api.get_store("local", steered)
    cases = [
        ({"extraction_instructions": "x" * 2001}, "extraction_instructions"),
        ({"extraction_instructions": " \n"}, "extraction_instructions"),
        ({"profile_fields": [{"name": "a b", "description": "d"}]}, "profile_fields.0.name"),
        ({"profile_fields": [*FIELDS, FIELDS[0]]}, "profile_fields"),
        (
            {"profile_fields": [{"name": "x", "description": "d", "type": "map"}]},
            "profile_fields.0.type",
        ),
        (
            {"profile_fields": [{"name": f"f{n}", "description": "d"} for n in range(21)]},
            "profile_fields",
        ),
        (
            {"extraction_examples": [{"messages": [], "memories": []}]},
            "extraction_examples.0.messages",
        ),
        (
            {
                "extraction_examples": [
                    {
                        "messages": [{"role": "user", "content": "x"}],
                        "memories": [{"text": "y", "type": "nope"}],
                    }
                ]
            },
            "extraction_examples",
        ),
        (
            {"custom_types": [{"name": "t", "description": "d", "examples": ["a", "b", "c", "d"]}]},
            "custom_types.0.examples",
        ),
    ]
    with open_stack.client() as http:
        for settings, named in cases:
            answer = http.put(f"/instances/local/agent-memory/{steered}", json=settings)
            assert answer.status_code == 422, (settings, answer.text)
            fields = {d["field"] for d in answer.json()["details"]}
            assert named in fields, (settings, fields)
    after = api.get_store("local", steered)
    assert after.model_dump(exclude={"updated_at"}) == before.model_dump(exclude={"updated_at"})


def test_a_field_an_actor_holds_cannot_be_removed_until_cleared(api, steered):
    store = api.store("local", steered)
    store.update_profile("dee", {"age": 30})
    with pytest.raises(ConflictError) as refused:
        api.put_store("local", steered, profile_fields=FIELDS[:3])
    assert "'age' (1)" in str(refused.value)
    store.update_profile("dee", {"age": None})
    assert [
        f.name for f in api.put_store("local", steered, profile_fields=FIELDS[:3]).profile_fields
    ] == [
        "name",
        "city",
        "pets",
    ]


def test_forgetting_an_actor_forgets_its_profile(api, steered):
    store = api.store("local", steered)
    store.update_profile("eve", {"name": "Eve", "city": "Nice"})
    forgotten = store.forget_actor("eve")
    assert forgotten.profile_fields_deleted == 2
    assert store.get_profile("eve").fields == {}
    assert store.profile_history("eve", "city").versions == []


def test_a_profile_import_that_breaks_a_rule_is_refused_naming_it_and_writes_nothing(
    api, steered, open_stack
):
    store = api.store("local", steered)
    store.update_profile("gil", {"city": "Porto"})
    before = store.export_profiles().profiles
    entry = {"value": "Faro", "updated_at": "2026-01-02T03:04:05Z", "source": {"by": "caller"}}
    good = {"actor_id": "hal", "fields": {"city": entry}}
    cases = [
        ({"actor_id": "gil", "fields": {"shoe": entry}}, "profiles.1.fields.shoe"),
        (
            {"actor_id": "gil", "fields": {}, "history": {"age": [entry | {"value": 3}, entry]}},
            "profiles.1.history.age.1",
        ),
        ({"actor_id": "gil", "fields": {"pets": entry | {"value": [1]}}}, "profiles.1.fields.pets"),
        ({"actor_id": "a b", "fields": {"city": entry}}, "profiles.1.actor_id"),
        (
            {"actor_id": "gil", "fields": {"city": entry | {"source": {"by": "someone"}}}},
            "profiles.1.fields.city.source.by",
        ),
    ]
    path = f"/instances/local/agent-memory/{steered}/import/profiles"
    with open_stack.client() as http:
        for bad, named in cases:
            answer = http.post(path, json={"profiles": [good, bad]})
            assert answer.status_code == 422, (bad, answer.text)
            assert named in {d["field"] for d in answer.json()["details"]}, answer.text
        assert http.post(path, json={"profiles": []}).status_code == 422
    assert store.export_profiles().profiles == before  # "hal" was never written
    assert store.import_profiles([good]).imported == 1
    assert store.get_profile("hal").fields["city"].value == "Faro"
