"""Store settings, provider fields and event bodies: defaults, ranges and cross-field rules."""

from datetime import UTC, datetime

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from agent_memory.memories.models import MemoryIn, RecallRequest
from agent_memory.models import is_invisible
from agent_memory.sessions.models import EventIn, EventsRequest
from agent_memory.stores.models import ProviderSettings, StorePut, StoreSettings


def test_defaults_are_the_seed_table():
    settings = StoreSettings()
    assert settings.model_dump() == {
        "extraction_delay_seconds": 300,
        "summarize_after": 40,
        "keep_recent": 12,
        "session_ttl_seconds": 3600,
        "memory_ttl_seconds": 31_536_000,
        "dedupe_threshold": 0.92,
        "custom_types": [],
        "redact_pii": True,
        "redact_card_digit_runs": True,
        "webhooks": [],
        "extraction_instructions": None,
        "extraction_examples": [],
        "profile_fields": [],
        "consolidate_after_memories": 50,
        "consolidation_mode": "apply",
    }


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [
        ("extraction_delay_seconds", 29, False),
        ("extraction_delay_seconds", 30, True),
        ("extraction_delay_seconds", 3599, True),
        ("extraction_delay_seconds", 3601, False),
        ("dedupe_threshold", 0, False),
        ("dedupe_threshold", 0.0001, True),
        ("dedupe_threshold", 1, True),
        ("dedupe_threshold", 1.01, False),
        ("consolidate_after_memories", 0, True),
        ("consolidate_after_memories", 100_000, True),
        ("consolidate_after_memories", -1, False),
        ("consolidate_after_memories", 100_001, False),
        ("consolidation_mode", "review", True),
        ("consolidation_mode", "sometimes", False),
        ("summarize_after", 0, False),
        ("keep_recent", -1, False),
        ("session_ttl_seconds", 59, False),
        ("memory_ttl_seconds", 59, False),
        ("redact_pii", "yes", False),
        ("summarize_after", "30", False),
        ("dedupe_threshold", 1, True),
    ],
)
def test_setting_ranges(field, value, ok):
    if ok:
        StoreSettings.model_validate({field: value})
    else:
        with pytest.raises(ValidationError):
            StoreSettings.model_validate({field: value})


def test_keep_recent_must_be_below_summarize_after():
    StoreSettings(summarize_after=10, keep_recent=9)
    with pytest.raises(ValidationError, match="keep_recent"):
        StoreSettings(summarize_after=10, keep_recent=10)


def test_sessions_must_outlive_the_extraction_delay():
    with pytest.raises(ValidationError, match="session_ttl_seconds"):
        StoreSettings(session_ttl_seconds=300, extraction_delay_seconds=300)


def test_custom_types_at_most_three_unique_and_not_builtin():
    one = {"name": "order_issue", "description": "a problem with an order"}
    StoreSettings.model_validate({"custom_types": [one]})
    four = [{"name": f"t{i}", "description": "d"} for i in range(4)]
    with pytest.raises(ValidationError):
        StoreSettings.model_validate({"custom_types": four})
    with pytest.raises(ValidationError, match="unique"):
        StoreSettings.model_validate({"custom_types": [one, one]})
    for reserved in ("semantic", "episodic"):
        with pytest.raises(ValidationError, match="built-in"):
            StoreSettings.model_validate({"custom_types": [{"name": reserved, "description": "d"}]})
    with pytest.raises(ValidationError):
        StoreSettings.model_validate({"custom_types": [{"name": "Bad Name", "description": "d"}]})


def test_providers_need_a_model_and_custom_needs_an_https_base_url():
    ProviderSettings(llm_provider="openai", llm_model="gpt-4o-mini")
    with pytest.raises(ValidationError, match="llm_model is required"):
        ProviderSettings(llm_provider="anthropic")
    with pytest.raises(ValidationError, match="embed_base_url is required"):
        ProviderSettings(embed_provider="custom", embed_model="m")
    with pytest.raises(ValidationError, match="https"):
        ProviderSettings(
            embed_provider="custom", embed_model="m", embed_base_url="http://example.com/v1"
        )
    with pytest.raises(ValidationError, match="only used"):
        ProviderSettings(llm_provider="openai", llm_model="m", llm_base_url="https://x.example")
    ProviderSettings(llm_provider="custom", llm_model="m", llm_base_url="https://llm.example/v1")


def test_put_body_rejects_unknown_fields_so_typos_are_not_silent():
    with pytest.raises(ValidationError, match="Extra inputs"):
        StorePut.model_validate({"sumarize_after": 10})


def test_event_fields():
    event = EventIn(role="user", content="hi", created_at=datetime(2023, 5, 8, 13, 56))
    assert event.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    for bad in ({"role": "bot", "content": "x"}, {"role": "user", "content": ""}):
        with pytest.raises(ValidationError):
            EventIn.model_validate(bad)
    with pytest.raises(ValidationError):
        EventIn(role="user", content="x" * 32_001)
    with pytest.raises(ValidationError):
        EventsRequest.model_validate({"events": []})


def test_offset_created_at_is_converted_to_utc():
    event = EventIn.model_validate(
        {"role": "user", "content": "x", "created_at": "2023-05-08T15:56:00+02:00"}
    )
    assert event.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_recall_limit_bounds():
    assert RecallRequest(session_id="s").limit == 10
    with pytest.raises(ValidationError):
        RecallRequest(session_id="s", limit=0)
    with pytest.raises(ValidationError):
        RecallRequest(session_id="s", limit=101)
    with pytest.raises(ValidationError):
        RecallRequest(session_id="bad id")


def test_reprs_never_show_api_keys_and_stay_short():
    # Powertools puts the route's arguments in a debug message on every request.
    text = repr(StorePut(llm_api_key="sk-SECRET-1", embed_api_key="sk-SECRET-2"))
    assert "SECRET" not in text
    assert "<1536 items>" in repr(RecallRequest(session_id="s", query_vector=[0.5] * 1536))


# Characters that show nothing and that a name may hold (joiners) or that are not Cf (so the
# category check alone lets them through): each alone, or any mix, is a name of no one.
INVISIBLE_ALLOWED = [
    "\u200c",
    "\u200d",
    "\u3164",
    "\u115f",
    "\u1160",
    "\uffa0",
    "\ufe0f",
    "\u034f",
    "\u17b4",
    " ",
    "\u3000",
    "\u00a0",
]


@given(st.lists(st.sampled_from(INVISIBLE_ALLOWED), min_size=1, max_size=12))
def test_a_name_or_memory_text_that_shows_nothing_is_refused(chars):
    text = "".join(chars)
    with pytest.raises(ValidationError) as refused:
        EventIn.model_validate({"role": "user", "content": "hi", "name": text})
    assert "visible" in str(refused.value)
    with pytest.raises(ValidationError):
        MemoryIn.model_validate({"text": text})


@given(st.lists(st.sampled_from(INVISIBLE_ALLOWED), max_size=6), st.sampled_from("aZ山👩é1-"))
def test_a_name_with_one_visible_character_is_kept(chars, visible):
    name = "".join(chars[:3]) + visible + "".join(chars[3:])
    kept = EventIn.model_validate({"role": "user", "content": "hi", "name": name})
    assert kept.name == name


def test_invisible_is_the_default_ignorable_property_and_white_space():
    # Unicode's Default_Ignorable_Code_Point samples across its ranges, and a few that are not
    for char in "\u00ad\u034f\u061c\u115f\u17b5\u180e\u200b\u2065\u3164\ufe00\ufeff\uffa0\ufff0":
        assert is_invisible(char), f"U+{ord(char):04X}"
    for char in ["\U0001bca0", "\U0001d173", "\U000e0001", "\U000e0fff", "\t", "\u2028"]:
        assert is_invisible(char), f"U+{ord(char):04X}"
    for char in "a山👩\u0301\u2800\ue000\U000f0000":
        assert not is_invisible(char), f"U+{ord(char):04X}"
