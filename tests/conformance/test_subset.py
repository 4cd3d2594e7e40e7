"""Which conformance cases are inside the documented subset: decided by the case alone."""

from __future__ import annotations

import pytest

from tests.conformance.subset import exclusion
from tests.conformance.suite import Case
from tests.conformance.textproto import Message


def _case(expr: str, file: str = "basic", **fields: object) -> Case:
    return Case(file, "s", "t", expr, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("case", "feature"), [
    (_case("1 + 1"), None),
    (_case("{'content-type': 1}.`content-type`"), None),          # a quoted name is not the word type
    (_case("'type(x)' + 'int'"), None),                            # nor are words inside literals
    (_case("x", "proto3"), "protobuf messages"),
    (_case("type(1) == int"), "type() and type values"),
    (_case("[int, uint]"), "type() and type values"),
    (_case("timestamp('2020-01-01T00:00:00Z')"), "timestamps and durations"),
    (_case("x.?y"), "optional values"),
    (_case("TestAllTypes{single_int64: 1}"), "protobuf messages"),
    (_case("math.greatest(1, 2)"), "extension libraries"),
    (_case("x", disable_check=True), "evaluation without the type checker"),
    (_case("y", container="x"), "containers and qualified names"),
    (_case("a.b", type_env={"a.b": Message({"primitive": ["INT64"]})}), "containers and qualified names"),
    (_case("x", type_env={"x": Message({"message_type": [b"T"]})}), "protobuf messages"),
    (_case("x", value=Message({"type_value": [b"int"]})), "type values"),
    (_case("x", expect="unknown"), "partial evaluation (unknowns)"),
])
def test_a_case_is_outside_only_for_a_named_feature(case: Case, feature: str | None) -> None:
    assert exclusion(case) == feature
