"""cel.expr.Value and cel.expr.Type messages as kaipolicy's run-time values and type strings.

A value or type outside the documented subset (messages, enums, type values, wrappers,
timestamps) raises Unsupported with the name of the feature, which `subset` reports.
"""

from __future__ import annotations

import math
from typing import Any

from kaipolicy.rules import runtime as rt
from tests.conformance.textproto import Message

PRIMITIVES = {"BOOL": "bool", "INT64": "int", "UINT64": "uint", "DOUBLE": "double", "STRING": "string",
              "BYTES": "bytes"}


class Unsupported(Exception):
    """The case needs a feature outside the documented subset; the message names it."""


Typed = tuple[str, Any]  # (kind, payload); a list's payload is a list of Typed, a map's a dict of Typed


def to_typed(value: Message) -> Typed:
    """An expected or bound value with the CEL kind of every part (1, 1u and 1.0 differ)."""
    for name, kind in (("bool_value", "bool"), ("int64_value", "int"), ("uint64_value", "uint"),
                       ("double_value", "double"), ("string_value", "string"), ("bytes_value", "bytes")):
        if value.has(name):
            return kind, _scalar(value.scalar(name), kind)
    if value.has("null_value"):
        return "null", None
    if value.has("list_value"):
        return "list", [to_typed(v) for v in (value.message("list_value") or Message()).messages("values")]
    if value.has("map_value"):
        entries = (value.message("map_value") or Message()).messages("entries")
        return "map", {plain(to_typed(e.message("key") or Message())): to_typed(e.message("value") or Message())
                       for e in entries}
    if value.has("object_value"):
        raise Unsupported("protobuf messages")
    if value.has("enum_value"):
        raise Unsupported("protobuf enums")
    if value.has("type_value"):
        raise Unsupported("type values")
    raise Unsupported(f"a value with fields {sorted(value.fields)}")


def plain(typed: Typed) -> Any:
    """The Python value kaipolicy's compiled code takes for a typed value."""
    kind, payload = typed
    if kind == "list":
        return [plain(item) for item in payload]
    if kind == "map":
        return {key: plain(item) for key, item in payload.items()}
    return payload


def type_of(typed: Typed) -> str:
    """The narrowest type string of a value (for bindings the case does not declare)."""
    kind, payload = typed
    if kind == "list":
        return f"list<{_common(type_of(item) for item in payload)}>"
    if kind == "map":
        keys = _common(runtime_type(key) for key in payload)
        return f"map<{keys},{_common(type_of(item) for item in payload.values())}>"
    return kind


def _common(types: Any) -> str:
    seen = set(types)
    return seen.pop() if len(seen) == 1 else "dyn"


def _scalar(token: bytes | str, kind: str) -> Any:
    if kind == "bytes":
        return token if isinstance(token, bytes) else token.encode("utf-8")
    if kind == "string":
        return token.decode("utf-8") if isinstance(token, bytes) else token
    text = token.decode("utf-8") if isinstance(token, bytes) else token
    if kind == "bool":
        return text in ("true", "True", "t", "1")
    if kind == "double":
        return _double(text)
    return rt.UInt(_integer(text)) if kind == "uint" else _integer(text)


def _integer(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits.lower().startswith("0x"):
        return sign * int(digits, 16)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits, 8)
    return sign * int(digits, 10)


def _double(text: str) -> float:
    lowered = text.lower()
    if lowered.lstrip("+-") in ("inf", "infinity", "nan"):
        return float(lowered)
    if lowered.endswith("f") and not lowered.startswith("0x"):
        lowered = lowered[:-1]
    return float(lowered)


def to_type(message: Message) -> str:
    """A cel.expr.Type as kaipolicy's type string."""
    if message.has("primitive"):
        return PRIMITIVES[str(message.scalar("primitive"))]
    if message.has("dyn"):
        return "dyn"
    if message.has("null"):
        return "null"
    if message.has("list_type"):
        elem = (message.message("list_type") or Message()).message("elem_type") or Message({"dyn": []})
        return f"list<{to_type(elem)}>"
    if message.has("map_type"):
        kv = message.message("map_type") or Message()
        return f"map<{to_type(kv.message('key_type') or Message())},{to_type(kv.message('value_type') or Message())}>"
    if message.has("message_type") or message.has("well_known"):
        raise Unsupported("protobuf messages")
    if message.has("wrapper"):
        raise Unsupported("protobuf wrapper types")
    if message.has("abstract_type") or message.has("type_param"):
        raise Unsupported("abstract and parameterised types")
    if message.has("type"):
        raise Unsupported("type values")
    raise Unsupported(f"a type with fields {sorted(message.fields)}")


def equal(want: Typed, got: Any, got_type: str) -> bool:
    """CEL value equality of an expected value with ours, kinds included (1, 1u, 1.0 and true differ).

    `got_type` is our checker's static type; where it says dyn, the Python value tells the kind.
    Maps compare without order and any NaN matches any NaN, as the suite's format says.
    """
    kind, payload = want
    got_kind = got_type if got_type != "dyn" else runtime_type(got)
    if kind == "list":
        if not isinstance(got, list) or len(got) != len(payload) or not got_kind.startswith("list"):
            return False
        elem = got_kind[5:-1] if got_kind.startswith("list<") else "dyn"
        return all(equal(w, g, elem) for w, g in zip(payload, got))
    if kind == "map":
        if not isinstance(got, dict) or got.keys() != payload.keys() or not got_kind.startswith("map"):
            return False
        value_type = _split_map(got_kind)[1]
        return all(equal(w, got[key], value_type) for key, w in payload.items())
    if got_kind.split("<", 1)[0] != kind or not _holds(kind, got):
        return False
    if kind == "double" and math.isnan(payload):
        return isinstance(got, float) and math.isnan(got)
    return bool(payload == got)


def _holds(kind: str, value: Any) -> bool:
    """Whether a Python value can be a value of `kind` (the static type alone cannot catch a leak)."""
    python = {"int": int, "uint": int, "double": float, "bool": bool, "string": str, "bytes": bytes}
    if kind == "null":
        return value is None
    if kind in ("int", "uint") and isinstance(value, bool):
        return False
    return isinstance(value, python.get(kind, object))


def _split_map(kind: str) -> tuple[str, str]:
    inner, depth = kind[4:-1], 0
    for i, c in enumerate(inner):
        depth += c == "<"
        depth -= c == ">"
        if c == "," and depth == 0:
            return inner[:i], inner[i + 1:]
    return "dyn", "dyn"


def runtime_type(value: Any) -> str:
    """The CEL type a run-time value shows (kaipolicy keeps a uint's type in runtime.UInt)."""
    found = rt.kind(value)
    return {"list": "list<dyn>", "map": "map<dyn,dyn>"}.get(found, found)
