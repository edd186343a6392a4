"""Redaction of personal identifiers: every case states its input and the exact output.

Phone numbers in the cases come from ranges reserved for fiction where one is valid: 555-01xx
in the US, the Ofcom drama range 020 7946 0xxx in the UK, ARCEP's 01 99 00 xx xx in France,
030 23125 xxx in Berlin (+81 3-1234-5678 is the usual Japanese example).
``test_phone_fixtures_are_valid_numbers`` checks with libphonenumber itself that each one is a
valid number, so a positive case never passes by accident.
"""

import dataclasses

import phonenumbers
import pytest
from phonenumbers import Leniency, PhoneNumberMatcher

import agent_memory.memories.redaction as redaction_module
from agent_memory.memories.redaction import KINDS, MARKERS, Redaction, redact

E, P, C, S, IP = "[email]", "[phone]", "[card]", "[ssn]", "[ip]"

# (input, expected text, expected counts)
EMAILS = [
    ("Mail john.doe@example.com today", f"Mail {E} today", {"email": 1}),
    ("jane+news@mail.example.org", E, {"email": 1}),
    ("ops@eu.west.corp.example.co.uk", E, {"email": 1}),
    ("user@bücher.de", E, {"email": 1}),
    ("info@例子.中国", E, {"email": 1}),
    ("a@xn--bcher-kva.xn--p1ai", E, {"email": 1}),
    ("agent007@example.com", E, {"email": 1}),
    ("415-555-0123@example.com", E, {"email": 1}),
    ("Ann <ann@example.com>", f"Ann <{E}>", {"email": 1}),
    ("'user@example.com'", f"'{E}'", {"email": 1}),
    ("Write to bob@example.com.", f"Write to {E}.", {"email": 1}),
    ("mailto:bob@example.com", f"mailto:{E}", {"email": 1}),
    ("o'brien@example.ie", E, {"email": 1}),
    ("reply-to=bob@example.com", f"reply-to={E}", {"email": 1}),
    ("请联系bob@example.com谢谢", f"请联系{E}谢谢", {"email": 1}),
    ("a@b", "a@b", {}),
    ("@handle thanks", "@handle thanks", {}),
    ("thanks @dev_team and @ops", "thanks @dev_team and @ops", {}),
    ("[email] was already redacted", "[email] was already redacted", {}),
    ("user@localhost", "user@localhost", {}),
    ("foo@bar.c", "foo@bar.c", {}),
    ("at @example.com only", "at @example.com only", {}),
]

PHONES = [
    ("+44 20 7946 0958", P, {"phone": 1}),
    ("Call (415) 555-0123 now", f"Call {P} now", {"phone": 1}),
    ("415-555-0199", P, {"phone": 1}),
    ("415.555.0142", P, {"phone": 1}),
    ("415-555-0123 ext. 123", P, {"phone": 1}),
    ("415-555-0123 x123", P, {"phone": 1}),
    ("tel:+1-415-555-0123;ext=123", f"tel:{P}", {"phone": 1}),
    ("+1 415 555 0123", P, {"phone": 1}),
    ("+14155550123", P, {"phone": 1}),
    ("1-800-555-0199", P, {"phone": 1}),
    ("+33 1 99 00 12 34", P, {"phone": 1}),
    ("电话：415-555-0123。", f"电话：{P}。", {"phone": 1}),
    ("4155550123", "4155550123", {}),
    ("call 4155550123 x12", "call 4155550123 x12", {}),
    ("555-0100", "555-0100", {}),
    ("2023-05-08", "2023-05-08", {}),
    ("on 2023-05-08 at 12:30", "on 2023-05-08 at 12:30", {}),
    ("12:30:45", "12:30:45", {}),
    ("2.415-555-0123", "2.415-555-0123", {}),
    ("415-555-0123.5", "415-555-0123.5", {}),
    ("（415）５５５-０１２３", "（415）５５５-０１２３", {}),
    ("1-800-FLOWERS", "1-800-FLOWERS", {}),
]

CARDS = [
    ("4111 1111 1111 1111", C, {"card": 1}),
    ("4111-1111-1111-1111", C, {"card": 1}),
    ("4111111111111111", "4111111111111111", {}),  # a digit run without separators stays
    ("Amex 3782 822463 10005", f"Amex {C}", {"card": 1}),
    ("378282246310005", "378282246310005", {}),
    ("Diners 3056-930902-5904", f"Diners {C}", {"card": 1}),
    ("5555 5555 5555 4444", C, {"card": 1}),
    ("4222222222222", "4222222222222", {}),
    ("4111 1111 1111 1111 003", C, {"card": 1}),
    ("card 4111 1111 1111 1111 exp 12/25", f"card {C} exp 12/25", {"card": 1}),
    ("4111 1111 1111 1111 5555 5555 5555 4444", f"{C} {C}", {"card": 2}),
    ("ref 1234 4012 8888 8888 1881", f"ref 1234 {C}", {"card": 1}),
    ("4111 1111 1111 1112", "4111 1111 1111 1112", {}),
    ("4111111111111112", "4111111111111112", {}),
    ("4111-1111 1111-1111", "4111-1111 1111-1111", {}),
    ("4111  1111  1111  1111", "4111  1111  1111  1111", {}),
    ("4111 1111 1111", "4111 1111 1111", {}),
    ("4111-1111-1111-1111-2222", "4111-1111-1111-1111-2222", {}),
    ("ORD-4111111111111111", "ORD-4111111111111111", {}),
    ("+4111111111111111", "+4111111111111111", {}),
]

SSNS = [
    ("SSN 123-45-6789", f"SSN {S}", {"ssn": 1}),
    ("123 45 6789", S, {"ssn": 1}),
    ("078-05-1120.", f"{S}.", {"ssn": 1}),
    ("000-12-3456", "000-12-3456", {}),
    ("666-12-3456", "666-12-3456", {}),
    ("900-12-3456", "900-12-3456", {}),
    ("999-12-3456", "999-12-3456", {}),
    ("123-00-4567", "123-00-4567", {}),
    ("123-45-0000", "123-45-0000", {}),
    ("123456789", "123456789", {}),
    ("123-45-6789-0", "123-45-6789-0", {}),
    ("123-45 6789", "123-45 6789", {}),
]

IPS = [
    ("10.0.0.1", IP, {"ip": 1}),
    ("Server 192.168.1.1.", f"Server {IP}.", {"ip": 1}),
    ("10.0.0.1:8080", f"{IP}:8080", {"ip": 1}),
    ("255.255.255.255 and 0.0.0.0", f"{IP} and {IP}", {"ip": 2}),
    ("http://192.168.0.10/admin", f"http://{IP}/admin", {"ip": 1}),
    ("1.2.3.4.5", "1.2.3.4.5", {}),
    ("999.1.1.1", "999.1.1.1", {}),
    ("256.1.1.1", "256.1.1.1", {}),
    ("01.02.03.04", "01.02.03.04", {}),
    ("v1.2.3.4", "v1.2.3.4", {}),
    ("2001:db8::1", IP, {"ip": 1}),
    ("::1", IP, {"ip": 1}),
    ("ping fe80::1%eth0 now", f"ping {IP} now", {"ip": 1}),
    ("::ffff:192.0.2.1", IP, {"ip": 1}),
    ("2001:0db8:0000:0000:0000:ff00:0042:8329", IP, {"ip": 1}),
    ("2001:DB8:0:0:8:800:200C:417A", IP, {"ip": 1}),
    ("FF01::101", IP, {"ip": 1}),
    ("http://[2001:db8::1]:8080/x", f"http://{IP}:8080/x", {"ip": 1}),
    ("std::vector", "std::vector", {}),
    ("a::b", "a::b", {}),
    ("::", "::", {}),
    ("Foo::Bar::baz", "Foo::Bar::baz", {}),
    ("12:30", "12:30", {}),
    ("dead::beef", "dead::beef", {}),
    ("00:1a:2b:3c:4d:5e", "00:1a:2b:3c:4d:5e", {}),
    ("2001:db8:::1", "2001:db8:::1", {}),
    ("1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7:8:9", {}),
]

# The negative examples the product issue lists, verbatim.
NOT_IDENTIFIERS = [
    ("1.2.3", "1.2.3", {}),
    ("v2.10.4", "v2.10.4", {}),
    ("1.3.6.1.4.1.311", "1.3.6.1.4.1.311", {}),
    ("ORD-2291", "ORD-2291", {}),
    ("#12345", "#12345", {}),
    ("978-3-16-148410-0", "978-3-16-148410-0", {}),
    ("ISBN 0-306-40615-2", "ISBN 0-306-40615-2", {}),
    ("48.8566, 2.3522", "48.8566, 2.3522", {}),
    ("40.7128° N", "40.7128° N", {}),
    (
        "use std::vector, a::b, :: and Foo::Bar::baz",
        "use std::vector, a::b, :: and Foo::Bar::baz",
        {},
    ),
    ("order 20230508 shipped", "order 20230508 shipped", {}),
    ("on 2023-05-08 12:30:45.123", "on 2023-05-08 12:30:45.123", {}),
]

MIXED = [
    (
        "Reach jane.doe@example.com or (415) 555-0123; card 4111 1111 1111 1111, "
        "SSN 123-45-6789, from 10.0.0.1 and 2001:db8::1.",
        f"Reach {E} or {P}; card {C}, SSN {S}, from {IP} and {IP}.",
        {"email": 1, "phone": 1, "card": 1, "ssn": 1, "ip": 2},
    ),
    (
        "Server 10.0.0.1 got v2.10.4 on 2023-05-08 at 12:30 (ORD-2291, #12345).",
        f"Server {IP} got v2.10.4 on 2023-05-08 at 12:30 (ORD-2291, #12345).",
        {"ip": 1},
    ),
    (
        "Café ☕ — 東京 office +81 3-1234-5678 🙂, mail hanako@example.jp, naïve résumé",
        f"Café ☕ — 東京 office {P} 🙂, mail {E}, naïve résumé",
        {"phone": 1, "email": 1},
    ),
    ("Crème brûlée 🍮 naïve résumé 東京", "Crème brûlée 🍮 naïve résumé 東京", {}),
    (
        "Two numbers: +44 20 7946 0958 and 415-555-0199 ext. 7, one 4155550123.",
        f"Two numbers: {P} and {P}, one 4155550123.",
        {"phone": 2},
    ),
    (
        "POST http://[2001:db8::8a2e:370:7334]:443/v1 from 198.51.100.7:51234 by ops@example.net",
        f"POST http://{IP}:443/v1 from {IP}:51234 by {E}",
        {"ip": 2, "email": 1},
    ),
    ("[email] [phone] [card] [ssn] [ip]", "[email] [phone] [card] [ssn] [ip]", {}),
    ("", "", {}),
    # Glued to a neighbour that is itself an identifier: both go (the passes repeat).
    ("+44 20 7946 0958-10.0.0.1", f"{P}-{IP}", {"phone": 1, "ip": 1}),
    ("123-45-6789-10.0.0.1", f"{S}-{IP}", {"ssn": 1, "ip": 1}),
    ("Call 415-555-0123, 415-555-0199.", f"Call {P}, {P}.", {"phone": 2}),
    ("at 12:30:45 call 415-555-0123", f"at 12:30:45 call {P}", {"phone": 1}),
    ("2023-05-08T12:30:45Z 10.0.0.1", f"2023-05-08T12:30:45Z {IP}", {"ip": 1}),
    ("📞415-555-0123📞", f"📞{P}📞", {"phone": 1}),
    ("line one\n10.0.0.1\r\nline three", f"line one\n{IP}\r\nline three", {"ip": 1}),
    ("GET http://[::1]/health", f"GET http://{IP}/health", {"ip": 1}),
    ("0:0:0:0:0:ffff:192.0.2.1", IP, {"ip": 1}),
    ("1/2/" * 50, "1/2/" * 50, {}),
]

ALL_CASES = EMAILS + PHONES + CARDS + SSNS + IPS + NOT_IDENTIFIERS + MIXED


def _param(case: tuple[str, str, dict[str, int]]):
    return pytest.param(*case, id=case[0][:40] or "empty")


@pytest.mark.parametrize(("text", "expected", "counts"), [_param(c) for c in ALL_CASES])
def test_redact(text, expected, counts):
    result = redact(text)
    assert result.text == expected
    assert result.counts == counts


# Cases that depend on the default region: (input, region, expected text, expected counts).
REGION_CASES = [
    ("020 7946 0958", "GB", P, {"phone": 1}),
    ("020 7946 0958", "US", "020 7946 0958", {}),
    ("(415) 555-0123", None, "(415) 555-0123", {}),
    ("+1 415 555 0123", None, P, {"phone": 1}),
    ("+44 20 7946 0958", None, P, {"phone": 1}),
    # Dates that libphonenumber alone reads as numbers of these regions (see below).
    ("08.05.2023", "DE", "08.05.2023", {}),
    ("on 08.05.2023 16:30", "DE", "on 08.05.2023 16:30", {}),
    ("08 05 2023", "IT", "08 05 2023", {}),
    ("05-08-2023", "IT", "05-08-2023", {}),
    ("08-05-2023 12:30", "FR", "08-05-2023 12:30", {}),
    ("030 23125 123 on 08.05.2023", "DE", f"{P} on 08.05.2023", {"phone": 1}),
]


@pytest.mark.parametrize(
    ("text", "region", "expected", "counts"),
    [pytest.param(*c, id=f"{c[1]}:{c[0]}") for c in REGION_CASES],
)
def test_redact_with_region(text, region, expected, counts):
    result = redact(text, default_region=region)
    assert result.text == expected
    assert result.counts == counts


@pytest.mark.parametrize(
    ("text", "region"),
    [("08.05.2023", "DE"), ("08 05 2023", "IT"), ("08-05-2023 12:30", "FR")],
)
def test_the_date_guard_is_needed(text, region):
    """libphonenumber on its own takes these dates for phone numbers; only the date guard
    keeps them (the region cases above expect them unchanged)."""
    assert list(PhoneNumberMatcher(text, region, leniency=Leniency.VALID))


@pytest.mark.parametrize(
    ("number", "region"),
    [
        ("(415) 555-0123", "US"),
        ("415-555-0199", "US"),
        ("415.555.0142", "US"),
        ("1-800-555-0199", "US"),
        ("+1 415 555 0123", None),
        ("+44 20 7946 0958", None),
        ("020 7946 0958", "GB"),
        ("+33 1 99 00 12 34", None),
        ("+81 3-1234-5678", None),
        ("030 23125 123", "DE"),
    ],
)
def test_phone_fixtures_are_valid_numbers(number, region):
    assert phonenumbers.is_valid_number(phonenumbers.parse(number, region))


@pytest.mark.parametrize("text", [c[0] for c in ALL_CASES] + [c[0] for c in REGION_CASES])
def test_redaction_is_idempotent(text):
    once = redact(text)
    twice = redact(once.text)
    assert twice.text == once.text
    assert twice.counts == {}


def test_counts_list_only_kinds_found_in_a_fixed_order():
    result = redact("+1 415 555 0123, 10.0.0.1, a@example.com, ::1, 123-45-6789")
    assert result.counts == {"email": 1, "phone": 1, "ssn": 1, "ip": 2}
    assert list(result.counts) == ["email", "phone", "ssn", "ip"]
    assert all(n > 0 for n in result.counts.values())


def test_markers_and_kinds():
    assert KINDS == ("email", "phone", "card", "ssn", "ip")
    assert {k: f"[{k}]" for k in KINDS} == MARKERS


def test_the_result_is_frozen():
    result = redact("a@example.com")
    assert result == Redaction(E, {"email": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.text = "x"  # type: ignore[misc]


def test_unknown_region_is_refused():
    with pytest.raises(ValueError, match="unknown phone region"):
        redact("415-555-0123", default_region="XX")


def test_text_without_digit_or_at_sign_takes_the_fast_path(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("a detector ran on text with no digit and no @")

    monkeypatch.setattr(redaction_module, "PhoneNumberMatcher", boom)
    monkeypatch.setattr(redaction_module, "_cards", boom)
    monkeypatch.setattr(redaction_module, "_ips", boom)
    monkeypatch.setattr(redaction_module, "_emails", boom)
    text = "Ünïcödé ☕ 東京 std::vector a::b Foo::Bar ９９９ full-width digits only " * 20
    assert redact(text) == Redaction(text, {})


def test_surrounding_unicode_is_kept_byte_for_byte():
    prefix, suffix = "🙂 naïve 東京 – «", "» 😀\u200d👍 ok"
    result = redact(f"{prefix}415-555-0123{suffix}")
    assert result.text == f"{prefix}{P}{suffix}"


def test_longest_span_wins_over_a_shorter_overlapping_one():
    # The email contains a phone number and an IPv4-looking tail is not an email domain.
    assert redact("415-555-0123@example.com x").text == f"{E} x"
    assert redact("user@10.0.0.1").text == f"user@{IP}"


def test_a_long_text_with_many_identifiers():
    unit = "note: mail a.b@example.com, call (415) 555-0123, host 10.0.0.1; "
    result = redact(unit * 50)
    assert result.text == f"note: mail {E}, call {P}, host {IP}; " * 50
    assert result.counts == {"email": 50, "phone": 50, "ip": 50}
