"""What a rule can touch at run time: CEL values only, never a Python object's attributes.

Generated code reaches a value of static type `dyn` only through these helpers: a field of a
map is its key, a field of a vocabulary object is the attribute its `FieldSpec` names (looked
up by the object's class in the `Fields` table the compiler builds), and anything else is a
"no such field" error. Nothing here calls `getattr` with a name the rule wrote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from kaipolicy.rules.kinds import CEL_KINDS, has_key, kind
from kaipolicy.rules.runtime import list_index
from kaipolicy.rules.vocabulary import TypeSpec

# class -> {CEL field name -> Python attribute}: the vocabulary's declared fields, by class
Fields = Mapping[type, Mapping[str, str]]

def fields_by_class(types: Iterable[TypeSpec]) -> dict[type, dict[str, str]]:
    """The table `select` reads: for each class a vocabulary type names, its declared fields."""
    out: dict[type, dict[str, str]] = {}
    for spec in types:
        for cls in spec.python_types:
            out.setdefault(cls, {f.name: f.attr for f in spec.fields.values()})
    return out


_SCALARS = (bool, int, float, str, bytes, np.integer, np.floating, np.bool_)


def cel_kind(value: Any, fields: Fields | None = None) -> str:
    """The CEL type name of a run-time value, for messages (never the value's repr)."""
    found = kind(value)
    if found in CEL_KINDS:
        return found
    return "object" if fields is None or type(value) not in fields else type(value).__name__


def is_scalar(value: Any) -> bool:
    return isinstance(value, _SCALARS)


def select(value: Any, name: str, fields: Fields) -> Any:
    """`value.name` on a dyn value: a map key, or a declared field of a vocabulary object."""
    if isinstance(value, dict):
        return value[name]
    attr = fields.get(type(value), {}).get(name)
    if attr is None:
        raise TypeError(f"no such field {name!r} on a value of type {cel_kind(value, fields)}")
    return getattr(value, attr)


def has(value: Any, name: str, fields: Fields) -> bool:
    """`has(value.name)` on a dyn value."""
    if isinstance(value, dict):
        return name in value
    declared = fields.get(type(value))
    if declared is None:
        raise TypeError(f"has() does not apply to a value of type {cel_kind(value)}")
    attr = declared.get(name)
    return attr is not None and getattr(value, attr, None) is not None


def index(container: Any, key: Any) -> Any:
    """`container[key]` on a dyn value: lists by int position (a double holding a whole number
    too), maps by key (true is not 1, 1.0 finds 1); nothing else."""
    if isinstance(container, list):
        return list_index(container, key)
    if isinstance(container, dict):
        if not has_key(container, key):
            raise KeyError(key)
        return container[key]
    raise TypeError(f"no such overload: {cel_kind(container)}[{cel_kind(key)}]")


def size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, dict)):
        return len(value)
    raise TypeError(f"no such overload: size({cel_kind(value)})")


def iterable(value: Any) -> Any:
    """A comprehension's range on a dyn value: a list, or a map's keys."""
    if isinstance(value, (list, dict)):
        return value
    raise TypeError(f"a comprehension needs a list or a map, not a value of type {cel_kind(value)}")


def text(value: Any) -> str:
    """A dyn operand of a string function."""
    if isinstance(value, str):
        return value
    raise TypeError(f"no such overload: a string function on a value of type {cel_kind(value)}")


def boolean(value: Any) -> bool:
    """A dyn operand of `!`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"no such overload: !{cel_kind(value)}")


def condition(value: Any) -> bool:
    """A dyn `when`, `deny` or `allow`: a bool, nothing else."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"a condition must be a bool, not a value of type {cel_kind(value)}")


def number(value: Any) -> Any:
    """A dyn score: an int or a double, nothing else."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        return value
    raise TypeError(f"a score must be a number, not a value of type {cel_kind(value)}")


def string(value: Any) -> str:
    """A dyn message or annotation: a string, nothing else."""
    if isinstance(value, str):
        return value
    raise TypeError(f"a message must be a string, not a value of type {cel_kind(value)}")


def key(value: Any) -> list[Any]:
    """A dyn order key: a list of scalars, or of values a vocabulary function made to be
    compared (they define their own order); never maps, lists or the model's objects."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if not isinstance(item, _SCALARS) and (isinstance(item, (list, dict, tuple, np.ndarray))
                                               or not _has_own_order(type(item))):
            raise TypeError(f"an order key holds bools, numbers, strings or bytes, not a value of type "
                            f"{cel_kind(item)}")
    return items


def _has_own_order(cls: type) -> bool:
    known = _OWN_ORDER.get(cls)
    if known is None:
        known = _OWN_ORDER[cls] = any("__lt__" in vars(c) for c in cls.__mro__ if c is not object)
    return known


_OWN_ORDER: dict[type, bool] = {}   # per class: a class's methods do not change once defined


SANDBOX_HELPERS: dict[str, Any] = {
    "_sel": select, "_has": has, "_idx": index, "_size": size, "_iter": iterable,
    "_str": text, "_bool": boolean, "_cond": condition, "_number": number, "_string": string, "_key": key,
}
