"""Checks AWS Signature Version 4 on a received request, as an AWS service does: the loopback
Bedrock stand-in (``tools.bedrock_standin``) refuses what Bedrock would refuse.

Written from the AWS documentation ("Create a signed AWS API request", AWS Identity and Access
Management User Guide, https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html),
not with botocore, so that a signing mistake in ``agent_memory.providers.bedrock`` (which signs
with botocore) is not mirrored here:

1. canonical request = method, canonical URI (each path segment URI-encoded once more, as every
   service but S3 wants: ``%3A`` becomes ``%253A``), canonical query string, the signed headers
   as ``name:value`` lines (lower-case names, values trimmed and inner spaces folded), the
   signed header names, the hex SHA-256 of the body;
2. string to sign = ``AWS4-HMAC-SHA256``, ``X-Amz-Date``, the scope
   ``date/region/service/aws4_request``, the hex SHA-256 of the canonical request;
3. signing key = HMAC-SHA256 chain of ``"AWS4" + secret``, date, region, service,
   ``aws4_request``; signature = hex HMAC-SHA256 of the string to sign under it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, unquote

ALGORITHM = "AWS4-HMAC-SHA256"
CLOCK_SKEW = timedelta(minutes=15)
"""How far ``X-Amz-Date`` may be from the server's clock (AWS answers ``SignatureDoesNotMatch``
/ "Signature expired" beyond it)."""
_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/"
    r"(?P<service>[a-z0-9-]+)/aws4_request, ?SignedHeaders=(?P<headers>[a-z0-9;-]+), ?"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class AwsCredentials:
    """The credentials a stand-in expects requests to be signed with."""

    access_key: str
    secret_key: str
    session_token: str | None = None


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused: AWS's error type (``x-amzn-ErrorType``) and a message."""

    error_type: str
    message: str


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def canonical_uri(raw_path: str) -> str:
    """The path as received, each segment encoded once more (unreserved characters and ``/``
    kept): ``/model/a%3A0/converse`` -> ``/model/a%253A0/converse``."""
    return quote(raw_path, safe="/-_.~") or "/"


def canonical_query(raw_query: str) -> str:
    """The query's parameters sorted by name, each name and value encoded (RFC 3986)."""
    if not raw_query:
        return ""
    pairs = []
    for part in raw_query.split("&"):
        name, _, value = part.partition("=")
        pairs.append((quote(unquote(name), safe="-_.~"), quote(unquote(value), safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def check_signature(
    method: str,
    raw_target: str,
    headers: Mapping[str, str],
    body: bytes,
    expected: AwsCredentials,
    *,
    region: str,
    service: str = "bedrock",
    now: datetime | None = None,
) -> Refusal | None:
    """None when the request is signed by ``expected`` for ``region`` and ``service``, within
    ``CLOCK_SKEW`` of ``now``, over every header it names and the body; else the ``Refusal``
    an AWS service answers (``MissingAuthenticationTokenException``,
    ``UnrecognizedClientException``, ``InvalidSignatureException``). ``headers`` has lower-case
    names; ``raw_target`` is the request line's path and query as received."""
    authorization = headers.get("authorization")
    if not authorization:
        return Refusal("MissingAuthenticationTokenException", "Missing Authentication Token")
    parts = _AUTHORIZATION.match(authorization)
    if parts is None:
        return Refusal("IncompleteSignatureException", "The Authorization header is malformed.")
    if parts["key"] != expected.access_key:
        return Refusal("UnrecognizedClientException", "The security token included is invalid.")
    if expected.session_token is not None and (
        headers.get("x-amz-security-token") != expected.session_token
    ):
        return Refusal("UnrecognizedClientException", "The security token included is invalid.")
    if parts["region"] != region or parts["service"] != service:
        return Refusal(
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region and to the service '{service}'.",
        )
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return Refusal("IncompleteSignatureException", "X-Amz-Date is missing or malformed.")
    if amz_date[:8] != parts["date"]:
        return Refusal("InvalidSignatureException", "The credential date is not X-Amz-Date's.")
    if abs((now or datetime.now(UTC)) - signed_at) > CLOCK_SKEW:
        return Refusal("InvalidSignatureException", "Signature expired.")
    names = parts["headers"].split(";")
    if "host" not in names or any(name not in headers for name in names):
        return Refusal("InvalidSignatureException", "A signed header is missing.")
    path, _, query = raw_target.partition("?")
    canonical = "\n".join(
        [
            method,
            canonical_uri(path),
            canonical_query(query),
            "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names),
            parts["headers"],
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{parts['date']}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()]
    )
    key = _hmac(("AWS4" + expected.secret_key).encode("utf-8"), parts["date"])
    for step in (region, service, "aws4_request"):
        key = _hmac(key, step)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(signature, parts["signature"]):
        return Refusal(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided.",
        )
    return None
