"""Declared plugin arguments: their types, defaults, enums, and coercion of given values.

The reference's configuration passes every argument as a string, so "1.5" given for a
double and "true" for a bool are parsed here; anything else of the wrong type is refused.
Structured arguments (`list<T>`, `map<string,T>`, nested) take YAML values, or a string
holding YAML or JSON (a ConfigMap carries only strings).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaipolicy.errors import YamlError
from kaipolicy.rules.kinds import UInt
from kaipolicy.rules.vocabulary import list_elem, map_kv
from kaipolicy.yamlsafe import Limits, load

ArgValue = Any   # str | int | float | bool, or lists and string-keyed maps of those
ARG_TYPES = ("int", "uint", "double", "bool", "string")
_INT64 = (-(2**63), 2**63 - 1)
# A structured argument given as text (a ConfigMap holds only strings) is untrusted YAML too.
_TEXT_LIMITS = Limits(max_bytes=64 << 10, max_depth=16, alias_values=0, what="argument")


@dataclass(frozen=True)
class Argument:
    name: str
    type: str
    default: ArgValue
    enum: tuple[ArgValue, ...] | None = None
    description: str = ""


class ArgumentValues(dict[str, ArgValue]):
    """What `args` is inside expressions: a map from declared argument names to values. Rules
    read it by key (`args.x` compiles to a key lookup), so no argument name can reach a Python
    attribute, whatever it is called."""

    def as_dict(self) -> dict[str, ArgValue]:
        return dict(self)


def valid_type(arg_type: str) -> bool:
    """A scalar type, or list<T> / map<string,T> of valid types."""
    if arg_type in ARG_TYPES:
        return True
    elem, kv = list_elem(arg_type), map_kv(arg_type)
    if elem is not None:
        return valid_type(elem)
    return kv is not None and kv[0] == "string" and valid_type(kv[1])


def coerce(arg_type: str, value: Any) -> ArgValue:
    """`value` as an argument of `arg_type`; raises ValueError with a short reason."""
    elem, kv = list_elem(arg_type), map_kv(arg_type)
    if elem is not None or kv is not None:
        return _coerce_structured(arg_type, elem, kv, value)
    if arg_type == "string":
        if isinstance(value, str):
            return value
    elif arg_type == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
    elif arg_type in ("int", "uint"):
        return _coerce_int(arg_type, value)
    elif arg_type == "double":
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if number is not None:
            if not math.isfinite(number):   # "inf", "nan", "1e999": no plugin means them
                raise ValueError(f"{value!r} is not a finite double")
            return number
    raise ValueError(f"{value!r} is not a {arg_type}")


def _coerce_structured(arg_type: str, elem: str | None, kv: tuple[str, str] | None, value: Any) -> ArgValue:
    if isinstance(value, str):
        try:
            value = load(value, "argument", _TEXT_LIMITS)
        except YamlError as e:
            raise ValueError(f"{value[:80]!r} is not YAML or JSON for a {arg_type}: {e}") from None
    if elem is not None and isinstance(value, list):
        return [_item(elem, v, f"[{i}]") for i, v in enumerate(value)]
    if kv is not None and isinstance(value, dict):
        return {k: _item(kv[1], v, f"[{k!r}]") for k, v in value.items() if _string_key(k)}
    raise ValueError(f"{value!r} is not a {arg_type}")


def _string_key(key: Any) -> bool:
    if isinstance(key, str):
        return True
    raise ValueError(f"map key {key!r} is not a string")


def _item(arg_type: str, value: Any, where: str) -> ArgValue:
    try:
        return coerce(arg_type, value)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _coerce_int(arg_type: str, value: Any) -> int:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip(), 0)
        except ValueError:
            number = None
    if number is None:
        raise ValueError(f"{value!r} is not an {arg_type}")
    low, high = (0, 2**64 - 1) if arg_type == "uint" else _INT64
    if not low <= number <= high:
        raise ValueError(f"{value!r} is out of range for {arg_type}")
    return UInt(number) if arg_type == "uint" else number


def check_value(arg: Argument, value: Any) -> ArgValue:
    """Coerce and check against the enum; raises ValueError."""
    coerced = coerce(arg.type, value)
    if arg.enum is not None and coerced not in arg.enum:
        allowed = ", ".join(repr(v) for v in arg.enum)
        raise ValueError(f"{coerced!r} is not one of {allowed}")
    return coerced


def bind(declared: Mapping[str, Argument], given: Mapping[str, Any]) -> tuple[ArgumentValues, list[str]]:
    """Defaults overridden by `given`; the second item lists the problems found, one per argument."""
    values: dict[str, ArgValue] = {name: arg.default for name, arg in declared.items()}
    problems: list[str] = []
    for name, raw in given.items():
        arg = declared.get(name)
        if arg is None:
            known = ", ".join(sorted(declared)) or "none"
            problems.append(f"unknown argument {name!r} (declared: {known})")
            continue
        try:
            values[name] = check_value(arg, raw)
        except ValueError as err:
            problems.append(f"argument {name!r}: {err}")
    return ArgumentValues(values), problems
