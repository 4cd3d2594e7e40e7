"""The CEL case tables (tests/rules/cases/*.yaml) through our compiler, with two oracles: celpy and
Google's runtime (cel-expr-python, on cel-cpp). A case opts out of one with `celpy: false` or
`cel: false` (and a comment saying why); `want_kind` checks the CEL type of the result too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from rules_fixtures import normalise, same

from kaipolicy.errors import RuleError
from kaipolicy.rules import EvalError
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.runtime import kind
from kaipolicy.rules.vocabulary import type_of_value
from tests import cel_oracle

CASES_DIR = Path(__file__).resolve().parents[2] / "rules" / "cases"


def load_cases() -> list[Any]:
    params = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text(encoding="utf-8")):
            params.append(pytest.param(case, id=f"{path.stem}: {case['note']}"))
    return params


def celpy_result(expr: str, variables: dict[str, Any]) -> tuple[bool, Any]:
    """(ok, value) from celpy's interpreter."""
    env = celpy.Environment()
    program = env.program(env.compile(expr))
    try:
        result = program.evaluate({k: celpy.json_to_cel(v) for k, v in variables.items()})
    except Exception:  # noqa: BLE001 - celpy raises CELEvalError or Python errors from its evaluator
        return False, None
    if isinstance(result, celpy.CELEvalError):
        return False, None
    return True, normalise(result)


@pytest.mark.parametrize("case", load_cases())
def test_case_matches_its_expectation_and_celpy(case: dict[str, Any]) -> None:
    variables: dict[str, Any] = case.get("vars") or {}
    types = {name: type_of_value(value) for name, value in variables.items()} | (case.get("types") or {})
    if "want_check" in case:
        with pytest.raises(RuleError) as info:
            compile_text(case["expr"], types)
        assert case["want_check"] in {d.code for d in info.value.diagnostics}
        return
    expression = compile_text(case["expr"], types)
    values = [variables[name] for name in expression.variables]
    if "want_error" in case:
        with pytest.raises(EvalError) as err:
            expression.scalar(*values)
        assert case["want_error"] in str(err.value)
    else:
        got = expression.scalar(*values)
        assert same(normalise(got), case["want"]), f"got {got!r}, want {case['want']!r}"
        if "want_kind" in case:
            assert kind(got) == case["want_kind"], f"got a {kind(got)}, want a {case['want_kind']}"
    oracles = {"celpy": lambda: celpy_result(case["expr"], variables),
               "cel": lambda: cel_oracle.evaluate(case["expr"], types, variables)}
    for oracle_name, run in oracles.items():
        if not case.get(oracle_name, True):
            continue
        ok, oracle = run()
        oracle = normalise(oracle)
        if "want_error" in case:
            assert not ok, f"{oracle_name} evaluated to {oracle!r}"
        else:
            assert ok and same(oracle, normalise(got)), f"{oracle_name}: {oracle!r}, ours: {got!r}"


def test_there_are_enough_cases() -> None:
    assert len(load_cases()) >= 80
