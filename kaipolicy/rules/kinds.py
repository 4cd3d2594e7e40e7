"""CEL kinds of run-time values, and the operators that must look at them: equality, order and
membership across kinds, and map literals with computed keys.

Generated code calls these where the checker saw `dyn`; where it knows the types, Python's own
operators are exact and faster. A uint is a `UInt`, so its type survives `dyn`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np


class UInt(int):
    """A CEL uint at run time: an int that remembers it is unsigned, so that a value behind
    `dyn` still tells 1u from 1 (`dyn(1u) - 2u` overflows instead of giving -1)."""

    __slots__ = ()


_KINDS = {bool: "bool", int: "int", UInt: "uint", float: "double", str: "string", bytes: "bytes",
          list: "list", dict: "map", type(None): "null"}
NUMBERS = frozenset({"int", "uint", "double"})
CEL_KINDS = frozenset(_KINDS.values())   # what `kind` answers for a CEL value; anything else is an object


def kind(value: Any) -> str:
    """CEL kind of a run-time value, for the dynamically typed operators below."""
    found = _KINDS.get(type(value))
    if found is not None:
        return found
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "double"
    for python, cel in ((str, "string"), (bytes, "bytes"), ((list, tuple), "list"), (dict, "map")):
        if isinstance(value, python):
            return cel
    return type(value).__name__


def equals(a: Any, b: Any) -> bool:
    """CEL `==`: numbers compare by value across int, uint and double; other kinds must match
    (`dyn(true) == 1` is false, never an error); lists and maps compare element by element."""
    ka, kb = kind(a), kind(b)
    if ka in NUMBERS and kb in NUMBERS:
        return _number_order(a, b, ka, kb) == 0
    if ka != kb:
        return False
    if ka == "list":
        return len(a) == len(b) and all(equals(x, y) for x, y in zip(a, b))
    if ka == "map":
        return len(a) == len(b) and all(has_key(b, k) and equals(v, b[k]) for k, v in a.items())
    return bool(a == b)


def _number_order(a: Any, b: Any, ka: str, kb: str) -> int | None:
    """-1, 0 or 1; None when a NaN takes part. An int or uint meets a double as a double, as
    CEL specifies (so 2^63 - 1 and 2^63 as a double compare equal); ints and uints exactly."""
    if "double" in (ka, kb):
        x, y = float(a), float(b)
        if math.isnan(x) or math.isnan(y):
            return None
    else:
        x, y = a, b
    return -1 if x < y else 1 if x > y else 0


_ORDER_OPS = {"<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}


def compare(op: str, a: Any, b: Any) -> bool:
    """CEL `<`, `<=`, `>`, `>=`: numbers across kinds; bool, string and bytes within their kind."""
    ka, kb = kind(a), kind(b)
    if ka in NUMBERS and kb in NUMBERS:
        order = _number_order(a, b, ka, kb)
        return order is not None and bool(_ORDER_OPS[op](order))
    if ka == kb and ka in ("bool", "string", "bytes"):
        return bool(_ORDER_OPS[op](-1 if a < b else 1 if a > b else 0))
    raise TypeError(f"no such overload: {ka} {op} {kb}")


def contains(item: Any, container: Any) -> bool:
    """CEL `in`: list membership by `equals`, map membership by key."""
    if isinstance(container, list):
        return any(equals(item, x) for x in container)
    if isinstance(container, dict):
        return has_key(container, item)
    raise TypeError(f"no such overload: {kind(item)} in {kind(container)}")


def has_key(mapping: dict[Any, Any], key: Any) -> bool:
    """A map key lookup where true is not 1 (Python hashes them alike) but 1.0 finds 1."""
    if isinstance(key, bool) or key in (0, 1):
        return any(k == key and isinstance(k, bool) == isinstance(key, bool) for k in mapping)
    return key in mapping


def _twin(mapping: dict[Any, Any], key: Any) -> Any:
    return next(k for k in mapping if k == key)


def new_map(entries: Iterable[tuple[Any, Any]]) -> dict[Any, Any]:
    """A map literal whose keys are computed: keys must be int, uint, bool or string, once each."""
    out: dict[Any, Any] = {}
    for key, value in entries:
        key_kind = kind(key)
        if key_kind not in ("int", "uint", "bool", "string"):
            raise TypeError(f"invalid map key type: {key_kind}")
        if has_key(out, key):
            raise ValueError(f"duplicate map key {key!r}")
        if key in out:  # true beside 1 (or false beside 0): distinct in CEL, one key to Python
            raise ValueError(f"map key {key!r} cannot be used beside {_twin(out, key)!r} in one map")
        out[key] = value
    return out
