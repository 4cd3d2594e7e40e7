"""A schema-free reader of protobuf text format, on protobuf's own tokenizer.

The conformance files are `SimpleTestFile` messages in text format. Their .proto schema is
not published on any registry CI reaches, so instead of text_format.Parse (which needs the
descriptors) we walk the token stream of `google.protobuf.text_format.Tokenizer`, which
does the lexing (comments, C escapes, adjacent string literals), into plain `Message`s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeAlias

from google.protobuf import text_encoding, text_format

Scalar: TypeAlias = bytes | str  # a quoted literal (its decoded bytes) or a bare token (number, enum, bool)
Field: TypeAlias = "Message | bytes | str"
# protobuf's Python unescaper leaves the text-format escape `\?` (a question mark) as is; the
# conformance files rely on it, so it is replaced first (only where its backslash is not escaped).
_QUESTION_MARK = re.compile(r"(?<!\\)((?:\\\\)*)\\\?")


@dataclass
class Message:
    """A message's fields in file order; every field may repeat (the reader has no schema)."""

    fields: dict[str, list[Field]] = field(default_factory=dict)

    def add(self, name: str, value: Field) -> None:
        self.fields.setdefault(name, []).append(value)

    def has(self, name: str) -> bool:
        return name in self.fields

    def all(self, name: str) -> list[Field]:
        return self.fields.get(name, [])

    def message(self, name: str) -> Message | None:
        values = self.fields.get(name)
        if not values:
            return None
        if not isinstance(values[-1], Message):
            raise TypeError(f"field {name!r} is a scalar, not a message")
        return values[-1]

    def messages(self, name: str) -> list[Message]:
        out = [v for v in self.all(name) if isinstance(v, Message)]
        if len(out) != len(self.all(name)):
            raise TypeError(f"field {name!r} mixes scalars and messages")
        return out

    def scalar(self, name: str, default: Scalar = "") -> Scalar:
        values = self.fields.get(name)
        if not values:
            return default
        if isinstance(values[-1], Message):
            raise TypeError(f"field {name!r} is a message, not a scalar")
        return values[-1]

    def text(self, name: str) -> str:
        """A string field, decoded as UTF-8."""
        value = self.scalar(name, b"")
        return value.decode("utf-8") if isinstance(value, bytes) else value

    def flag(self, name: str) -> bool:
        return self.scalar(name, "false") in ("true", "True", "t", "1")


def read(text: str) -> Message:
    """The top-level message of a text-format document; text_format.ParseError on bad syntax."""
    tokens = text_format.Tokenizer(text.splitlines())
    message = _read_fields(tokens, closing=None)
    return message


def _read_fields(tokens: text_format.Tokenizer, closing: str | None) -> Message:
    message = Message()
    while True:
        if closing is None and tokens.AtEnd():
            return message
        if closing is not None and tokens.TryConsume(closing):
            return message
        name = _field_name(tokens)
        has_colon = tokens.TryConsume(":")
        if tokens.TryConsume("["):
            for value in _read_list(tokens):
                message.add(name, value)
        else:
            message.add(name, _read_value(tokens, require_message=not has_colon))
        if not tokens.TryConsume(","):
            tokens.TryConsume(";")


def _field_name(tokens: text_format.Tokenizer) -> str:
    """A plain field name, or `[...]` (an extension or an Any's type URL) kept whole."""
    if not tokens.TryConsume("["):
        return tokens.ConsumeIdentifierOrNumber()
    parts = ["["]
    while not tokens.TryConsume("]"):
        parts.append(tokens.token)
        tokens.NextToken()
    return "".join(parts) + "]"


def _read_list(tokens: text_format.Tokenizer) -> list[Field]:
    values: list[Field] = []
    if tokens.TryConsume("]"):
        return values
    while True:
        values.append(_read_value(tokens, require_message=False))
        if tokens.TryConsume("]"):
            return values
        tokens.Consume(",")


def _read_value(tokens: text_format.Tokenizer, require_message: bool) -> Field:
    if tokens.TryConsume("{"):
        return _read_fields(tokens, "}")
    if tokens.TryConsume("<"):
        return _read_fields(tokens, ">")
    if require_message:
        raise tokens.ParseError("expected '{' or '<' after a field name without ':'")
    if tokens.token[:1] in ("'", '"'):
        return _read_string(tokens)
    token = tokens.token
    if not token:
        raise tokens.ParseError("expected a value")
    tokens.NextToken()
    if token == "-":  # a sign the tokenizer split from an identifier: -inf, - 5
        token += tokens.token
        tokens.NextToken()
    return token


def _read_string(tokens: text_format.Tokenizer) -> bytes:
    """Adjacent quoted literals joined, C escapes decoded (by protobuf's own unescaper)."""
    parts: list[bytes] = []
    while tokens.token[:1] in ("'", '"'):
        raw = tokens.token
        if len(raw) < 2 or raw[-1] != raw[0]:
            raise tokens.ParseError("string missing its closing quote")
        parts.append(text_encoding.CUnescape(_QUESTION_MARK.sub(r"\1?", raw[1:-1])))
        tokens.NextToken()
    return b"".join(parts)
