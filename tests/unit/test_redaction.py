"""Redaction of personal identifiers: every case states its input and the exact output.

Phone numbers in the cases come from ranges reserved for fiction where one is valid: 555-01xx
in the US, the Ofcom drama range 020 7946 0xxx in the UK, ARCEP's 01 99 00 xx xx in France,
030 23125 xxx in Berlin (+81 3-1234-5678 is the usual Japanese example).
``test_phone_fixtures_are_valid_numbers`` checks with libphonenumber itself that each one is a
valid number, so a positive case never passes by accident.
"""

import dataclasses
import ipaddress
import re
import unicodedata

import phonenumbers
import pytest
from hypothesis import given, settings, strategies as st
from phonenumbers import Leniency, PhoneNumberMatcher

import agent_memory.memories.redaction as redaction_module
import agent_memory.memories.redaction_phones as redaction_phones
import agent_memory.memories.redaction_view as redaction_view
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
    # A run of 13 to 19 digits that passes Luhn is a card (unless redact_card_digit_runs is off).
    ("4111111111111111", C, {"card": 1}),
    ("card 4111111111111111 exp 12/25", f"card {C} exp 12/25", {"card": 1}),
    ("Amex 3782 822463 10005", f"Amex {C}", {"card": 1}),
    ("378282246310005", C, {"card": 1}),
    ("Diners 3056-930902-5904", f"Diners {C}", {"card": 1}),
    ("5555 5555 5555 4444", C, {"card": 1}),
    ("4222222222222", C, {"card": 1}),
    ("4012888888881881003", C, {"card": 1}),
    ("ref 1234 4012888888881881", f"ref 1234 {C}", {"card": 1}),
    ("41111111111111110", "41111111111111110", {}),  # 17 digits failing Luhn
    ("40128888888818810034", "40128888888818810034", {}),  # 20 digits passing Luhn: too long
    ("411111111111", "411111111111", {}),  # 12 digits
    ("4111111111111111-1234", "4111111111111111-1234", {}),
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

# Invisible characters and look-alikes inside an identifier (docs/redaction.md, "Look-alikes").
LOOKALIKES = [
    # invisible characters inside: zero-width space, soft hyphen, word joiner, BOM, ZWJ, VS16
    ("card 4111\u200b1111\u200b1111\u200b1111", f"card {C}", {"card": 1}),
    ("4111 11\u00ad11 1111 1111", C, {"card": 1}),
    ("41111111\u20601111\ufeff1111", C, {"card": 1}),
    ("jane\u200b.doe@exa\u00admple.com", E, {"email": 1}),
    ("jane\u200d@example.com", E, {"email": 1}),
    ("SSN 123-4\u200b5-6789", f"SSN {S}", {"ssn": 1}),
    ("10.0.0\u2060.1", IP, {"ip": 1}),
    ("2001:db8::\ufe0f1", IP, {"ip": 1}),
    ("call 415\u200b-555-0123", f"call {P}", {"phone": 1}),
    # Unicode spaces: no-break, narrow no-break, thin, figure and ideographic
    ("4111\u00a01111\u00a01111\u00a01111", C, {"card": 1}),
    ("4111\u202f1111\u20091111\u20071111", C, {"card": 1}),
    ("SSN 123\u00a045\u00a06789", f"SSN {S}", {"ssn": 1}),
    ("call 415\u3000555\u30000123", f"call {P}", {"phone": 1}),
    # hyphen look-alikes anywhere, other dashes between digits
    ("SSN 123\u201045\u20106789", f"SSN {S}", {"ssn": 1}),
    ("SSN 123\u201145\u20116789", f"SSN {S}", {"ssn": 1}),
    ("SSN 123\u221245\u22126789", f"SSN {S}", {"ssn": 1}),
    ("SSN 123\ufe6345\ufe636789", f"SSN {S}", {"ssn": 1}),
    ("SSN 123\u201345\u20136789", f"SSN {S}", {"ssn": 1}),
    ("4111\u20121111\u20121111\u20121111", C, {"card": 1}),
    ("4111\u20131111\u20131111\u20131111", C, {"card": 1}),
    ("4111\u20141111\u20141111\u20141111", C, {"card": 1}),
    ("4111\uff0d1111\uff0d1111\uff0d1111", C, {"card": 1}),
    ("call 415\u2013555\u20130123", f"call {P}", {"phone": 1}),
    ("jane\u2010doe@my\u2011company.com", E, {"email": 1}),
    # full-width and other NFKC forms
    (" ".join(["\uff14\uff11\uff11\uff11"] + ["\uff11" * 4] * 3), C, {"card": 1}),
    ("\U0001d7d2111111111111111", C, {"card": 1}),  # a mathematical bold 4
    ("SSN \uff11\uff12\uff13-\uff14\uff15-\uff16\uff17\uff18\uff19", f"SSN {S}", {"ssn": 1}),
    ("jane\uff20example\uff0ecom", E, {"email": 1}),
    ("jane\ufe6bexample\ufe52com", E, {"email": 1}),
    ("\uff4a\uff41\uff4e\uff45@example.com", E, {"email": 1}),
    ("o\ufb03ce@example.com", E, {"email": 1}),  # the ligature ffi
    ("\uff11\uff10\uff0e\uff10\uff0e\uff10\uff0e\uff11", IP, {"ip": 1}),
    ("10\u20240\u20240\u20241", IP, {"ip": 1}),  # one dot leaders
    ("2001\uff1adb8\uff1a\uff1a1", IP, {"ip": 1}),
    ("call \uff08415\uff09 555-0123", f"call {P}", {"phone": 1}),
    # everything at once
    (
        "Reach ja\u200bne\uff20exa\u00admple.com, SSN 123\u201345\u20136789, card "
        "4111\u00a01111\u00a0\u20601111\u00a01111, host \uff11\uff10.0.0.1 ok",
        f"Reach {E}, SSN {S}, card {C}, host {IP} ok",
        {"email": 1, "card": 1, "ssn": 1, "ip": 1},
    ),
    # The characters around an identifier stay, and so does what reads as something else.
    ("\u200b4111 1111 1111 1111\u200b", f"\u200b{C}\u200b", {"card": 1}),
    ("ip\u200b10.0.0.1", f"ip\u200b{IP}", {"ip": 1}),  # an invisible boundary stays one
    ("card\u200b4111111111111111", f"card\u200b{C}", {"card": 1}),
    ("1\u200b4111111111111111", "1\u200b4111111111111111", {}),  # one run, failing Luhn
    ("call 415-555-0123\u2014thanks", f"call {P}\u2014thanks", {"phone": 1}),
    ("4111 1111 1111 1111\u00b9", f"{C}\u00b9", {"card": 1}),  # a footnote mark
    ("ORD\u20104111111111111111", "ORD\u20104111111111111111", {}),  # a hyphen glues
    ("ORD\uff0d2291", "ORD\uff0d2291", {}),
    ("4111\u200b1111\u200b1111\u200b1112", "4111\u200b1111\u200b1111\u200b1112", {}),
    ("\uff14\uff11\uff11\uff11111111111112", "\uff14\uff11\uff11\uff11111111111112", {}),
    ("v1\uff0e2\uff0e3\uff0e4", "v1\uff0e2\uff0e3\uff0e4", {}),
    ("in\u00a02024, 1999\u20132003", "in\u00a02024, 1999\u20132003", {}),
    ("at 12\u200b:30 on 2023\u201305\u201308", "at 12\u200b:30 on 2023\u201305\u201308", {}),
    ("\u0664\u0661\u0661\u0661111111111111", "\u0664\u0661\u0661\u0661111111111111", {}),
    ("jane\u2013doe@example.com", f"jane\u2013{E}", {"email": 1}),  # an en dash is no hyphen
    ("\u2074" + "\u00b9" * 15, "\u2074" + "\u00b9" * 15, {}),  # superscripts are not digits
]

ALL_CASES = EMAILS + PHONES + CARDS + SSNS + IPS + NOT_IDENTIFIERS + MIXED + LOOKALIKES


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

    monkeypatch.setattr(redaction_phones, "PhoneNumberMatcher", boom)
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


# --- card digit runs: the store setting redact_card_digit_runs ------------------------------


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        ("4111111111111111", "4111111111111111", {}),
        ("card 378282246310005 and 4222222222222", "card 378282246310005 and 4222222222222", {}),
        # What reads as a digit run is one, invisible characters and full-width digits included.
        ("4111\u200b1111\u200b1111\u200b1111", "4111\u200b1111\u200b1111\u200b1111", {}),
        ("\uff14111111111111111", "\uff14111111111111111", {}),
        # Grouped card numbers are cards either way.
        ("4111 1111 1111 1111", C, {"card": 1}),
        ("4111\u00a01111\u00a01111\u00a01111", C, {"card": 1}),
        ("Amex 3782-822463-10005", f"Amex {C}", {"card": 1}),
        ("ref 1234 4012 8888 8888 1881", f"ref 1234 {C}", {"card": 1}),
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_card_digit_runs_can_be_left_alone(text, expected, counts):
    result = redact(text, card_digit_runs=False)
    assert result.text == expected
    assert result.counts == counts
    assert redact(result.text, card_digit_runs=False).counts == {}


# --- the look-alike table ----------------------------------------------------------------------


def _table() -> set[int]:
    found = set()
    for item in "".join(redaction_view._LOOKALIKE_RANGES).split():
        first, _, last = item.partition("-")
        found.update(range(int(first, 16), int(last or first, 16) + 1))
    return found


def test_the_lookalike_table_is_every_character_that_reads_otherwise():
    """``_LOOKALIKE`` (the characters worth reading) is the set of characters ``_reading``
    changes, for the Unicode version the table was built from (Python 3.11's). On a later
    version, characters Unicode added may be missing, but none of the table may read as
    itself (normalization forms and these categories are stable)."""
    reads_otherwise = {cp for cp in range(0x110000) if redaction_view._reading(chr(cp)) != chr(cp)}
    table = _table()
    if unicodedata.unidata_version == redaction_view._LOOKALIKE_UNICODE:
        assert table == reads_otherwise
    else:
        assert table <= reads_otherwise
    # The search finds exactly the table's characters, in every plane.
    sample = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    assert {ord(sample[at]) for at in redaction_view._lookalikes(sample)} == table


@pytest.mark.parametrize(
    ("char", "reads_as"),
    [
        ("\u200b", ""),
        ("\u00ad", ""),
        ("\u2060", ""),
        ("\ufeff", ""),
        ("\u200d", ""),
        ("\ufe0f", ""),
        ("\U000e0041", ""),
        ("\u00a0", " "),
        ("\u202f", " "),
        ("\u3000", " "),
        ("\u2010", "-"),
        ("\u2011", "-"),
        ("\u2012", "-"),
        ("\u2212", "-"),
        ("\ufe63", "-"),
        ("\uff0d", "-"),
        ("\u2013", None),
        ("\u2014", None),
        ("\uff20", "@"),
        ("\ufe6b", "@"),
        ("\uff10", "0"),
        ("\uff19", "9"),
        ("\uff0e", "."),
        ("\u2024", "."),
        ("\uff1a", ":"),
        ("\U0001d7ce", "0"),
        ("\u2460", "1"),
        ("\u2026", "..."),
        ("\ufb01", "fi"),
        ("\u00b9", "\u00b9"),
        ("\u2074", "\u2074"),
        ("\u0664", "\u0664"),
        ("\u3002", "\u3002"),
        ("\u00e9", "\u00e9"),
        ("\u6771", "\u6771"),
        ("-", "-"),
        (" ", " "),
        ("@", "@"),
    ],
)
def test_how_characters_read(char, reads_as):
    assert redaction_view._reading(char) == reads_as


# --- properties: identifiers written with invisible characters and look-alikes ---------------

INVISIBLE = [
    "\u200b",
    "\u200c",
    "\u200d",
    "\u00ad",
    "\u2060",
    "\ufeff",
    "\u200e",
    "\u202a",
    "\u2063",
    "\u180e",
    "\ufe0f",
    "\u034f",
    "\U000e0020",
]
SPACES = ["\u00a0", "\u2002", "\u2007", "\u2009", "\u202f", "\u205f", "\u3000"]
HYPHENS = ["\u2010", "\u2011", "\u2012", "\u2212", "\ufe63", "\uff0d"]
DASHES = ["\u2013", "\u2014", "\u2015", "\ufe58"]  # read as '-' between two digits only
PREFIXES = ["", "Reach me at ", "noted: ", "\u6771\u4eac ", "Caf\u00e9 \u00ab ", "(see "]
SUFFIXES = ["", " today.", ", thanks", " \U0001f642", "\u3002", " \u00bb ok", ")"]


def _wide(char: str) -> str:
    """The full-width form of a printable ASCII character."""
    return chr(ord(char) + 0xFEE0)


def _look_alikes(ident: str, i: int, *, digits: bool, letters: bool) -> list[str]:
    """What ``ident[i]`` may be written as (itself first)."""
    char = ident[i]
    if char.isdigit():
        return [char, _wide(char), chr(0x1D7CE + int(char))] if digits else [char]
    if char.isascii() and char.isalpha():
        return [char, _wide(char)] if letters else [char]
    if char == "-":
        between_digits = 0 < i < len(ident) - 1 and (ident[i - 1] + ident[i + 1]).isdigit()
        return ["-", *HYPHENS, *(DASHES if between_digits else [])]
    if char == " ":
        return [" ", *SPACES]
    if char in "@.":
        return [char, _wide(char), {"@": "\ufe6b", ".": "\ufe52"}[char]]
    if char in ":()+_%":
        return [char, _wide(char)]
    return [char]


@st.composite
def disguised(draw, ident: str, *, digits: bool = True, letters: bool = False) -> str:
    """``ident`` with characters swapped for look-alikes (full-width and mathematical digits
    unless ``digits`` is false, full-width letters when ``letters``, Unicode spaces, hyphens,
    dashes between digits, full-width or small ``@ . : ( ) + _ %``) and invisible characters
    put between its characters (never before the first or after the last)."""
    size = len(ident)
    picks = draw(st.lists(st.integers(0, 11), min_size=size, max_size=size))
    gaps = draw(st.lists(st.integers(0, 3 * len(INVISIBLE)), min_size=size, max_size=size))
    out = []
    for i, (pick, gap) in enumerate(zip(picks, gaps, strict=True)):
        choices = _look_alikes(ident, i, digits=digits, letters=letters)
        out.append(choices[pick % len(choices)] if pick < 2 * len(choices) else ident[i])
        if i < size - 1 and gap < len(INVISIBLE):
            out.append(INVISIBLE[gap] + INVISIBLE[(gap * 7) % len(INVISIBLE)] * (gap % 2))
    return "".join(out)


def _passes_luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _with_check_digit(body: str) -> str:
    return next(body + d for d in "0123456789" if _passes_luhn(body + d))


@st.composite
def card_numbers(draw, *, grouped: bool | None = None) -> str:
    """A number of 13 to 19 digits that passes Luhn, as one run or in one of the layouts."""
    n = draw(st.integers(13, 19))
    first = draw(st.sampled_from("3456"))
    number = _with_check_digit(first + draw(st.text("0123456789", min_size=n - 2, max_size=n - 2)))
    layouts = [[4, 4, 4, n - 12] if n <= 16 else [4, 4, 4, 4, n - 16]]
    layouts += [[4, 6, 4]] if n == 14 else [[4, 6, 5]] if n == 15 else []
    if grouped is not True:
        layouts.append([n])
    if grouped is False:
        layouts = [[n]]
    layout = draw(st.sampled_from(layouts))
    sep = draw(st.sampled_from(" -"))
    groups, at = [], 0
    for size in layout:
        groups.append(number[at : at + size])
        at += size
    return sep.join(groups)


ssns = st.builds(
    lambda area, group, serial, sep: f"{area:03d}{sep}{group:02d}{sep}{serial:04d}",
    st.integers(1, 899).filter(lambda a: a != 666),
    st.integers(1, 99),
    st.integers(1, 9999),
    st.sampled_from("- "),
)
ipv4s = st.lists(st.integers(0, 255), min_size=4, max_size=4).map(
    lambda octets: ".".join(map(str, octets))
)
ipv6s = (
    st.lists(st.one_of(st.just(0), st.integers(0, 0xFFFF)), min_size=8, max_size=8)
    .map(lambda groups: ipaddress.IPv6Address(sum(g << (16 * i) for i, g in enumerate(groups))))
    .map(lambda address: address.compressed)
    .filter(lambda text: any(c.isdigit() for c in text))
)
_ATOM = st.from_regex(r"[a-z0-9](?:[a-z0-9_+%-]{0,6}[a-z0-9])?", fullmatch=True)
_LABEL = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
emails = st.builds(
    lambda local, labels, tld: ".".join(local) + "@" + ".".join(labels) + "." + tld,
    st.lists(_ATOM, min_size=1, max_size=3),
    st.lists(_LABEL, min_size=1, max_size=3),
    st.from_regex(r"[a-z]{2,6}", fullmatch=True),
)
# US numbers in the range reserved for fiction (valid for libphonenumber, see the fixtures).
phones = st.builds(
    lambda shape, area, line: shape.format(a=area, n=line),
    st.sampled_from(
        ["({a}) 555-01{n:02d}", "{a}-555-01{n:02d}", "{a}.555.01{n:02d}", "+1 {a} 555 01{n:02d}"]
    ),
    st.sampled_from([415, 212, 617, 312]),
    st.integers(0, 99),
)

IDENTIFIERS = {
    "card": lambda: card_numbers().flatmap(disguised),
    "ssn": lambda: ssns.flatmap(disguised),
    "ip4": lambda: ipv4s.flatmap(disguised),
    "ip6": lambda: ipv6s.flatmap(lambda a: disguised(a, letters=True)),
    "email": lambda: emails.flatmap(lambda a: disguised(a, letters=True)),
    # Phone numbers written with non-ASCII digits are kept (docs/redaction.md), so ASCII digits.
    "phone": lambda: phones.flatmap(lambda a: disguised(a, digits=False)),
}


@pytest.mark.parametrize("name", list(IDENTIFIERS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_a_disguised_identifier_goes_whole_and_nothing_else(name, data):
    """The identifier, written with look-alikes and invisible characters at random places,
    becomes its marker, and the sentence around it stays as it is. The exact comparison is
    what shows that nothing of the identifier is left: no digit of a card number, no letter of
    an address's local part, no invisible character that was inside it."""
    kind = {"ip4": "ip", "ip6": "ip"}.get(name, name)
    prefix = data.draw(st.sampled_from(PREFIXES), label="prefix")
    ident = data.draw(IDENTIFIERS[name](), label="identifier")
    suffix = data.draw(st.sampled_from(SUFFIXES), label="suffix")
    result = redact(prefix + ident + suffix)
    assert result.text == prefix + MARKERS[kind] + suffix
    assert result.counts == {kind: 1}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(list(IDENTIFIERS)), min_size=2, max_size=5), st.data())
def test_disguised_identifiers_in_a_sentence_all_go(names, data):
    """Several identifiers in one text, each disguised: each becomes one marker, so no run of
    two digits and no '@' is left (the look-alikes read as digits and '@' too)."""
    forms = [data.draw(IDENTIFIERS[name](), label=name) for name in names]
    text = " and ".join(f"item {n}: {form}" for n, form in enumerate(forms, 1))
    result = redact(text)
    assert sum(result.counts.values()) == len(names)
    left = unicodedata.normalize("NFKC", result.text)
    assert "@" not in left
    assert not re.search(r"[0-9]{2}", left)  # only the items' own numbers, one digit each


# --- properties: ordinary text stays ------------------------------------------------------------

SENTENCES = st.sampled_from(["Order {} shipped.", "ref {} \u2014 done", "{}", "id\u00a0{}, ok"])


@settings(max_examples=150, deadline=None)
@given(
    st.integers(13, 19)
    .flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))
    .map(lambda run: run if not _passes_luhn(run) else run[:-1] + str((int(run[-1]) + 1) % 10))
    .flatmap(disguised),
    SENTENCES,
)
def test_a_digit_run_failing_luhn_is_no_card(run, sentence):
    text = sentence.format(run)
    assert redact(text) == Redaction(text, {})


@settings(max_examples=100, deadline=None)
@given(card_numbers(grouped=False).flatmap(disguised), SENTENCES)
def test_with_the_opt_out_a_digit_run_passing_luhn_stays(run, sentence):
    text = sentence.format(run)
    assert redact(text, card_digit_runs=False) == Redaction(text, {})
    assert redact(text).counts == {"card": 1}


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1900, 2099),
    st.sampled_from(["in {}", "since {}, not before", "{}\u2013{}", "back in\u00a0{}."]),
)
def test_years_stay(year, sentence):
    text = sentence.format(year, year + 1)
    assert redact(text) == Redaction(text, {})


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["ORD", "INV", "ticket", "PO"]),
    st.sampled_from(["-", *HYPHENS]),
    st.one_of(st.text("0123456789", min_size=1, max_size=19), card_numbers(grouped=False)),
    st.sampled_from(["Order {} shipped.", "({})", "see {}; thanks", "{}"]),
)
def test_order_numbers_stay(prefix, hyphen, digits, sentence):
    """An order number such as ORD-2291 is one token, even when its digits pass Luhn and
    whatever hyphen joins it (docs/redaction.md: glued candidates are dropped)."""
    text = sentence.format(f"{prefix}{hyphen}{digits}")
    assert redact(text) == Redaction(text, {})


_WORD = st.from_regex(r"[A-Za-z\u00e9\u00fc\u6771\u4eac]{1,8}", fullmatch=True)
_SEPARATOR = st.sampled_from([" ", ", ", " \u2014 ", "\u2013", "\u00a0", "\u200b", "\u00ad", ": "])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_WORD.flatmap(lambda w: disguised(w, letters=True)), _SEPARATOR)))
def test_words_with_look_alikes_and_no_identifier_stay(words):
    text = "".join(word + sep for word, sep in words)
    assert redact(text) == Redaction(text, {})
