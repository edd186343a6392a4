"""Encryption of provider API keys at rest (DESIGN section 5).

Every stored key is bound to where it belongs (``KeyPlace``): the organization, the instance and the
store (name and incarnation, ``database.keys.StoreKeys``) whose settings hold it, and which key it
is (``llm_api_key`` or ``embed_api_key``). That binding is the encryption context of every
``encrypt`` and ``decrypt`` (``KeyPlace.context``), authenticated by both formats: a key read
anywhere else, say after its database was registered to another organization or as another instance,
or copied into another store or field, cannot be decrypted (``SecretUnreadable``, answered as 409
``stored_key_unreadable``). Keys stored before the binding (formats ``kms1:`` and bare Fernet
tokens, under the one context ``LEGACY_ENCRYPTION_CONTEXT``) are refused as ``LegacySecret``:
nothing records where they were stored, so they are never read again; sending the key again with
``PUT`` stores it bound (docs/deploy.md, "Secrets").

The ``Cipher`` port has three implementations here:

- ``KmsEnvelopeCipher``: envelope encryption under an AWS KMS key (what AWS uses). Every
  ``encrypt`` asks KMS for a fresh 256-bit data key (``GenerateDataKey``) and seals the text with
  AES-256-GCM under it; the stored form carries the data key as KMS encrypted it. ``decrypt`` has
  KMS decrypt the data key (``Decrypt``), then opens the AES-GCM box.
- ``FernetCipher``: Fernet (AES-128-CBC with HMAC-SHA256, from the ``cryptography`` package,
  https://github.com/fernet/spec/blob/master/Spec.md) under a key derived for the context from
  a local key file (HKDF-SHA256, RFC 5869, the context as ``info``): the local stack and the
  tests.
- ``MultiFormatCipher``: reads both stored formats and writes with the configured one, so that
  keys stored before a switch to KMS still decrypt while their Fernet key is configured.

Stored formats (both URL-safe ASCII):

- Fernet, version 2: ``"fernet2:"`` + a Fernet token under the key
  ``HKDF-SHA256(ikm=the key file's 32 bytes, salt=none, info=b"kividb provider api key\0" +
  canonical(context), length=32)``. Legacy (refused): a bare Fernet token (``gAAAAA...``).
- KMS envelope, version 2: ``"kms2:"`` + URL-safe base64 (with padding) of::

      edk_len   2 bytes, unsigned big-endian (1..4096)
      edk       edk_len bytes: the data key as KMS encrypted it (GenerateDataKey CiphertextBlob,
                made with the context as EncryptionContext)
      nonce     12 bytes, random (AES-GCM's 96-bit IV)
      sealed    AES-256-GCM(data key, nonce, UTF-8 text, aad) = ciphertext || 16-byte tag

  ``aad`` (authenticated, not stored) is ``b"kms2:" + edk_len + edk + canonical(context)``: the
  box cannot be re-attached to another data key, read as another version, or read under
  another context even with its data key at hand (the data key cache below). Legacy (refused):
  ``"kms1:"``, the same layout with ``aad = b"kms1:" + edk_len + edk`` under the one context
  ``{"purpose": "kividb-provider-api-key"}``.

``canonical(context)`` is the context as JSON, names sorted, no spaces, ASCII only: one text
for one context, and no two contexts with the same text.

KMS API shapes (boto3 ``kms`` client), as documented:

- ``generate_data_key(KeyId=, KeySpec="AES_256", EncryptionContext={...})`` returns
  ``{"CiphertextBlob": bytes, "Plaintext": bytes (32), "KeyId": arn}``; every call returns a
  unique data key (https://docs.aws.amazon.com/kms/latest/APIReference/API_GenerateDataKey.html,
  https://awscli.amazonaws.com/v2/documentation/api/latest/reference/kms/generate-data-key.html).
- ``decrypt(CiphertextBlob=, KeyId=, EncryptionContext={...})`` returns ``{"Plaintext": bytes,
  "KeyId": arn}``. ``KeyId`` is optional for symmetric keys but recommended: KMS then uses only
  that key and fails for a ciphertext of another one
  (https://docs.aws.amazon.com/kms/latest/APIReference/API_Decrypt.html).
- The encryption context is authenticated data bound to the encrypted data key: decrypting needs
  the same (case-sensitive) context, else ``InvalidCiphertextException``; it is not secret and
  appears in CloudTrail (https://docs.aws.amazon.com/kms/latest/developerguide/encrypt_context.html).
  IAM conditions ``kms:EncryptionContext:purpose`` in ``template.yaml`` rely on it.
- Errors: ``InvalidCiphertextException`` (corrupted blob or other context) and
  ``IncorrectKeyException`` (made under another KMS key)
  (https://docs.aws.amazon.com/botocore/latest/reference/services/kms/client/exceptions/InvalidCiphertextException.html,
  .../IncorrectKeyException.html).

AES-GCM: ``cryptography``'s ``AESGCM(key).encrypt(nonce, data, associated_data)``, 12-byte nonce,
``InvalidTag`` on any change (https://cryptography.io/en/latest/hazmat/primitives/aead/).

No plaintext API key, and no plaintext data key, is ever part of a log line, an exception
message or a ``repr`` here; exceptions name the KMS error code only.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from agent_memory.errors import KeyServiceUnavailable, StoredKeyUnreadable

KMS_PREFIX: Final = "kms2:"
FERNET_PREFIX: Final = "fernet2:"
LEGACY_KMS_PREFIX: Final = "kms1:"
LEGACY_FERNET_PREFIX: Final = "gAAAAA"  # a Fernet token's version byte 0x80 and a timestamp
PURPOSE: Final = "kividb-provider-api-key"
LEGACY_ENCRYPTION_CONTEXT: Final[Mapping[str, str]] = {"purpose": PURPOSE}
"""The one encryption context of the legacy formats: no place, so they are never read."""
_HKDF_INFO: Final = b"kividb provider api key\0"
KEY_FIELDS: Final = frozenset({"llm_api_key", "embed_api_key", "rerank_api_key", "webhook_secret"})
NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
DATA_KEY_BYTES: Final = 32
MAX_EDK_BYTES: Final = 4096  # KMS ciphertext blobs of a data key are about 180 bytes
DATA_KEY_CACHE_ENTRIES: Final = 256
DATA_KEY_CACHE_SECONDS: Final = 300.0

# KMS error codes after which trying again may succeed (throttling, KMS or network trouble).
_RETRYABLE_CODES: Final = frozenset(
    {
        "ThrottlingException",
        "KMSInternalException",
        "DependencyTimeoutException",
        "KeyUnavailableException",
        "ServiceUnavailable",
        "RequestTimeout",
        "InternalFailure",
    }
)
# Decrypt errors that say "this ciphertext was not made under this key and context".
_UNREADABLE_CODES: Final = frozenset({"InvalidCiphertextException", "IncorrectKeyException"})


@dataclass(frozen=True)
class KeyPlace:
    """Where a stored provider API key belongs: the organization, the instance and the store
    (its name and incarnation, ``stores.models.StoreConfig``) whose settings hold it."""

    org_id: str
    instance_id: str
    store: str
    incarnation: str

    def context(self, field: str) -> dict[str, str]:
        """The encryption context of the store's ``field`` (``llm_api_key`` or
        ``embed_api_key``): ``purpose`` (which the IAM policies of template.yaml test), ``org``,
        ``instance``, ``store``, ``incarnation`` and ``key``, all strings (KMS
        EncryptionContext values are strings). ``ValueError`` for another field."""
        if field not in KEY_FIELDS:
            raise ValueError(f"no such key field: {field}")
        return {
            "purpose": PURPOSE,
            "org": self.org_id,
            "instance": self.instance_id,
            "store": self.store,
            "incarnation": self.incarnation,
            "key": field,
        }


def canonical(context: Mapping[str, str]) -> bytes:
    """``context`` as one text: JSON with sorted names, no spaces, ASCII only."""
    return json.dumps(dict(context), sort_keys=True, separators=(",", ":")).encode("ascii")


class Cipher(Protocol):
    """Port: encrypt a provider API key for storage, bound to an encryption context
    (``KeyPlace.context``), and read it back under the same context."""

    def encrypt(self, plaintext: str, context: Mapping[str, str]) -> str:
        """Ciphertext as URL-safe ASCII, readable under ``context`` only."""
        ...

    def decrypt(self, ciphertext: str, context: Mapping[str, str]) -> str:
        """Raises ``SecretUnreadable`` when the ciphertext was not made with this key and
        ``context`` (``LegacySecret`` for a format of before the binding)."""
        ...


class SecretUnreadable(Exception):
    """A stored secret cannot be decrypted with the configured key (key rotated or lost, the
    ciphertext changed, another context, or a format whose key is not configured)."""


class LegacySecret(SecretUnreadable):
    """A stored secret of a format of before keys were bound to their place (``kms1:`` or a bare
    Fernet token): it may have been stored by another organization or store, so it is not read."""

    def __init__(self) -> None:
        super().__init__("stored secret predates the binding of keys to their store")


class KeyServiceError(SecretUnreadable):
    """KMS refused or failed a request (``encrypt`` or ``decrypt``).

    ``retryable``: throttling, timeouts, network or KMS internal errors (trying later may work).
    Not retryable: access denied, key disabled, pending deletion or not found. A subclass of
    ``SecretUnreadable`` so that callers of ``decrypt`` catch one type; ``code`` is the KMS error
    code (or the botocore exception name), never anything secret.
    """

    def __init__(self, message: str, *, code: str, retryable: bool) -> None:
        super().__init__(message)
        self.code = code
        self.retryable = retryable


class FernetCipher:
    """Fernet under keys derived from a 32-byte key given in its URL-safe base64 form (44 ASCII
    characters, a Fernet key file's): one derived key per context (module docstring), so a token
    opens under the context it was made for only. ``ValueError`` for a malformed key."""

    def __init__(self, key: bytes) -> None:
        Fernet(key)  # checks the form
        self._key = base64.urlsafe_b64decode(key)

    def __repr__(self) -> str:
        return "FernetCipher(<key hidden>)"

    def _fernet(self, context: Mapping[str, str]) -> Fernet:
        derived = HKDF(
            algorithm=SHA256(), length=32, salt=None, info=_HKDF_INFO + canonical(context)
        ).derive(self._key)
        return Fernet(base64.urlsafe_b64encode(derived))

    def encrypt(self, plaintext: str, context: Mapping[str, str]) -> str:
        """``"fernet2:"`` and a Fernet token (URL-safe ASCII) of ``plaintext`` for ``context``."""
        token = self._fernet(context).encrypt(plaintext.encode("utf-8")).decode("ascii")
        return FERNET_PREFIX + token

    def decrypt(self, ciphertext: str, context: Mapping[str, str]) -> str:
        """The text of a ``fernet2:`` token; ``SecretUnreadable`` when this key and ``context``
        did not make it, ``LegacySecret`` for a bare (legacy) Fernet token."""
        if not ciphertext.startswith(FERNET_PREFIX):
            if ciphertext.startswith(LEGACY_FERNET_PREFIX):
                raise LegacySecret()
            raise SecretUnreadable("stored secret is not in the fernet2 format")
        token = ciphertext[len(FERNET_PREFIX) :]
        try:
            return self._fernet(context).decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError) as exc:
            raise SecretUnreadable(
                "stored secret cannot be decrypted with this key and context"
            ) from exc


class KmsApi(Protocol):
    """The two calls of boto3's ``kms`` client that this module makes (keyword arguments)."""

    def generate_data_key(self, **kwargs: Any) -> Mapping[str, Any]:
        """KMS ``GenerateDataKey``: ``Plaintext`` and ``CiphertextBlob`` of a new data key."""
        ...

    def decrypt(self, **kwargs: Any) -> Mapping[str, Any]:
        """KMS ``Decrypt``: the ``Plaintext`` of a ``CiphertextBlob``."""
        ...


@lru_cache(maxsize=1)
def kms_client() -> KmsApi:
    """The container's one boto3 KMS client, made at first use (importing boto3 costs about
    0.2 s, so functions that never touch a key never pay it). Region and credentials come from
    the environment (``AWS_REGION`` and the function's role in Lambda). Calls must end well inside
    a function's 10 s: 2 s connect, 3 s read, 2 attempts (standard retry mode).

    botocore logs whole response bodies at DEBUG (``botocore.parsers``), and KMS responses hold
    plaintext data keys, so that logger is held at INFO whatever the application's level.
    """
    # No stubs ship with boto3/botocore; ``unused-ignore`` keeps this quiet if an override lands.
    import boto3  # type: ignore[import-untyped, unused-ignore]
    from botocore.config import Config  # type: ignore[import-untyped, unused-ignore]

    logging.getLogger("botocore.parsers").setLevel(logging.INFO)
    config = Config(
        connect_timeout=2, read_timeout=3, retries={"max_attempts": 2, "mode": "standard"}
    )
    client: KmsApi = boto3.client("kms", config=config)
    return client


class KmsEnvelopeCipher:
    """Envelope encryption under the KMS key ``key_id`` (key id, key ARN or alias); see the
    module docstring for the stored format and the KMS calls.

    ``client`` makes (or returns) the KMS client, called at the first encrypt or decrypt that
    needs KMS: building this object costs nothing, so routes that decrypt nothing never create a
    client. The encryption context of each call (``KeyPlace.context``) goes to KMS as the data
    key's EncryptionContext and into the box's authenticated data.

    Data keys: every ``encrypt`` gets a fresh one from KMS; none is kept for the next encrypt.
    Reason: one data key per secret means a leaked data key opens one API key, not every key
    written by a warm container; random 96-bit nonces stay far below AES-GCM's limit for one key;
    a data key always comes from the KMS key's current material (after a rotation, at once); and
    writes of API keys are rare (a store ``PUT``), so one KMS call each costs nothing that
    matters.

    Decrypted data keys are cached, keyed by the exact encrypted data key and context, at most
    ``cache_entries`` entries (least recently used first out; 256 x 32 bytes) for at most
    ``cache_seconds`` each (5 minutes), so a warm container decrypts a store's key without a KMS
    call. Why this is safe: a data key protects exactly one secret, so holding it is no more than
    holding that one decrypted API key, which the same process already holds while it calls the
    provider; the cache lives only in the memory of a process whose role may call ``Decrypt``;
    a changed ciphertext cannot use it (the key is the exact encrypted data key, and AES-GCM still
    authenticates the nonce, the box and the data key); and the age bound means that disabling the
    KMS key or revoking the role's ``kms:Decrypt`` reaches warm containers within 5 minutes.

    Errors: ``SecretUnreadable`` for a malformed or changed ciphertext, another context or another
    KMS key; ``KeyServiceError`` (a ``SecretUnreadable``) when KMS cannot be reached or refuses.
    """

    def __init__(
        self,
        key_id: str,
        client: Callable[[], KmsApi] = kms_client,
        *,
        cache_entries: int = DATA_KEY_CACHE_ENTRIES,
        cache_seconds: float = DATA_KEY_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not key_id:
            raise ValueError("a KMS key id is required")
        self.key_id = key_id
        self._client = client
        self._cache_entries = cache_entries
        self._cache_seconds = cache_seconds
        self._monotonic = monotonic
        self._data_keys: OrderedDict[tuple[bytes, bytes], tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KmsEnvelopeCipher(key_id={self.key_id!r})"

    def encrypt(self, plaintext: str, context: Mapping[str, str]) -> str:
        """``"kms2:..."`` for ``plaintext`` under ``context``; ``KeyServiceError`` when KMS
        fails."""
        response = self._kms(
            "GenerateDataKey",
            lambda kms: kms.generate_data_key(
                KeyId=self.key_id, KeySpec="AES_256", EncryptionContext=dict(context)
            ),
        )
        edk = bytes(response["CiphertextBlob"])
        data_key = bytes(response["Plaintext"])
        if len(data_key) != DATA_KEY_BYTES or not 0 < len(edk) <= MAX_EDK_BYTES:
            raise KeyServiceError(
                "KMS GenerateDataKey returned an unexpected shape",
                code="UnexpectedResponse",
                retryable=False,
            )
        header = len(edk).to_bytes(2, "big") + edk
        nonce = os.urandom(NONCE_BYTES)
        aad = _aad(header, context)
        sealed = AESGCM(data_key).encrypt(nonce, plaintext.encode("utf-8"), aad)
        return KMS_PREFIX + base64.urlsafe_b64encode(header + nonce + sealed).decode("ascii")

    def decrypt(self, ciphertext: str, context: Mapping[str, str]) -> str:
        """The text sealed by ``encrypt`` under ``context``; ``SecretUnreadable`` (another
        context included) / ``KeyServiceError``; ``LegacySecret`` for a ``kms1:`` one."""
        if ciphertext.startswith(LEGACY_KMS_PREFIX):
            raise LegacySecret()
        header, edk, nonce, sealed = _unpack(ciphertext)
        data_key = self._data_key(edk, context)
        try:
            return AESGCM(data_key).decrypt(nonce, sealed, _aad(header, context)).decode("utf-8")
        except (InvalidTag, UnicodeError) as exc:
            raise SecretUnreadable("stored secret was changed or is not of this key") from exc

    def _data_key(self, edk: bytes, context: Mapping[str, str]) -> bytes:
        now = self._monotonic()
        cached = (edk, canonical(context))
        with self._lock:
            entry = self._data_keys.get(cached)
            if entry is not None and now - entry[0] < self._cache_seconds:
                self._data_keys.move_to_end(cached)
                return entry[1]
        response = self._kms(
            "Decrypt",
            lambda kms: kms.decrypt(
                CiphertextBlob=edk, KeyId=self.key_id, EncryptionContext=dict(context)
            ),
        )
        data_key = bytes(response["Plaintext"])
        if len(data_key) != DATA_KEY_BYTES:
            raise SecretUnreadable("stored secret does not hold a 256-bit data key")
        with self._lock:
            self._data_keys[cached] = (now, data_key)
            self._data_keys.move_to_end(cached)
            while len(self._data_keys) > self._cache_entries:
                self._data_keys.popitem(last=False)
        return data_key

    def _kms(
        self, operation: str, call: Callable[[KmsApi], Mapping[str, Any]]
    ) -> Mapping[str, Any]:
        """Run one KMS call, turning botocore's errors into ours (raised ``from`` botocore's, whose
        messages hold the error code, the operation and the endpoint: nothing secret)."""
        from botocore.exceptions import (  # type: ignore[import-untyped, unused-ignore]
            BotoCoreError,
            ClientError,
            NoRegionError,
        )

        try:
            return call(self._client())
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "Unknown"))
            if operation == "Decrypt" and code in _UNREADABLE_CODES:
                raise SecretUnreadable(
                    f"stored secret cannot be decrypted with this KMS key and context ({code})"
                ) from exc
            raise KeyServiceError(
                f"KMS {operation} failed ({code})", code=code, retryable=code in _RETRYABLE_CODES
            ) from exc
        except NoRegionError as exc:
            raise KeyServiceError(
                "no AWS region configured for KMS (AWS_REGION)",
                code="NoRegionError",
                retryable=False,
            ) from exc
        except BotoCoreError as exc:
            name = type(exc).__name__
            raise KeyServiceError(
                f"KMS {operation} could not be reached ({name})", code=name, retryable=True
            ) from exc


class MultiFormatCipher:
    """Reads both stored formats, writes with one: ``kms2:`` ciphertexts go to ``kms``,
    ``fernet2:`` ones to ``fernet``, legacy ones (``kms1:``, bare Fernet tokens) are
    ``LegacySecret``; ``encrypt`` uses ``kms`` when it is given, else ``fernet``.

    Migration: a store saved before the switch to KMS keeps a ``fernet2:`` token until its key
    is sent again with ``PUT`` (which stores a ``kms2:`` one). The token decrypts as long as its
    Fernet key is configured next to the KMS key. A format whose cipher is not configured is
    ``SecretUnreadable`` (naming what to configure, never the ciphertext). ``ValueError`` when
    neither is given.
    """

    def __init__(
        self, *, kms: KmsEnvelopeCipher | None = None, fernet: FernetCipher | None = None
    ) -> None:
        if kms is None and fernet is None:
            raise ValueError("a KMS key or a Fernet key is required")
        self.kms = kms
        self.fernet = fernet

    def __repr__(self) -> str:
        return f"MultiFormatCipher(kms={self.kms!r}, fernet={self.fernet!r})"

    def encrypt(self, plaintext: str, context: Mapping[str, str]) -> str:
        """With KMS when it is configured, else with the Fernet key."""
        if self.kms is not None:
            return self.kms.encrypt(plaintext, context)
        assert self.fernet is not None
        return self.fernet.encrypt(plaintext, context)

    def decrypt(self, ciphertext: str, context: Mapping[str, str]) -> str:
        """``kms2:`` ciphertexts with KMS, ``fernet2:`` ones with the Fernet key;
        ``SecretUnreadable`` when the key for the format is not configured or does not open it
        under ``context``, ``LegacySecret`` for a legacy format."""
        if ciphertext.startswith((LEGACY_KMS_PREFIX, LEGACY_FERNET_PREFIX)):
            raise LegacySecret()
        if ciphertext.startswith(KMS_PREFIX):
            if self.kms is None:
                raise SecretUnreadable(
                    "stored secret is KMS-encrypted and no KMS key is configured "
                    "(KIVIDB_KMS_KEY_ID)"
                )
            return self.kms.decrypt(ciphertext, context)
        if self.fernet is None:
            raise SecretUnreadable(
                "stored secret is Fernet-encrypted and no Fernet key is configured; "
                "send the API key again with PUT to store it under KMS"
            )
        return self.fernet.decrypt(ciphertext, context)


def _aad(header: bytes, context: Mapping[str, str]) -> bytes:
    return KMS_PREFIX.encode("ascii") + header + canonical(context)


def _unpack(ciphertext: str) -> tuple[bytes, bytes, bytes, bytes]:
    """``(header, edk, nonce, sealed)`` of a ``kms2:`` string; ``SecretUnreadable`` otherwise."""
    if not ciphertext.startswith(KMS_PREFIX):
        raise SecretUnreadable("stored secret is not in the kms2 format")
    try:
        raw = base64.urlsafe_b64decode(ciphertext[len(KMS_PREFIX) :].encode("ascii"))
    except (binascii.Error, UnicodeError, ValueError):
        raise SecretUnreadable("stored secret is not valid kms2 base64") from None
    if len(raw) < 2:
        raise SecretUnreadable("stored secret is truncated")
    edk_len = int.from_bytes(raw[:2], "big")
    if not 0 < edk_len <= MAX_EDK_BYTES or len(raw) < 2 + edk_len + NONCE_BYTES + TAG_BYTES:
        raise SecretUnreadable("stored secret is truncated or malformed")
    header = raw[: 2 + edk_len]
    nonce = raw[2 + edk_len : 2 + edk_len + NONCE_BYTES]
    return header, header[2:], nonce, raw[2 + edk_len + NONCE_BYTES :]


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


def seal(cipher: Cipher, plaintext: str, place: KeyPlace, field: str) -> str:
    """``cipher.encrypt`` of a store's ``field`` (``llm_api_key`` / ``embed_api_key``) kept at
    ``place``, with key-service failures as domain errors: a retryable KMS failure is
    ``KeyServiceUnavailable`` (503), anything else propagates (a misconfiguration)."""
    try:
        return cipher.encrypt(plaintext, place.context(field))
    except KeyServiceError as exc:
        if exc.retryable:
            raise KeyServiceUnavailable(
                "The key service could not encrypt the API key right now; retry in a moment."
            ) from None
        raise


def unseal(cipher: Cipher, ciphertext: str, place: KeyPlace, field: str) -> str:
    """``cipher.decrypt`` of a store's ``field`` (``llm_api_key`` / ``embed_api_key``) as kept
    at ``place``, with failures as domain errors: ``KeyServiceUnavailable`` (503) when KMS may
    answer later, ``StoredKeyUnreadable`` (409, send the key again) when the stored key cannot
    be read: another key, another place (the database now another organization's or
    instance's, the ciphertext copied from another store or field), or a legacy format."""
    try:
        return cipher.decrypt(ciphertext, place.context(field))
    except KeyServiceError as exc:
        if exc.retryable:
            raise KeyServiceUnavailable(
                "The key service could not decrypt the store's API key right now; retry in a "
                "moment."
            ) from None
        raise StoredKeyUnreadable(
            f"The store's {field} can no longer be decrypted (the key service refused: "
            f"{exc.code}); send it again with PUT."
        ) from None
    except LegacySecret:
        raise StoredKeyUnreadable(
            f"The store's {field} was stored by an earlier version, before API keys were bound "
            "to their organization, instance and store, and is not used any more; send it "
            "again with PUT."
        ) from None
    except SecretUnreadable:
        raise StoredKeyUnreadable(
            f"The store's {field} can no longer be decrypted with the configured key here (it "
            "was stored under another key, or for another organization, instance or store); "
            "send it again with PUT."
        ) from None
