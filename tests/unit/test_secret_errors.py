"""Failures to read or write a stored provider key become domain errors with clear answers."""

import pytest
from cryptography.fernet import Fernet

from agent_memory.edge.http_errors import status_of
from agent_memory.errors import KeyServiceUnavailable, StoredKeyUnreadable
from agent_memory.providers.secrets import FernetCipher, KeyPlace, KeyServiceError, seal, unseal

PLACE = KeyPlace("org", "db", "notes", "0123456789ab")


class FailingKms:
    def __init__(self, retryable: bool) -> None:
        self.error = KeyServiceError(
            "kms said no",
            code="ThrottlingException" if retryable else "DisabledException",
            retryable=retryable,
        )

    def encrypt(self, plaintext: str, context: object) -> str:
        raise self.error

    def decrypt(self, ciphertext: str, context: object) -> str:
        raise self.error


def test_a_key_made_with_another_key_is_a_409_that_says_to_send_it_again():
    stored = FernetCipher(Fernet.generate_key()).encrypt("sk-secret", PLACE.context("llm_api_key"))
    with pytest.raises(StoredKeyUnreadable, match=r"llm_api_key.*send it again") as caught:
        unseal(FernetCipher(Fernet.generate_key()), stored, PLACE, "llm_api_key")
    assert int(status_of(caught.value)) == 409
    assert "sk-secret" not in caught.value.message


def test_a_throttled_key_service_is_a_503_and_a_disabled_key_a_409():
    with pytest.raises(KeyServiceUnavailable) as caught:
        unseal(FailingKms(retryable=True), "kms2:x", PLACE, "embed_api_key")
    assert int(status_of(caught.value)) == 503
    with pytest.raises(StoredKeyUnreadable, match="DisabledException"):
        unseal(FailingKms(retryable=False), "kms2:x", PLACE, "embed_api_key")
    with pytest.raises(KeyServiceUnavailable):
        seal(FailingKms(retryable=True), "sk-secret", PLACE, "llm_api_key")
    with pytest.raises(KeyServiceError):  # a misconfiguration stays loud
        seal(FailingKms(retryable=False), "sk-secret", PLACE, "llm_api_key")


@pytest.mark.parametrize(
    "key",
    [
        "sk-proj-abcdefgh  ijkl",
        "sk-x\tTABBED-secret-1234",
        "abc",
        "sk-normal-key-1234",
        "only_letters_and_underscores",
    ],
)
def test_an_error_code_that_echoes_the_key_is_never_kept(key):
    import base64
    import json

    from agent_memory.providers.client import _provider_code, _secret_values

    secrets = _secret_values({"Authorization": f"Bearer {key}"})
    for echoed in (
        key,
        key.lower(),
        key[::-1],
        "_".join(key.split()),
        base64.b32encode(key.encode()).decode().lower().rstrip("="),
        key.encode().hex(),
    ):
        body = json.dumps({"error": {"code": echoed, "type": echoed}}).encode()
        assert _provider_code(body, secrets) is None, echoed
    kept = json.dumps({"error": {"code": "invalid_api_key", "message": key}}).encode()
    assert _provider_code(kept, secrets) == "invalid_api_key"
