"""The store setting ``redact_card_digit_runs``: its default, the PUT body, the views, the
client's mirror of them, and the write path handing it to ``redact``."""

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from agent_memory.memories.models import MemoryIn
from agent_memory.memories.writes import MemoryWriter
from agent_memory.stores.models import StoreConfig, StorePut, StoreSettings, StoreView
from kividb_memory import models as client_models

NOW = datetime(2026, 1, 1, tzinfo=UTC)
TEXT = "card 4111111111111111, grouped 4111 1111 1111 1111"


def test_digit_runs_are_cards_by_default():
    assert StoreSettings().redact_card_digit_runs is True
    assert StoreSettings(redact_card_digit_runs=False).redact_card_digit_runs is False
    with pytest.raises(ValidationError):
        StoreSettings.model_validate({"redact_card_digit_runs": "no"})


def test_the_put_body_and_the_view_carry_it():
    assert StorePut().redact_card_digit_runs is None  # omitted: kept, or the default when new
    assert StorePut(redact_card_digit_runs=False).redact_card_digit_runs is False
    assert StoreView.model_fields["redact_card_digit_runs"].is_required()
    # A store saved before the setting existed reads with the default.
    old = StoreConfig.model_validate({"name": "s", "created_at": NOW, "updated_at": NOW})
    assert old.redact_card_digit_runs is True


def test_the_client_mirrors_it():
    assert client_models.StorePut(redact_card_digit_runs=False).redact_card_digit_runs is False
    view = {
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
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    }
    assert client_models.StoreView.model_validate(view).redact_card_digit_runs is True
    off = client_models.StoreView.model_validate({**view, "redact_card_digit_runs": False})
    assert off.redact_card_digit_runs is False


def _writer(**settings) -> MemoryWriter:
    """A writer with only its store: enough for the redaction step, which touches nothing
    else (no database, no embedder)."""
    writer = object.__new__(MemoryWriter)
    writer._store = StoreConfig(name="s", created_at=NOW, updated_at=NOW, **settings)
    return writer


@pytest.mark.parametrize(
    ("settings", "text", "topics", "counts"),
    [
        ({}, "card [card], grouped [card]", ["[card]"], {"card": 3}),
        (
            {"redact_card_digit_runs": False},
            "card 4111111111111111, grouped [card]",
            ["4111111111111111"],
            {"card": 1},
        ),
        ({"redact_pii": False}, TEXT, ["4111111111111111"], {}),
    ],
)
def test_the_write_path_passes_the_setting_to_redact(settings, text, topics, counts):
    body = MemoryIn(text=TEXT, topics=["4111111111111111"], vector=[1.0, 0.0, 0.0])
    assert _writer(**settings)._redacted(body) == (text, topics, counts)
