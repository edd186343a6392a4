"""What the provider factory (``providers.factory``) builds a provider from: a store's
``ProviderSetting`` and the ``Outbound`` way its calls go. A module of plain values, so that
the stores' models can name a setting without loading any provider."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent_memory.errors import ValidationFailed

if TYPE_CHECKING:
    from agent_memory.providers.client import ProviderClient

Role = Literal["llm", "embed", "rerank"]
"""Which provider of a store: the prefix of its settings' names (``llm_model``...)."""
Unseal = Callable[[str, str], str]
"""``(ciphertext, field)`` -> the key: ``providers.secrets.unseal`` bound to the store's place
(``stores.registry.key_place``); its errors name ``field``."""


@dataclass(frozen=True)
class ProviderSetting:
    """One provider of a store's settings (``stores.models.StoreConfig.provider_setting``):
    ``provider`` (``none`` for none), ``model``, ``base_url``, ``aws_region`` and ``key``
    (None: none), each as the settings named ``<role>_*`` hold it: a store's key is sealed, and
    read by ``Outbound.unseal`` when the provider is built."""

    role: Role
    provider: str
    model: str | None = None
    base_url: str | None = None
    aws_region: str | None = None
    key: str | None = None

    def missing(self, field: str) -> ValidationFailed:
        """``ValidationFailed`` for the setting ``field``, which this provider needs."""
        return ValidationFailed(
            f"{field} is required when {self.role}_provider is '{self.provider}'.",
            details=[{"field": field, "problem": "required"}],
        )

    def unexpected_base_url(self) -> ValidationFailed:
        """``ValidationFailed`` for a base URL this provider does not take."""
        return ValidationFailed(
            f"{self.role}_base_url is only used when {self.role}_provider is 'custom'.",
            details=[{"field": f"{self.role}_base_url", "problem": "not allowed"}],
        )

    def unknown(self, known: tuple[str, ...]) -> ValidationFailed:
        """``ValidationFailed`` for a provider that is not one of ``known`` (or ``none``)."""
        names = ", ".join(f"'{name}'" for name in (*known, "none"))
        return ValidationFailed(
            f"Unknown {self.role}_provider '{self.provider}'; use one of {names}.",
            details=[{"field": f"{self.role}_provider", "problem": "unknown provider"}],
        )


@dataclass(frozen=True)
class Outbound:
    """How a provider's calls go out: through ``client`` (``providers.client.ProviderClient``:
    its deadline and retries), to private addresses only with ``allow_private`` (the local
    stack's KIVIDB_ALLOW_PRIVATE_ENDPOINTS), reading a setting's key with ``unseal``
    (``in_the_clear`` for a key held as it is, as tests and tools hold one)."""

    client: ProviderClient
    allow_private: bool
    unseal: Unseal

    def api_key(self, setting: ProviderSetting) -> str | None:
        """The key of ``setting``, read now (``unseal``); None when it has none. Errors:
        ``unseal``'s (``providers.secrets.unseal``: ``StoredKeyUnreadable``,
        ``KeyServiceUnavailable``)."""
        if setting.key is None:
            return None
        return self.unseal(setting.key, f"{setting.role}_api_key")


def in_the_clear(key: str, field: str) -> str:
    """An ``Unseal`` for a key held as it is (tests, tools, benchmarks): ``key`` itself."""
    return key
