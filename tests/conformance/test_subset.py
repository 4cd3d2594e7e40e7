"""Which conformance cases are inside the documented subset: decided by the case alone."""

from __future__ import annotations

import pytest

from tests.conformance.needs import Call, scan
from tests.conformance.subset import exclusion
from tests.conformance.suite import Case
from tests.conformance.textproto import Message

INT = Message({"primitive": ["INT64"]})
LIST = Message({"list_type": [Message({"elem_type": [INT]})]})


def _case(expr: str, file: str = "basic", **fields: object) -> Case:
    return Case(file, "s", "t", expr, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("case", "feature"), [
    (_case("1 + 1"), None),
    (_case("{'content-type': 1}.`content-type`"), None),          # a quoted name is not the word type
    (_case("'type(x)' + 'int'"), None),                            # nor are words inside literals
    (_case("x.contains('a') && size(x) == x.size()", type_env={"x": INT}), None),
    (_case("[1, 2].map(x, x > 1, x * 2).all(y, y > 0) && [1].exists_one(z, z == 1)"), None),
    (_case("'abc'.matches('b') && matches('abc', 'c') && int('1') == 1 && dyn(1) == 1"), None),
    (_case("true ? .5 : 1.0"), None),                              # a ternary, not optional syntax
    (_case("x", "proto3"), "protobuf messages"),
    (_case("x", "proto4"), "protobuf messages"),                   # a proto file of a later suite
    (_case("[1].distinct()", "lists_ext"), "extension libraries"),
    (_case("[1].distinct()", "anything_ext"), "extension libraries"),
    (_case("[3, 1].sort() == [1, 3]", "lists"), "extension libraries"),   # a method CEL does not define
    (_case("sets.contains([1], [1])"), "extension libraries"),     # a standard name under a namespace
    (_case("math.greatest(1, 2)"), "extension libraries"),
    (_case("'a'.contains('a', 'b')"), "extension libraries"),      # not CEL's contains (one argument)
    (_case("cel.bind(x, 1, x + 1)"), "extension libraries"),
    (_case("{'a': 1}.all(k, v, v > 0)"), "two-variable comprehensions"),
    (_case("type(1) == int"), "type() and type values"),
    (_case("[int, uint]"), "type() and type values"),
    (_case("timestamp('2020-01-01T00:00:00Z')"), "timestamps and durations"),
    (_case("x.getHours()", type_env={"x": INT}), "timestamps and durations"),
    (_case("x.?y"), "optional values"),
    (_case("[1, ?x][0]"), "optional values"),
    (_case("{?'k': x}"), "optional values"),
    (_case("optional.of(1).hasValue()"), "optional values"),
    (_case("x.orValue(1)", type_env={"x": INT}), "optional values"),
    (_case("TestAllTypes{single_int64: 1}"), "protobuf messages"),
    (_case("a.b.C{}"), "protobuf messages"),
    (_case("GlobalEnum.GAZ == 2"), "containers and qualified names"),    # a name the case never declares
    (_case("undeclared + 1", expect="eval_error"), None),          # ... unless it expects that to fail
    (_case("x", disable_check=True), "evaluation without the type checker"),
    (_case("y", container="x"), "containers and qualified names"),
    (_case("a.b", type_env={"a.b": INT}), "containers and qualified names"),
    (_case("x", type_env={"x": Message({"message_type": [b"T"]})}), "protobuf messages"),
    (_case("x", type_env={"x": INT}, value=Message({"type_value": [b"int"]})), "type values"),
    (_case("x", expect="unknown"), "partial evaluation (unknowns)"),
    (_case("x[0]", type_env={"x": LIST}), None),
])
def test_a_case_is_outside_only_for_a_named_feature(case: Case, feature: str | None) -> None:
    assert exclusion(case) == feature


@pytest.mark.parametrize(("expr", "calls"), [
    ("size(x) + x.size()", [Call("size", False, 1), Call("size", True, 0)]),
    ("f()", [Call("f", False, 0)]),
    ("a.b.f(1, [2, 3], {4: 5})", [Call("f", False, 3, "a.b")]),
    ("x.y.f(1)", [Call("f", True, 1)]),                            # x is a variable: a method of x.y
    ("(a).f(1)", [Call("f", True, 1)]),
    ("l.map(e, e.f(2))", [Call("map", True, 2), Call("f", True, 1)]),   # e is the macro's variable
    ("'f(1)'.size()", [Call("size", True, 0)]),
])
def test_the_scanner_tells_functions_methods_and_namespaces_apart(expr: str, calls: list[Call]) -> None:
    assert scan(expr, {"x", "l"}).calls == calls
