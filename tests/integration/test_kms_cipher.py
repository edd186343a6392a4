"""KMS envelope encryption of provider API keys, against moto's KMS (no AWS account needed)."""

import base64
from collections import Counter

import boto3
import pytest
from botocore.exceptions import ClientError
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from moto import mock_aws

from agent_memory.clock import SystemClock
from agent_memory.database.keys import StoreKeys
from agent_memory.edge.runtime import Runtime
from agent_memory.edge.settings import FunctionSettings
from agent_memory.providers.secrets import (
    KMS_PREFIX,
    LEGACY_ENCRYPTION_CONTEXT,
    FernetCipher,
    KeyPlace,
    KeyServiceError,
    KmsEnvelopeCipher,
    LegacySecret,
    MultiFormatCipher,
    SecretUnreadable,
    kms_client,
)
from agent_memory.stores.models import StoreConfig, StorePut
from agent_memory.stores.registry import Stores, key_place
from tests.support.common import unique

API_KEY = "sk-live-SECRET-0123456789abcdef"
PLACE = KeyPlace("org-a", "db-a", "notes", "0123456789ab")
CONTEXT = PLACE.context("llm_api_key")


class CountingKms:
    """A KMS client that counts the calls it passes on."""

    def __init__(self, client):
        self.client = client
        self.calls = Counter()

    def generate_data_key(self, **kwargs):
        self.calls["GenerateDataKey"] += 1
        return self.client.generate_data_key(**kwargs)

    def decrypt(self, **kwargs):
        self.calls["Decrypt"] += 1
        return self.client.decrypt(**kwargs)


class FailingKms:
    """A KMS client whose every call fails with one KMS error code."""

    def __init__(self, code):
        self.code = code

    def generate_data_key(self, **kwargs):
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "GenerateDataKey")

    def decrypt(self, **kwargs):
        raise ClientError({"Error": {"Code": self.code, "Message": "no"}}, "Decrypt")


@pytest.fixture
def kms(monkeypatch, tmp_path):
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "absent-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "absent-credentials"),
    }.items():
        monkeypatch.setenv(name, value)
    kms_client.cache_clear()
    with mock_aws():
        yield CountingKms(boto3.client("kms", region_name="us-east-1"))
    kms_client.cache_clear()


def new_key(kms):
    return kms.client.create_key(KeyUsage="ENCRYPT_DECRYPT", KeySpec="SYMMETRIC_DEFAULT")[
        "KeyMetadata"
    ]["Arn"]


@pytest.fixture
def key_arn(kms):
    return new_key(kms)


@pytest.fixture
def cipher(kms, key_arn):
    return KmsEnvelopeCipher(key_arn, lambda: kms)


def parts(ciphertext):
    """``(encrypted data key, nonce, sealed)`` of a kms2 string, as the module docstring says."""
    raw = base64.urlsafe_b64decode(ciphertext.removeprefix(KMS_PREFIX))
    edk_len = int.from_bytes(raw[:2], "big")
    return raw[2 : 2 + edk_len], raw[2 + edk_len : 14 + edk_len], raw[14 + edk_len :]


def test_round_trip_gives_the_key_back_from_an_ascii_kms2_string(cipher):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    assert ciphertext.startswith(KMS_PREFIX)
    assert ciphertext.isascii()
    assert API_KEY not in ciphertext
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY
    assert cipher.decrypt(cipher.encrypt("ключ-🔑", CONTEXT), CONTEXT) == "ключ-🔑"


def test_every_encryption_gets_a_fresh_data_key_and_nonce(cipher, kms):
    first, second = cipher.encrypt(API_KEY, CONTEXT), cipher.encrypt(API_KEY, CONTEXT)
    assert first != second
    (edk1, nonce1, _), (edk2, nonce2, _) = parts(first), parts(second)
    assert edk1 != edk2
    assert nonce1 != nonce2 and len(nonce1) == 12
    assert kms.calls["GenerateDataKey"] == 2
    assert cipher.decrypt(first, CONTEXT) == cipher.decrypt(second, CONTEXT) == API_KEY


@pytest.mark.parametrize("where", ["sealed", "nonce", "data key", "length"])
def test_a_changed_ciphertext_is_unreadable(cipher, where):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    cipher.decrypt(ciphertext, CONTEXT)  # the data key is now cached: it must not help a forgery
    raw = bytearray(base64.urlsafe_b64decode(ciphertext.removeprefix(KMS_PREFIX)))
    edk_len = int.from_bytes(raw[:2], "big")
    position = {"sealed": len(raw) - 1, "nonce": 2 + edk_len, "data key": 2 + edk_len // 2}
    if where == "length":
        raw[0:2] = (edk_len - 1).to_bytes(2, "big")
    else:
        raw[position[where]] ^= 0x01
    forged = KMS_PREFIX + base64.urlsafe_b64encode(bytes(raw)).decode("ascii")
    with pytest.raises(SecretUnreadable) as error:
        cipher.decrypt(forged, CONTEXT)
    assert API_KEY not in str(error.value)


@pytest.mark.parametrize(
    "text", ["kms2:", "kms2:@@@not-base64@@@", "kms2:AAE=", "gAAAAAfernet", "kms1:AAE="]
)
def test_malformed_ciphertexts_are_unreadable(cipher, text):
    with pytest.raises(SecretUnreadable):
        cipher.decrypt(text, CONTEXT)


ELSEWHERE = {
    "another organization": KeyPlace("org-b", "db-a", "notes", "0123456789ab").context(
        "llm_api_key"
    ),
    "another instance": KeyPlace("org-a", "db-b", "notes", "0123456789ab").context("llm_api_key"),
    "another store": KeyPlace("org-a", "db-a", "tasks", "0123456789ab").context("llm_api_key"),
    "another incarnation": KeyPlace("org-a", "db-a", "notes", "ba9876543210").context(
        "llm_api_key"
    ),
    "the other key": PLACE.context("embed_api_key"),
}


@pytest.mark.parametrize("where", sorted(ELSEWHERE))
def test_a_key_read_anywhere_else_is_unreadable_even_with_its_data_key_cached(cipher, kms, where):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    with pytest.raises(SecretUnreadable):
        KmsEnvelopeCipher(cipher.key_id, lambda: kms).decrypt(ciphertext, ELSEWHERE[where])
    assert kms.calls["Decrypt"] == 1, "the refusal came from KMS"
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY  # its data key is cached now
    with pytest.raises(SecretUnreadable):
        cipher.decrypt(ciphertext, ELSEWHERE[where])


def test_the_context_goes_to_kms_with_its_purpose(cipher, kms):
    seen = []
    generate = kms.generate_data_key
    kms.generate_data_key = lambda **kwargs: (
        seen.append(kwargs["EncryptionContext"]) or generate(**kwargs)
    )
    cipher.encrypt(API_KEY, CONTEXT)
    assert seen == [
        {
            "purpose": "kividb-provider-api-key",
            "org": "org-a",
            "instance": "db-a",
            "store": "notes",
            "incarnation": "0123456789ab",
            "key": "llm_api_key",
        }
    ]


def test_a_legacy_kms1_key_is_never_read(kms, key_arn):
    """A key stored before the binding (kms1, under the one legacy context) stays unreadable
    even under that context: nothing says where it was stored."""
    data_key = kms.client.generate_data_key(
        KeyId=key_arn, KeySpec="AES_256", EncryptionContext=dict(LEGACY_ENCRYPTION_CONTEXT)
    )
    header = len(data_key["CiphertextBlob"]).to_bytes(2, "big") + data_key["CiphertextBlob"]
    nonce = b"\x00" * 12
    sealed = AESGCM(data_key["Plaintext"]).encrypt(nonce, API_KEY.encode(), b"kms1:" + header)
    legacy = "kms1:" + base64.urlsafe_b64encode(header + nonce + sealed).decode()
    cipher = KmsEnvelopeCipher(key_arn, lambda: kms)
    for context in (CONTEXT, LEGACY_ENCRYPTION_CONTEXT):
        with pytest.raises(LegacySecret):
            cipher.decrypt(legacy, context)
        with pytest.raises(LegacySecret):
            MultiFormatCipher(kms=cipher).decrypt(legacy, context)
    assert kms.calls["Decrypt"] == 0


def test_another_kms_key_cannot_read_it(cipher, kms):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    other = KmsEnvelopeCipher(new_key(kms), lambda: kms)
    with pytest.raises(SecretUnreadable) as error:
        other.decrypt(ciphertext, CONTEXT)
    # Real KMS answers IncorrectKeyException (plain SecretUnreadable); moto answers
    # AccessDeniedException (a KeyServiceError that is not worth retrying).
    assert getattr(error.value, "retryable", False) is False
    assert other.decrypt(other.encrypt(API_KEY, CONTEXT), CONTEXT) == API_KEY


def test_a_warm_cipher_decrypts_again_without_calling_kms(cipher, kms, key_arn):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY
    assert kms.calls["Decrypt"] == 1
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY
    assert kms.calls["Decrypt"] == 1
    cold = KmsEnvelopeCipher(key_arn, lambda: kms)
    assert cold.decrypt(ciphertext, CONTEXT) == API_KEY
    assert kms.calls["Decrypt"] == 2


def test_the_data_key_cache_is_bounded_in_entries_and_age(kms, key_arn):
    now = [1000.0]
    cipher = KmsEnvelopeCipher(
        key_arn, lambda: kms, cache_entries=2, cache_seconds=60, monotonic=lambda: now[0]
    )
    a, b, c = (cipher.encrypt(f"key-{n}", CONTEXT) for n in range(3))
    for ciphertext in (a, b, c):  # c pushes a out
        cipher.decrypt(ciphertext, CONTEXT)
    assert kms.calls["Decrypt"] == 3
    cipher.decrypt(c, CONTEXT)
    cipher.decrypt(b, CONTEXT)
    assert kms.calls["Decrypt"] == 3
    cipher.decrypt(a, CONTEXT)
    assert kms.calls["Decrypt"] == 4
    now[0] += 61
    cipher.decrypt(a, CONTEXT)
    assert kms.calls["Decrypt"] == 5


def test_encrypt_never_reuses_a_data_key_even_when_one_is_cached(cipher, kms):
    cipher.decrypt(cipher.encrypt(API_KEY, CONTEXT), CONTEXT)
    cipher.encrypt(API_KEY, CONTEXT)
    assert kms.calls["GenerateDataKey"] == 2


def test_fernet_ciphertexts_still_decrypt_through_the_combined_cipher(cipher):
    fernet = FernetCipher(Fernet.generate_key())
    before_kms = fernet.encrypt(API_KEY, CONTEXT)
    both = MultiFormatCipher(kms=cipher, fernet=fernet)
    assert both.decrypt(before_kms, CONTEXT) == API_KEY
    fresh = both.encrypt(API_KEY, CONTEXT)
    assert fresh.startswith(KMS_PREFIX)
    assert both.decrypt(fresh, CONTEXT) == API_KEY
    with pytest.raises(SecretUnreadable, match="KIVIDB_KMS_KEY_ID"):
        MultiFormatCipher(fernet=fernet).decrypt(fresh, CONTEXT)
    with pytest.raises(SecretUnreadable, match="PUT"):
        MultiFormatCipher(kms=cipher).decrypt(before_kms, CONTEXT)
    another = MultiFormatCipher(kms=cipher, fernet=FernetCipher(Fernet.generate_key()))
    with pytest.raises(SecretUnreadable):
        another.decrypt(before_kms, CONTEXT)
    legacy = Fernet(b"x" * 43 + b"=").encrypt(API_KEY.encode()).decode()  # a bare token
    with pytest.raises(LegacySecret):
        both.decrypt(legacy, CONTEXT)


def test_kms_failures_say_whether_a_retry_can_help(key_arn):
    throttled = KmsEnvelopeCipher(key_arn, lambda: FailingKms("ThrottlingException"))
    with pytest.raises(KeyServiceError) as error:
        throttled.encrypt(API_KEY, CONTEXT)
    assert error.value.retryable and error.value.code == "ThrottlingException"
    denied = KmsEnvelopeCipher(key_arn, lambda: FailingKms("AccessDeniedException"))
    with pytest.raises(KeyServiceError) as error:
        denied.decrypt(
            KMS_PREFIX + base64.urlsafe_b64encode(b"\x00\x01x" + b"n" * 40).decode(), CONTEXT
        )
    assert not error.value.retryable
    assert isinstance(error.value, SecretUnreadable)


def test_no_key_material_in_reprs(cipher):
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    cipher.decrypt(ciphertext, CONTEXT)
    fernet_key = Fernet.generate_key()
    both = MultiFormatCipher(kms=cipher, fernet=FernetCipher(fernet_key))
    text = repr(both)
    assert API_KEY not in text and fernet_key.decode() not in text
    (data_key,) = [entry[1] for entry in cipher._data_keys.values()]
    assert data_key.hex() not in text and repr(data_key) not in text


def test_a_store_put_keeps_only_a_kms2_ciphertext_bound_to_the_store(client, cipher):
    stores = Stores(client, "db", MultiFormatCipher(kms=cipher), SystemClock(), org_id="org-a")
    name = unique("s")
    stores.put(
        name,
        StorePut(
            llm_provider="openai",
            llm_model="gpt-4o-mini",
            llm_api_key=API_KEY,
            embed_provider="openai",
            embed_model="text-embedding-3-small",
            dimensions=1536,
            embed_api_key=API_KEY + "-embed",
        ),
    )
    raw = client.hget(StoreKeys.registry, name)
    assert API_KEY not in raw
    stored = StoreConfig.model_validate_json(raw, context={"stored": True})
    assert stored.llm_api_key_ciphertext.startswith(KMS_PREFIX)
    assert stored.embed_api_key_ciphertext.startswith(KMS_PREFIX)
    place = key_place("org-a", "db", stored)
    assert place == KeyPlace("org-a", "db", name, stored.incarnation)
    assert cipher.decrypt(stored.llm_api_key_ciphertext, place.context("llm_api_key")) == API_KEY
    embed = stores.get(name).embed_api_key_ciphertext
    assert cipher.decrypt(embed, place.context("embed_api_key")) == API_KEY + "-embed"
    with pytest.raises(SecretUnreadable):
        cipher.decrypt(embed, place.context("llm_api_key"))
    stores.delete(name)


def test_runtime_uses_kms_when_a_key_id_is_set_and_makes_no_client_until_needed(
    kms, key_arn, redis_url, tmp_path
):
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(Fernet.generate_key())
    before_kms = FernetCipher(key_file.read_bytes()).encrypt(API_KEY, CONTEXT)
    settings = FunctionSettings.from_environ(
        {
            "KIVIDB_CONTROL_URL": redis_url,
            "KIVIDB_KMS_KEY_ID": key_arn,
            "KIVIDB_SECRET_KEY_FILE": str(key_file),
        }
    )
    runtime = Runtime(settings)
    cipher = runtime.cipher
    assert kms_client.cache_info().currsize == 0, "building the cipher made a KMS client"
    ciphertext = cipher.encrypt(API_KEY, CONTEXT)
    assert ciphertext.startswith(KMS_PREFIX)
    assert cipher.decrypt(ciphertext, CONTEXT) == API_KEY
    assert cipher.decrypt(before_kms, CONTEXT) == API_KEY
    local = Runtime(
        FunctionSettings.from_environ(
            {"KIVIDB_CONTROL_URL": redis_url, "KIVIDB_SECRET_KEY_FILE": str(key_file)}
        )
    )
    assert not local.cipher.encrypt(API_KEY, CONTEXT).startswith(KMS_PREFIX)
