"""Provider API keys at rest."""

import stat

import pytest
from cryptography.fernet import Fernet

from agent_memory.providers.secrets import FernetCipher, KeyPlace, SecretUnreadable, load_key_file

CONTEXT = KeyPlace("org", "db", "notes", "0123456789ab").context("llm_api_key")


def test_round_trip_and_ciphertext_hides_the_key():
    cipher = FernetCipher(Fernet.generate_key())
    token = cipher.encrypt("sk-live-abc123", CONTEXT)
    assert "sk-live-abc123" not in token and token.startswith("fernet2:")
    assert cipher.decrypt(token, CONTEXT) == "sk-live-abc123"


def test_another_key_cannot_read_it():
    token = FernetCipher(Fernet.generate_key()).encrypt("sk", CONTEXT)
    with pytest.raises(SecretUnreadable):
        FernetCipher(Fernet.generate_key()).decrypt(token, CONTEXT)


def test_key_file_is_created_private_and_read_back(tmp_path):
    path = tmp_path / "dir" / "secret.key"
    first = load_key_file(path, create=True)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key_file(path, create=True) == first


def test_missing_or_bad_key_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_key_file(tmp_path / "absent")
    bad = tmp_path / "bad"
    bad.write_text("not a key")
    with pytest.raises(ValueError):
        load_key_file(bad)
