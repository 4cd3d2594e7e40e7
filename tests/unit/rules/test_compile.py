"""Each rule's scalar, vector and message forms evaluate exactly what was written, and every
evaluation stays within its budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rules_fixtures import Node, NodeArrays, Task

from kaipolicy.rules import EvalError, load_bundle
from kaipolicy.rules.cost import Meter, OverBudget
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.runtime import regex
from kaipolicy.rules.vocabulary import Vocabulary

Write = Callable[[str, str], Path]

# Each form uses its own regexes and non-finite constants: numbered from 1 in a shared
# namespace, the message's would overwrite the deny's (issue 8, class 2).
FORMS = """\
plugin: forms
rules:
  - name: regexes
    hook: predicate
    deny: "node.name.matches('^a')"
    message: "node.name.matches('^b') ? 'b' : 'not b'"
  - name: constants
    hook: predicate
    deny: "task.gpus < -1e999"
    message: "string(1e999) + ' ' + string(-1e999)"
  - name: both
    hook: predicate
    when: "task.name.matches('^t')"
    deny: "node.idleGpus > 1e999 || node.name.matches('^c')"
    message: "node.name.matches('^d') ? string(0.0 / 0.0) : 'x'"
"""


@pytest.mark.parametrize(("rule", "node", "denied", "message"), [
    ("regexes", "a1", True, "not b"), ("regexes", "b1", False, "b"),
    ("constants", "a1", False, "+Inf -Inf"),
    ("both", "c1", True, "x"), ("both", "d1", False, "NaN"),
])
def test_every_form_of_a_rule_evaluates_its_own_regexes_and_constants(
        write: Write, vocabulary: Vocabulary, rule: str, node: str, denied: bool, message: str) -> None:
    bundle = load_bundle([write("forms.yaml", FORMS)], vocabulary)
    bound = next(r for r in bundle.instantiate("forms").rules if r.name == rule)
    task, n = Task(name="t0", gpus=1.0), Node(name=node, idle_gpus=2.0)
    assert bound.scalar(task, None, n) is denied
    assert bound.message(task, None, n) == message
    if bound.vector is not None:
        assert bound.vector(task, None, NodeArrays([n])).tolist() == [denied]


@pytest.mark.parametrize(("text", "want"), [
    ("[x + 1].map(y, y * 2)", [8]),                       # an int sum inside a comprehension's range
    ("[[x + 1].map(y, y + 1)].map(l, l[0])", [5]),
    ("[x + 1, x - 1].filter(y, y > x).size()", 1),
])
def test_int_arithmetic_compiles_inside_comprehension_ranges(text: str, want: object) -> None:
    assert compile_text(text, {"x": "int"}).scalar(3) == want


def test_int_overflow_inside_a_comprehension_range_is_an_error() -> None:
    with pytest.raises(EvalError, match="overflow"):
        compile_text("[x + 1].map(y, y)", {"x": "int"}).scalar(2**63 - 1)


def test_matches_uses_re2_so_a_backtracking_pattern_runs_in_linear_time() -> None:
    # Python's re takes minutes on this (issue 8, class 5); RE2 has no backtracking at all
    assert compile_text("s.matches('^(a|a)*$')", {"s": "string"}).scalar("a" * 31 + "b") is False
    assert type(regex("^(a|a)*$")).__module__.startswith("re2")


def test_a_comprehension_over_its_budget_is_an_error_naming_the_rule() -> None:
    expression = compile_text("l.all(a, l.all(b, l.all(c, a + b + c >= 0)))", {"l": "list<int>"})
    with pytest.raises(EvalError, match="run-time budget") as info:
        expression.scalar(list(range(200)))          # 8 million items at 7 units each
    assert info.value.rule == "<expression>"
    with pytest.raises(EvalError, match="earlier in this cycle"):   # tripped: even a small list fails
        expression.scalar(list(range(2)))
    fresh = compile_text("l.all(a, l.all(b, l.all(c, a + b + c >= 0)))", {"l": "list<int>"})
    assert fresh.scalar(list(range(10))) is True


def test_a_spent_budget_is_not_absorbed_by_or_or_exists() -> None:
    expression = compile_text("true || l.exists(a, l.exists(b, l.exists(c, false)))", {"l": "list<int>"})
    assert expression.scalar(list(range(200))) is True          # `true ||` decides first: nothing runs
    expression = compile_text("l.exists(a, l.exists(b, l.exists(c, false))) || true", {"l": "list<int>"})
    with pytest.raises(EvalError, match="run-time budget"):
        expression.scalar(list(range(200)))


def test_a_tripped_meter_fails_every_later_evaluation_at_once() -> None:
    meter = Meter(10)
    meter.start().charge([1, 2], 3)
    with pytest.raises(OverBudget):
        meter.start().charge([1, 2, 3], 3)
    with pytest.raises(OverBudget, match="earlier in this cycle"):
        meter.start()
