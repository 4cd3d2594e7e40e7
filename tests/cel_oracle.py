"""Google's CEL runtime (cel-expr-python, on cel-cpp) as an oracle for our compiled expressions.

`evaluate(expr, types, values)` gives (ok, value): not ok when it refuses the expression or the
result is an error. Values come back the way our compiled code gives them: a uint as a
runtime UInt, bytes as bytes, lists and maps of such values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cel_expr_python import cel

from kaipolicy.rules.kinds import UInt
from kaipolicy.rules.vocabulary import list_elem, map_kv

_TYPES = {"int": cel.Type.INT, "uint": cel.Type.UINT, "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL,
          "string": cel.Type.STRING, "bytes": cel.Type.BYTES, "null": cel.Type.NULL, "dyn": cel.Type.DYN}


def cel_type(name: str) -> Any:
    """One of our type strings (int, list<T>, map<K,V>, ...) as a cel-expr-python type."""
    elem, kv = list_elem(name), map_kv(name)
    if elem is not None:
        return cel.Type.List(cel_type(elem))
    if kv is not None:
        return cel.Type.Map(cel_type(kv[0]), cel_type(kv[1]))
    return _TYPES[name]


def evaluate(expr: str, types: Mapping[str, str], values: Mapping[str, Any]) -> tuple[bool, Any]:
    env = cel.NewEnv(variables={name: cel_type(t) for name, t in types.items()})
    try:
        result = env.compile(expr).eval(data=dict(values))
    except Exception:  # noqa: BLE001 - cel-expr-python raises plain exceptions for parse and check errors
        return False, None
    if result.type() == cel.Type.ERROR:
        return False, None
    return True, _python(result)


def compiles(expr: str, types: Mapping[str, str]) -> bool:
    try:
        cel.NewEnv(variables={name: cel_type(t) for name, t in types.items()}).compile(expr)
    except Exception:  # noqa: BLE001 - as above
        return False
    return True


def _python(value: Any) -> Any:
    """A cel-expr-python value (or list/map item accessor) as our run-time value."""
    kind = value.type()
    payload = value.value()
    if kind == cel.Type.UINT:
        return UInt(payload)
    if kind == cel.Type.BYTES:
        return bytes(payload)
    if isinstance(payload, list):
        return [_python(item) for item in payload]
    if isinstance(payload, dict):
        return {key: _python(item) for key, item in payload.items()}
    return payload
