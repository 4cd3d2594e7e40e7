"""The schema-free text-format reader the conformance runner stands on."""

from __future__ import annotations

import pytest
from google.protobuf import text_format

from tests.conformance.textproto import Message, read


def test_fields_repeat_nest_and_keep_their_order() -> None:
    doc = read('name: "f"\nsection { name: "a" test { expr: "1" } test: { expr: "2" } }\nsection < name: "b" >')
    sections = doc.messages("section")
    assert [s.text("name") for s in sections] == ["a", "b"]
    assert [t.text("expr") for t in sections[0].messages("test")] == ["1", "2"]


@pytest.mark.parametrize(("text", "want"), [
    (r'v: "a\tb"', b"a\tb"),
    (r'v: "\377\xff"', b"\xff\xff"),
    (r'v: "ab" ' + "'cd'", b"abcd"),              # adjacent literals join
    (r'v: " \? "', b" ? "),                       # the escape protobuf's Python unescaper misses
    (r'v: " \\? "', b" \\? "),                    # ... but not an escaped backslash before '?'
    (r'v: "\303\277"', "ÿ".encode()),
])
def test_strings_decode_their_escapes(text: str, want: bytes) -> None:
    assert read(text).scalar("v") == want


@pytest.mark.parametrize(("text", "want"), [
    ("v: -9223372036854775808", "-9223372036854775808"), ("v: -inf", "-inf"), ("v: 1e3", "1e3"),
    ("v: NULL_VALUE", "NULL_VALUE"), ("v: true", "true"), ("v: - 5", "-5"),
])
def test_bare_tokens_stay_text(text: str, want: str) -> None:
    assert read(text).scalar("v") == want


def test_lists_extensions_and_any_type_urls_are_read() -> None:
    doc = read('a: [1, 2] b: [{x: 1}, {x: 2}] [pkg.ext]: 3 '
               'o { [type.googleapis.com/pkg.T] { f: "x" } }')
    assert doc.all("a") == ["1", "2"]
    assert [m.scalar("x") for m in doc.messages("b")] == ["1", "2"]
    assert doc.scalar("[pkg.ext]") == "3"
    inner = doc.message("o")
    assert isinstance(inner, Message)
    assert inner.message("[type.googleapis.com/pkg.T]") == Message({"f": [b"x"]})


@pytest.mark.parametrize("text", ["a { b: 1", "a: ", 'a: "open', "a 1"])
def test_malformed_text_is_a_parse_error(text: str) -> None:
    with pytest.raises(text_format.ParseError):
        read(text)
