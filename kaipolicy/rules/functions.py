"""Built-in CEL functions: their type rules (for `check`) and how they vectorise.

Vocabulary functions are typed from their FunctionSpec instead; both are called by
name from generated code through the helpers in `runtime`.
"""

from __future__ import annotations

from kaipolicy.rules.vocabulary import NUMERIC, assignable, join, list_elem, map_kv

RECEIVER_STRING = frozenset({"startsWith", "endsWith", "contains", "matches"})
CONVERSIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "uint", "double", "string"}),
    "uint": frozenset({"int", "uint", "double", "string"}),
    "double": frozenset({"int", "uint", "double", "string"}),
    "string": frozenset({"int", "uint", "double", "string", "bool", "bytes"}),
    "bool": frozenset({"bool", "string"}),
    "bytes": frozenset({"bytes", "string"}),
    "dyn": frozenset(),
}
GLOBAL = frozenset(CONVERSIONS) | {"size", "min", "max", "matches"}
VECTOR_BUILTINS = frozenset({"int", "double"})


def builtin_type(name: str, receiver: str | None, args: list[str]) -> tuple[str | None, str]:
    """(result type, "") when the call fits, else (None, reason); receiver is the target's type."""
    if name == "size":
        operands = ([receiver] if receiver is not None else []) + args
        if len(operands) != 1:
            return None, "size() takes one argument"
        return _size(operands[0])
    if name in RECEIVER_STRING:
        operands = ([receiver] if receiver is not None else []) + args
        if len(operands) != 2 or not all(assignable("string", a) for a in operands):
            return None, f"{name}() takes a string receiver and one string argument"
        return "bool", ""
    if receiver is not None:
        return None, f"{name}() cannot be called on a value"
    if name in CONVERSIONS:
        return _conversion(name, args)
    if name in ("min", "max"):
        return _min_max(name, args)
    return None, f"unknown function {name!r}"


def _size(operand: str) -> tuple[str | None, str]:
    if operand in ("string", "bytes", "dyn") or list_elem(operand) is not None or map_kv(operand) is not None:
        return "int", ""
    return None, f"size() does not apply to {operand}"


def _conversion(name: str, args: list[str]) -> tuple[str | None, str]:
    if len(args) != 1:
        return None, f"{name}() takes one argument"
    if name == "dyn":
        return "dyn", ""
    if args[0] != "dyn" and args[0] not in CONVERSIONS[name]:
        return None, f"{name}() does not convert {args[0]}"
    return name, ""


def _min_max(name: str, args: list[str]) -> tuple[str | None, str]:
    if len(args) == 1:
        elem = list_elem(args[0]) if args[0] != "dyn" else "dyn"
        if elem is None:
            return None, f"{name}() takes a list of numbers or several numbers"
        types = [elem]
    else:
        types = args
    if not types:
        return None, f"{name}() needs arguments"
    common: str | None = types[0]
    for other in types[1:]:
        common = join(common, other) if common is not None else None
    if common is None or (common not in NUMERIC and common not in ("dyn", "string")):
        return None, f"{name}() takes numbers of one type, got {', '.join(types)}"
    return common, ""
