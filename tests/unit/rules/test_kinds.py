"""CEL's cross-kind equality, order and membership, for values the checker saw as dyn."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kaipolicy.rules.kinds import UInt, compare, contains, equals, kind, new_map

NAN = math.nan


@pytest.mark.parametrize(("value", "want"), [
    (True, "bool"), (1, "int"), (UInt(1), "uint"), (1.0, "double"), ("a", "string"), (b"a", "bytes"),
    (None, "null"), ([1], "list"), ((1,), "list"), ({1: 2}, "map"),
])
def test_every_value_has_its_cel_kind(value: Any, want: str) -> None:
    assert kind(value) == want


@pytest.mark.parametrize(("a", "b", "want"), [
    (1, 1.0, True), (UInt(1), 1, True), (2**63 - 1, 2.0**63, True),   # numbers meet as CEL says
    (True, 1, False), (0, False, False), ("1", 1, False), (None, 0, False),
    (NAN, NAN, False), (1, NAN, False),
    ([1, "a"], [1.0, "a"], True), ([True], [1], False), ([1], [1, 2], False),
    ({"a": 1}, {"a": 1.0}, True), ({True: 1}, {1: 1}, False), ({"a": 1}, {"b": 1}, False),
])
def test_equality_across_kinds(a: Any, b: Any, want: bool) -> None:
    assert equals(a, b) is want
    assert equals(b, a) is want


@pytest.mark.parametrize(("op", "a", "b", "want"), [
    ("<", 1, 1.5, True), ("<", 2**63 - 1, 2.0**63, False), (">=", 2**63 - 1, 2.0**63, True),
    ("<", UInt(2**64 - 1), 2**63, False), ("<=", -1, UInt(0), True), ("<", 1, NAN, False),
    ("<", "a", "b", True), ("<", b"a", b"b", True), ("<", False, True, True),
])
def test_order_across_numeric_kinds_and_within_others(op: str, a: Any, b: Any, want: bool) -> None:
    assert compare(op, a, b) is want


@pytest.mark.parametrize(("a", "b"), [(True, 1), ("a", 1), ([1], [2]), ({}, {}), (None, None)])
def test_order_is_an_error_where_cel_has_none(a: Any, b: Any) -> None:
    with pytest.raises(TypeError, match="no such overload"):
        compare("<", a, b)


@pytest.mark.parametrize(("item", "container", "want"), [
    (1, [True, "a"], False), (1, [1.0], True), (True, {1: "x"}, False), (1.0, {1: "x"}, True),
    ("k", {"k": 1}, True),
])
def test_membership_uses_cel_equality(item: Any, container: Any, want: bool) -> None:
    assert contains(item, container) is want


@pytest.mark.parametrize(("entries", "error"), [
    ([("a", 1), ("a", 2)], "duplicate map key"), ([(1, 1), (UInt(1), 2)], "duplicate map key"),
    ([(1.5, 1)], "invalid map key type: double"), ([(None, 1)], "invalid map key type: null"),
    ([(1, "a"), (True, "b")], "cannot be used beside"),
])
def test_a_computed_map_refuses_repeated_and_invalid_keys(entries: list[tuple[Any, Any]], error: str) -> None:
    with pytest.raises((TypeError, ValueError), match=error):
        new_map(entries)


def test_a_computed_map_keeps_its_entries() -> None:
    assert new_map([("a", 1), (UInt(2), "b"), (False, None)]) == {"a": 1, 2: "b", False: None}
