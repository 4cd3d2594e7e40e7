"""What rule expressions may name: types with fields, typed variables, functions.

Plain data only; the engine supplies the real vocabulary (task, job, node, queue, ...).
Type strings: int, uint, double, bool, string, bytes, null, dyn, list<T>, map<K,V>
or the name of a TypeSpec. The helpers at the bottom split and compare them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PRIMITIVES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "null", "dyn"})
NUMERIC = frozenset({"int", "uint", "double"})


@dataclass(frozen=True)
class FieldSpec:
    """One field of a type: its CEL name, CEL type and the Python attribute read.

    `max_size` bounds the length of a list, map or string field for the static cost estimate.
    """

    name: str
    type: str
    attr: str
    doc: str = ""
    max_size: int | None = None


@dataclass(frozen=True)
class TypeSpec:
    """A type rules see. `python_types` are the classes whose instances carry it, so that a
    `dyn` value's fields resolve through this spec; `by_key` reads fields as mapping keys."""

    name: str
    fields: Mapping[str, FieldSpec]
    doc: str = ""
    python_types: tuple[type, ...] = ()
    by_key: bool = False


@dataclass(frozen=True)
class FunctionSpec:
    """A callable; `vector_impl` takes numpy arrays where the scalar one takes numbers.

    `per_node`: its value at a node is worked out from that node, the pod's request and the job
    (its fixed fields, and what the job's placement set up before its pods are placed), and
    placing a pod on one node changes it on no other node. `scope_key`, for such a function that
    also compares each node against the whole node set (bin-packing's least and most free): what
    of the set it compares against, given the set as a NodeVector and the call's literal
    arguments that are not the hook's values.

    `fixed`: its value for a pod and a node reads only their fields that no placement changes in
    a session (the pod's spec, the node's labels, taints and conditions), so it is the same all
    session long for that pod on that node."""

    name: str
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    vector_impl: Callable[..., Any] | None = None
    doc: str = ""
    per_node: bool = False
    scope_key: Callable[..., Any] | None = None
    fixed: bool = False


@dataclass(frozen=True)
class Vocabulary:
    types: Mapping[str, TypeSpec] = field(default_factory=dict)
    variables: Mapping[str, str] = field(default_factory=dict)
    functions: Mapping[str, FunctionSpec] = field(default_factory=dict)


def type_spec(name: str, fields: Mapping[str, str], doc: str = "") -> TypeSpec:
    """Shorthand: fields given as {celName: type}; the attribute is the snake_case name."""
    return TypeSpec(name, {n: FieldSpec(n, t, snake_case(n)) for n, t in fields.items()}, doc)


def snake_case(name: str) -> str:
    out = [("_" + c.lower()) if c.isupper() else c for c in name]
    return "".join(out).lstrip("_")


def split_params(inner: str) -> list[str]:
    """Split 'K,V' at top-level commas (type arguments may nest)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(inner):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(inner[start:i].strip())
            start = i + 1
    parts.append(inner[start:].strip())
    return parts


def list_elem(t: str) -> str | None:
    """The element type of list<T>, or None when t is not a list type."""
    if t.startswith("list<") and t.endswith(">"):
        return t[5:-1].strip()
    return None


def map_kv(t: str) -> tuple[str, str] | None:
    if t.startswith("map<") and t.endswith(">"):
        parts = split_params(t[4:-1])
        if len(parts) == 2:
            return parts[0], parts[1]
    return None


def assignable(want: str, got: str) -> bool:
    """May a value of type `got` be passed where `want` is expected (no numeric mixing)."""
    if want == got or want == "dyn" or got == "dyn":
        return True
    if got == "null" and want not in PRIMITIVES:
        return True
    we, ge = list_elem(want), list_elem(got)
    if we is not None and ge is not None:
        return assignable(we, ge)
    wm, gm = map_kv(want), map_kv(got)
    if wm is not None and gm is not None:
        return assignable(wm[0], gm[0]) and assignable(wm[1], gm[1])
    return False


def join(a: str, b: str) -> str | None:
    """The common type of two branches / list items, or None when they do not agree."""
    if a == b or b == "null" and a not in PRIMITIVES:
        return a
    if a == "dyn" or b == "dyn":
        return "dyn"
    if a == "null" and b not in PRIMITIVES:
        return b
    if assignable(a, b) and assignable(b, a):
        return a if "dyn" not in a else b
    return None


def type_of_value(value: Any) -> str:
    """The CEL type of a plain Python value (for test vocabularies and case tables)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return f"list<{_uniform(type_of_value(v) for v in value)}>"
    if isinstance(value, dict):
        keys = _uniform(type_of_value(k) for k in value)
        return f"map<{keys},{_uniform(type_of_value(v) for v in value.values())}>"
    return "dyn"


def _uniform(types: Any) -> str:
    seen = set(types)
    return seen.pop() if len(seen) == 1 else "dyn"
