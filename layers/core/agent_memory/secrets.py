"""Encryption of provider API keys at rest (DESIGN section 5).

The ``Cipher`` port has one implementation here: Fernet (AES-128-CBC with HMAC-SHA256, from the
``cryptography`` package, https://github.com/fernet/spec/blob/master/Spec.md) keyed by a local key
file. It serves the local stack; envelope encryption under KMS comes with the background-work
issue and plugs into the same port.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from cryptography.fernet import Fernet, InvalidToken


class Cipher(Protocol):
    def encrypt(self, plaintext: str) -> str:
        """Ciphertext as URL-safe ASCII."""
        ...

    def decrypt(self, ciphertext: str) -> str:
        """Raises ``SecretUnreadable`` when the ciphertext was not made with this key."""
        ...


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with the configured key (key rotated or lost)."""


class FernetCipher:
    """Fernet with a 32-byte key given in its URL-safe base64 form (44 ASCII characters)."""

    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")

    def decrypt(self, ciphertext: str) -> str:
        try:
            return self._fernet.decrypt(ciphertext.encode("ascii")).decode("utf-8")
        except InvalidToken as exc:
            raise SecretUnreadable("stored secret cannot be decrypted with this key") from exc


def load_key_file(path: Path, *, create: bool = False) -> bytes:
    """Read a Fernet key file; with ``create``, make one (mode 0600) when it does not exist.

    Raises ``FileNotFoundError`` when absent and ``create`` is false, ``ValueError`` when the
    file does not hold a valid key.
    """
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(Fernet.generate_key())
    key = path.read_bytes().strip()
    Fernet(key)  # raises ValueError on a malformed key
    return key
