"""Runs conformance cases through kaipolicy's CEL pipeline: parse -> check -> compile -> evaluate.

Each case is evaluated by the scalar function and, when it has bound variables that vector
mode can take as arrays, by the vector function too. An expected error is met by an error at
any stage (a refusal by the checker counts: rules are always checked, and Google's own
runner counts it the same way). Any other exception escaping the pipeline is a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kaipolicy.errors import InputError, RuleError
from kaipolicy.rules import EvalError
from kaipolicy.rules.expression import Expression, compile_text
from tests import cel_oracle
from tests.conformance.suite import Case
from tests.conformance.values import Typed, Unsupported, equal, plain, to_type, to_typed, type_of

WANTS_ERROR = ("eval_error", "any_eval_errors")
VECTOR_DTYPES = {"int": np.int64, "uint": np.uint64, "double": np.float64, "bool": np.bool_, "string": np.str_}
VECTOR_LENGTH = 2


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str = ""        # what went wrong, or how an expected error came
    crashed: bool = False   # an exception other than RuleError or EvalError escaped
    vector: str = ""        # "" (not applicable), "agrees", "falls back" (raised EvalError) or "differs"


def run_case(case: Case) -> Outcome:
    try:
        try:
            return _run(case)
        except Unsupported as err:
            return _compile_only(case, str(err))
    except Exception as err:  # noqa: BLE001 - a crash is an outcome here, reported with its type
        return Outcome(False, f"crash: {type(err).__name__}: {err}", crashed=True)


def _compile_only(case: Case, feature: str) -> Outcome:
    """A case whose values kaipolicy cannot represent still goes through parse and check (no crash)."""
    variables = {name: _type_or_dyn(decl) for name, decl in case.type_env.items()}
    variables |= {name: "dyn" for name in case.bindings if name not in variables}
    try:
        compile_text(case.expr, variables)
    except InputError as err:
        return Outcome(False, f"not evaluated ({feature}); refused: {_first_problem(err)}")
    return Outcome(False, f"not evaluated ({feature})")


def _first_problem(err: InputError) -> str:
    if isinstance(err, RuleError) and err.diagnostics:
        return f"{err.diagnostics[0].code} {err.diagnostics[0].message}"
    return str(err)


def _type_or_dyn(decl: Any) -> str:
    try:
        return to_type(decl)
    except Unsupported:
        return "dyn"


def _environment(case: Case) -> tuple[dict[str, str], dict[str, Typed]]:
    """(declared types, bound values); a binding the case does not declare is typed by its value."""
    bound = {name: to_typed(value) for name, value in case.bindings.items()}
    variables = {name: to_type(decl) for name, decl in case.type_env.items()}
    variables |= {name: type_of(value) for name, value in bound.items() if name not in variables}
    return variables, bound


def _run(case: Case) -> Outcome:
    variables, bound = _environment(case)
    try:
        expression = compile_text(case.expr, variables)
    except InputError as err:
        return Outcome(case.expect in WANTS_ERROR, f"refused: {_first_problem(err)}")
    if case.deduced_type is not None and expression.type != to_type(case.deduced_type):
        return Outcome(False, f"checked type {expression.type}, want {to_type(case.deduced_type)}")
    if case.check_only:
        return Outcome(True)
    values = [plain(bound[name]) if name in bound else None for name in expression.variables]
    scalar = _scalar(case, expression, values)
    vector = _vector(case, variables, bound, scalar)
    return Outcome(scalar.passed and vector != "differs", scalar.detail, vector=vector)


def _scalar(case: Case, expression: Expression, values: list[Any]) -> Outcome:
    try:
        got = expression.scalar(*values)
    except EvalError as err:
        return Outcome(case.expect in WANTS_ERROR, f"error: {err.message}")
    if case.expect in WANTS_ERROR:
        return Outcome(False, f"evaluated to {got!r}, want an error")
    want: Typed = to_typed(case.value) if case.value is not None else ("bool", True)
    if equal(want, got, expression.type):
        return Outcome(True)
    return Outcome(False, f"evaluated to {got!r} ({expression.type}), want {plain(want)!r} ({want[0]})")


def _vector(case: Case, variables: dict[str, str], bound: dict[str, Typed], scalar: Outcome) -> str:
    """Evaluate with every bound scalar variable as an array of VECTOR_LENGTH equal elements."""
    per_node = frozenset(n for n, t in variables.items() if t in VECTOR_DTYPES and n in bound)
    if not per_node:
        return ""
    expression = compile_text(case.expr, variables, vector_names=per_node)
    if expression.vector is None:
        return ""
    values = [np.full(VECTOR_LENGTH, plain(bound[n]), dtype=VECTOR_DTYPES[variables[n]]) if n in per_node
              else plain(bound[n]) if n in bound else None for n in expression.variables]
    try:
        result = expression.vector(*values)
    except EvalError:
        return "falls back"
    if case.expect in WANTS_ERROR or not scalar.passed:
        return "differs"
    want: Typed = to_typed(case.value) if case.value is not None else ("bool", True)
    items = [item.item() if isinstance(item, np.generic) else item for item in np.asarray(result).tolist()]
    return "agrees" if all(equal(want, item, expression.type) for item in items) else "differs"


def run_with_cel_cpp(case: Case) -> bool:
    """Whether Google's runtime (cel-expr-python) meets the case, judged as ours is (a case inside
    the subset only: its values are ones both sides represent)."""
    variables, bound = _environment(case)
    if case.check_only:
        return cel_oracle.compiles(case.expr, variables)
    ok, got = cel_oracle.evaluate(case.expr, variables, {name: plain(value) for name, value in bound.items()})
    if case.expect in WANTS_ERROR or not ok:
        return case.expect in WANTS_ERROR and not ok
    want: Typed = to_typed(case.value) if case.value is not None else ("bool", True)
    return equal(want, got, "dyn")
