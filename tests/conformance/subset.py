"""The documented subset of CEL (docs/policy-language.md, "Conformance"): which cases are in it.

`exclusion(case)` names the feature that puts a case outside, or returns None. The rules look
only at the case: its file's name, flags, declarations, bindings, expected value and what its
expression calls and names (`needs.py`, from tokens), never at how kaipolicy fares on it, so a
bug cannot move a case out of the subset. A case no rule recognises stays inside.
"""

from __future__ import annotations

from tests.conformance.needs import Call, Needs, scan
from tests.conformance.suite import Case
from tests.conformance.values import Unsupported, to_type, to_typed

EXTENSIONS = "extension libraries"
MESSAGES = "protobuf messages"
OPTIONALS = "optional values"
QUALIFIED = "containers and qualified names"
TIMESTAMPS = "timestamps and durations"
TYPE_VALUES = "type() and type values"
TWO_VARIABLES = "two-variable comprehensions"
# Whole files about one feature outside; any other `*_ext` file is an extension library, any
# other `proto*` file is about messages (cel-spec's naming), and every case is read on its own too.
FILES_OUT = {
    "dynamic": "protobuf messages and well-known types",
    "enums": "protobuf enums",
    "wrappers": "protobuf wrapper types",
    "namespace": QUALIFIED,
    "timestamps": TIMESTAMPS,
    "unknowns": "partial evaluation (unknowns)",
    "optionals": OPTIONALS,
    "macros2": TWO_VARIABLES,
}
# CEL's standard functions by name: how each may be called (receiver?, argument count) -> the
# feature outside the subset it needs, or None. Any other function belongs to an extension.
_ACCESSORS = ("getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
              "getMilliseconds", "getMinutes", "getMonth", "getSeconds")
STANDARD: dict[str, dict[tuple[bool, int], str | None]] = {
    "size": {(False, 1): None, (True, 0): None},
    "contains": {(True, 1): None}, "startsWith": {(True, 1): None}, "endsWith": {(True, 1): None},
    "matches": {(False, 2): None, (True, 1): None},
    **{name: {(False, 1): None} for name in ("int", "uint", "double", "string", "bytes", "bool", "dyn")},
    "has": {(False, 1): None},
    "all": {(True, 2): None, (True, 3): TWO_VARIABLES}, "exists": {(True, 2): None, (True, 3): TWO_VARIABLES},
    "exists_one": {(True, 2): None, (True, 3): TWO_VARIABLES},
    "map": {(True, 2): None, (True, 3): None}, "filter": {(True, 2): None},
    "type": {(False, 1): TYPE_VALUES},
    "timestamp": {(False, 1): TIMESTAMPS}, "duration": {(False, 1): TIMESTAMPS},
    **{name: {(True, 0): TIMESTAMPS, (True, 1): TIMESTAMPS} for name in _ACCESSORS},
}
OPTIONAL_FUNCTIONS = frozenset({"hasValue", "orValue", "or", "value", "optMap", "optFlatMap"})
# Names of types, which as values (not calls) are type values.
TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
                        "dyn"})


def exclusion(case: Case, *, by_file: bool = True) -> str | None:
    """The feature outside the documented subset that this case needs, or None when it is inside.
    `by_file=False` judges the case as if its file's name were new (see the tests)."""
    return ((_file(case.file) if by_file else None) or _flags(case) or _expression(case)
            or _unsupported_values(case))


def _file(name: str) -> str | None:
    if name in FILES_OUT:
        return FILES_OUT[name]
    if name.endswith("_ext"):
        return EXTENSIONS
    if name.startswith("proto"):
        return MESSAGES
    return None


def _flags(case: Case) -> str | None:
    if case.disable_check:
        return "evaluation without the type checker"
    if case.container:
        return QUALIFIED
    if case.functions:
        return "function declarations"
    if case.disable_macros:
        return "parsing without macros"
    if case.expect in ("unknown", "any_unknowns"):
        return "partial evaluation (unknowns)"
    if any("." in name for name in (*case.type_env, *case.bindings)):
        return QUALIFIED
    return None


def _expression(case: Case) -> str | None:
    variables = set(case.type_env) | set(case.bindings)
    needs = scan(case.expr, variables)
    if needs.optional_syntax:
        return OPTIONALS
    if needs.structs:
        return MESSAGES
    for call in needs.calls:
        feature = _call_feature(call)
        if feature is not None:
            return feature
    return _names_feature(case, needs, variables)


def _call_feature(call: Call) -> str | None:
    if call.namespace:
        return OPTIONALS if call.namespace == "optional" else EXTENSIONS
    forms = STANDARD.get(call.name)
    if forms is not None and (call.receiver, call.args) in forms:
        return forms[(call.receiver, call.args)]
    return OPTIONALS if call.receiver and call.name in OPTIONAL_FUNCTIONS else EXTENSIONS


def _names_feature(case: Case, needs: Needs, variables: set[str]) -> str | None:
    """Type names read as values; names nothing declares that the case expects to resolve
    (enum constants, message types, names in a container)."""
    undeclared = needs.names - variables - needs.bound
    if undeclared & TYPE_NAMES:
        return TYPE_VALUES
    if undeclared and case.expect not in ("eval_error", "any_eval_errors"):
        return QUALIFIED
    return None


def _unsupported_values(case: Case) -> str | None:
    try:
        for decl in case.type_env.values():
            to_type(decl)
        for value in case.bindings.values():
            to_typed(value)
        if case.value is not None:
            to_typed(case.value)
        if case.deduced_type is not None:
            to_type(case.deduced_type)
    except Unsupported as err:
        return str(err)
    return None
