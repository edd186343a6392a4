"""The stand-in's SigV4 check (``tools.sigv4_check``) against AWS's own published examples
(the "get-vanilla" and "post-vanilla" cases of the AWS Signature Version 4 test suite, signed by
``AKIDEXAMPLE`` on 2015-08-30 for ``us-east-1`` and the service ``service``), so a stand-in that
accepts our requests accepts what AWS accepts, and refuses each kind of tampering."""

from datetime import UTC, datetime, timedelta

import pytest

from tools.sigv4_check import AwsCredentials, canonical_uri, check_signature

EXAMPLE = AwsCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SIGNED_AT = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)
VANILLA = {
    "GET": "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
    "POST": "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
}


def headers(signature: str, **changes: str) -> dict[str, str]:
    base = {
        "host": "example.amazonaws.com",
        "x-amz-date": "20150830T123600Z",
        "authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
        f"aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}",
    }
    return base | changes


def check(method="GET", target="/", body=b"", now=SIGNED_AT, **changes):
    return check_signature(
        method,
        target,
        headers(VANILLA["GET" if method == "GET" else "POST"], **changes),
        body,
        EXAMPLE,
        region="us-east-1",
        service="service",
        now=now,
    )


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_awss_own_examples_pass(method):
    assert check(method) is None


@pytest.mark.parametrize(
    ("change", "error_type"),
    [
        ({"body": b"{}"}, "InvalidSignatureException"),
        ({"target": "/other"}, "InvalidSignatureException"),
        ({"target": "/?a=1"}, "InvalidSignatureException"),
        ({"host": "evil.example.com"}, "InvalidSignatureException"),
        ({"now": SIGNED_AT + timedelta(minutes=16)}, "InvalidSignatureException"),
        ({"authorization": ""}, "MissingAuthenticationTokenException"),
        ({"authorization": "Bearer abc"}, "IncompleteSignatureException"),
    ],
)
def test_any_tampering_is_refused_as_aws_refuses_it(change, error_type):
    refusal = check(**change)
    assert refusal is not None and refusal.error_type == error_type


def test_another_key_or_a_missing_session_token_is_an_unrecognized_client():
    other = AwsCredentials("AKIDOTHER", EXAMPLE.secret_key)
    refusal = check_signature(
        "GET",
        "/",
        headers(VANILLA["GET"]),
        b"",
        other,
        region="us-east-1",
        service="service",
        now=SIGNED_AT,
    )
    assert refusal is not None and refusal.error_type == "UnrecognizedClientException"
    with_token = AwsCredentials(EXAMPLE.access_key, EXAMPLE.secret_key, "token")
    refusal = check_signature(
        "GET",
        "/",
        headers(VANILLA["GET"]),
        b"",
        with_token,
        region="us-east-1",
        service="service",
        now=SIGNED_AT,
    )
    assert refusal is not None and refusal.error_type == "UnrecognizedClientException"


def test_a_signature_for_another_region_or_service_is_refused():
    for region, service in (("eu-west-1", "service"), ("us-east-1", "bedrock")):
        refusal = check_signature(
            "GET",
            "/",
            headers(VANILLA["GET"]),
            b"",
            EXAMPLE,
            region=region,
            service=service,
            now=SIGNED_AT,
        )
        assert refusal is not None and refusal.error_type == "InvalidSignatureException"


def test_the_canonical_path_encodes_each_segment_once_more():
    assert canonical_uri("/model/amazon.titan-embed-text-v2%3A0/invoke") == (
        "/model/amazon.titan-embed-text-v2%253A0/invoke"
    )
