"""Validate a parsed scenario document: numbers, the JSON Schema, then the rules beyond it.

`validate_scenario` raises `ScenarioError(file, path, message)` for the first problem in
document order, with a key path such as `jobs[j0].tasks[j0-1].state` (list elements are
named by their `name` when they have one, else by index). The rules the schema cannot state
live in `scenario_checks`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, cast

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from kaipolicy.cache.scenario_checks import NODE_HOLDING_STATES, Problem, check_numbers, check_references
from kaipolicy.cache.scenario_paths import render, show
from kaipolicy.errors import ScenarioError
from kaipolicy.paths import data_dir

__all__ = ["NODE_HOLDING_STATES", "SCHEMA_PATH", "content_key", "load_schema", "schema_errors", "validate_scenario"]

SCHEMA_PATH = data_dir("schemas") / "scenario.schema.json"
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean (true/false)",
    "null": "null",
}
# When several errors sit at one place, the first of these kinds is reported.
_KIND_RANK = {"type": 0, "required": 1, "additionalProperties": 2, "enum": 3, "const": 3}


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The scenario JSON Schema (draft 2020-12), read once from `schemas/`."""
    with SCHEMA_PATH.open(encoding="utf-8") as fh:
        schema: dict[str, Any] = json.load(fh)
    return schema


@lru_cache(maxsize=1)
def _validator() -> Validator:
    # The same schema with every `$ref` replaced by its target: jsonschema resolves a `$ref`
    # each time it meets one, which doubled the time to validate a 2 MB scenario.
    schema = load_schema()
    return _CheckedOnce(_inline(schema, schema.get("$defs", {})))


# ---------------------------------------------------------------- equal parts checked once
# A large scenario repeats itself: 141,000 pods of 8,001 distinct shapes, a few queue names and
# requests over and over. Whether a part of the document is valid against a subschema depends
# only on the two (the scenario schema has no keyword that looks beyond the part: no
# unevaluated*, no $dynamicRef), so a part equal to one already found valid against the same
# subschema is not checked again. Invalid parts are always checked, so the errors, and the one
# reported, are exactly those of the plain validator (test_scenario_schema compares them).

#: The (subschema id, content key) pairs found valid in the document being checked.
_FOUND_VALID: ContextVar[set[tuple[int, Any]] | None] = ContextVar("found_valid", default=None)
_SCALARS = (str, int, float, bool, type(None))


def content_key(value: Any) -> Any:
    """A key two parts share only when they are the same data with the same Python types (1,
    1.0 and True differ): for a number, a text, null, or a mapping of text keys to those. None
    for anything larger, which is checked part by part instead."""
    kind = type(value)
    if kind in _SCALARS:
        return (kind, value)
    if kind is dict:
        parts = []
        for k, v in value.items():
            if type(k) is not str or type(v) not in _SCALARS:
                return None
            parts.append((k, type(v), v))
        return (dict, frozenset(parts))
    return None


def _descend_once(validator: Any, value: Any, subschema: Any, path: Any,
                  schema_path: Any = None) -> Iterator[ValidationError]:
    """validator.descend, unless `value` equals a part already found valid against `subschema`."""
    found = _FOUND_VALID.get()
    key = None
    if found is not None:
        content = content_key(value)
        if content is not None:
            key = (id(subschema), content)
            if key in found:
                return
    failed = False
    for err in validator.descend(value, subschema, path=path, schema_path=schema_path):
        failed = True
        yield err
    if found is not None and key is not None and not failed:
        found.add(key)


def _properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """Draft 2020-12 `properties`, each value through _descend_once."""
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name in instance:
            yield from _descend_once(validator, instance[name], subschema, name, name)


_PLAIN_ITEMS = Draft202012Validator.VALIDATORS["items"]


def _items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """Draft 2020-12 `items`, each item through _descend_once (the plain keyword after
    `prefixItems` or for `items: false`, which the scenario schema does not use)."""
    if "prefixItems" in schema or not isinstance(items, dict):
        yield from _PLAIN_ITEMS(validator, items, instance, schema)
        return
    if not validator.is_type(instance, "array"):
        return
    for index, item in enumerate(instance):
        yield from _descend_once(validator, item, items, index)


# (jsonschema's extend is untyped; it returns a validator class)
_CheckedOnce = cast("type[Draft202012Validator]", validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator, {"properties": _properties, "items": _items}))


def _inline(part: Any, defs: dict[str, Any]) -> Any:
    if isinstance(part, dict):
        ref = part.get("$ref", "")
        if ref.startswith("#/$defs/"):
            # a `$ref` beside other keywords applies both; here those are only annotations
            target = dict(_inline(defs[ref[len("#/$defs/"):]], defs))
            target.update((k, _inline(v, defs)) for k, v in part.items() if k != "$ref")
            return target
        return {k: _inline(v, defs) for k, v in part.items() if k != "$defs"}
    if isinstance(part, list):
        return [_inline(v, defs) for v in part]
    return part


def validate_scenario(doc: object, file: str) -> None:
    """Raise ScenarioError for the first problem in `doc` (in document order); else return."""
    if doc is None:
        raise ScenarioError(file, "", "the scenario is empty")
    if not isinstance(doc, dict):
        raise ScenarioError(file, "", f"expected a mapping at the top level, got {show(doc)}")
    try:
        check_numbers(doc)
        errors = schema_errors(doc)
        if errors:
            path, message = _describe(doc, _pick(doc, errors))
            raise ScenarioError(file, path, message)
        check_references(doc)
    except Problem as p:
        raise ScenarioError(file, p.path, p.message) from None


def schema_errors(doc: Any, once: bool = True) -> list[ValidationError]:
    """Every error of `doc` against the schema, as jsonschema yields them. `once=False` checks
    every part of the document, even one equal to a part already found valid (the same errors,
    slower; for the tests that compare the two)."""
    if not once:
        return list(_plain_validator().iter_errors(doc))
    found = _FOUND_VALID.set(set())
    try:
        return list(_validator().iter_errors(doc))
    finally:
        _FOUND_VALID.reset(found)


@lru_cache(maxsize=1)
def _plain_validator() -> Validator:
    return Draft202012Validator(_validator().schema)


# ---------------------------------------------------------------- schema errors
# jsonschema's stubs allow an error's schema to be a boolean and its fields to be unset (for
# errors built by hand); iter_errors sets them all on every error it yields, and the scenario
# schema has no boolean subschemas. These three read them as what they are here.


def _schema(err: ValidationError) -> Mapping[str, Any]:
    """The subschema that failed."""
    return cast("Mapping[str, Any]", err.schema)


def _expected(err: ValidationError) -> Any:
    """The failing keyword's value in the schema (JSON data)."""
    return err.validator_value


def _instance(err: ValidationError) -> Any:
    """The part of the document that failed (JSON data)."""
    return err.instance


def _leaves(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """Errors, with anyOf/oneOf errors lacking a message of their own replaced by their causes."""
    for err in errors:
        if err.context and err.validator in ("anyOf", "oneOf") and "x-message" not in _schema(err):
            yield from _leaves(err.context)
        else:
            yield err


def _error_path(err: ValidationError) -> list[Any]:
    """The instance path an error is reported at (an unknown or bad key is appended)."""
    path: list[Any] = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        extra = _unknown_keys(err)
        if extra:
            path.append(extra[0])
    elif "propertyNames" in err.absolute_schema_path:
        path.append(err.instance)  # the instance is a map key: point at it
    return path


def _unknown_keys(err: ValidationError) -> list[Any]:
    allowed = _schema(err).get("properties", {})
    return [k for k in _instance(err) if k not in allowed]


def _position(doc: Any, path: Sequence[Any]) -> tuple[int, ...]:
    """Where `path` lies in document order (dict key order, list index)."""
    pos: list[int] = []
    node = doc
    for key in path:
        if isinstance(node, dict) and key in node:
            pos.append(list(node).index(key))
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            pos.append(key)
            node = node[key]
        else:
            pos.append(1 << 30)
            break
    return tuple(pos)


def _pick(doc: Any, errors: list[ValidationError]) -> ValidationError:
    leaves = list(_leaves(errors))
    return min(
        leaves,
        key=lambda e: (_position(doc, _error_path(e)), _KIND_RANK.get(str(e.validator), 9)),
    )


def _describe(doc: Any, err: ValidationError) -> tuple[str, str]:
    path = _error_path(err)
    kind = err.validator
    value = _instance(err)
    schema = _schema(err)
    expected = _expected(err)
    in_key_name = "propertyNames" in err.absolute_schema_path
    if kind == "additionalProperties":
        extra = _unknown_keys(err)
        allowed = ", ".join(schema.get("properties", {}))
        msg = f"unknown key {show(extra[0] if extra else '?')} (allowed: {allowed})"
    elif kind == "required":
        missing = [k for k in expected if not isinstance(value, dict) or k not in value]
        msg = f"missing required key {show(missing[0] if missing else '?')}"
    elif kind == "type":
        wanted: list[str] = expected if isinstance(expected, list) else [expected]  # JSON Schema `type`
        words = [_TYPE_WORDS.get(t, t) for t in wanted]
        msg = f"expected {_join_or(words)}, got {show(value)}{_type_hint(wanted, value)}"
        if in_key_name:
            msg = f"map keys must be strings, got {show(value)} (quote it)"
    elif kind == "enum":
        options = ", ".join(str(o) for o in expected)
        msg = f"{show(value)} is not one of {options}"
    elif kind == "const":
        msg = f"expected {show(expected)}, got {show(value)}"
    elif kind == "minimum":
        msg = f"expected a number >= {expected}, got {show(value)}"
    elif kind == "maximum":
        msg = f"expected a number <= {expected}, got {show(value)}"
    elif kind == "minItems":
        msg = f"expected at least {expected} item(s), got {len(value)}"
    elif kind == "minLength":
        msg = f"expected a non-empty string, got {show(value)}"
    elif "x-message" in schema:
        msg = str(schema["x-message"]).format(value=show(value))
    else:
        msg = err.message
    return render(doc, path), msg


def _type_hint(wanted: list[str], value: Any) -> str:
    """Why YAML read the value as another type than meant, when that is the likely story."""
    if {"number", "integer"} & set(wanted) and isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return ""
        return " (YAML 1.1 reads a number without a dot or with an unsigned exponent as text: write " \
               "64000000000 or 6.4e+10, not 64e9)"
    if "string" in wanted and isinstance(value, bool):
        return " (YAML 1.1 reads yes/no/on/off/true/false as booleans: quote it to make it text)"
    if "string" in wanted and not isinstance(value, (str, dict, list)):
        return " (quote it to make it text)"
    return ""


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]
