"""The checker's types for literals, `?:` and list `+`: an empty list or map literal's element is
a free type parameter that the other side binds, as in cel-spec; elsewhere the more general type
wins (dyn), so no value is ever typed narrower than it is."""

from __future__ import annotations

import pytest
from rules_fixtures import make_vocabulary

from kaipolicy.errors import RuleError
from kaipolicy.rules.check import Checker
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.parse import parse


@pytest.mark.parametrize(("expr", "checked"), [
    ("[]", "list<dyn>"),
    ("{}", "map<dyn,dyn>"),
    ("[[1], []]", "list<list<int>>"),
    ("[[], [1]]", "list<list<int>>"),
    ("[[], [[]], [[[]]]]", "list<list<list<list<dyn>>>>"),
    ("[[[[]]], [], [[]]]", "list<list<list<list<dyn>>>>"),      # whatever the order of the items
    ("[[], [['a']]]", "list<list<list<string>>>"),
    ("{'a': [], 'b': [1u]}", "map<string,list<uint>>"),
    ("[{}, {'a': 1.5}]", "list<map<string,double>>"),
    ("[1, 'a']", "list<dyn>"),
    ("[[1], ['a']]", "list<dyn>"),
    ("[[1], [dyn(1)]]", "list<list<dyn>>"),                     # dyn is the more general, not a parameter
    ("{1: 'a', 'b': 2}", "map<dyn,dyn>"),
])
def test_a_literal_is_typed_by_unifying_its_items(expr: str, checked: str) -> None:
    assert compile_text(expr, {}).type == checked


@pytest.mark.parametrize(("expr", "checked"), [
    ("[] + [1]", "list<int>"),
    ("([] + []) + [1u]", "list<uint>"),
    ("[1, 'a'] + [2]", "list<dyn>"),            # was list<int>, holding 'a'
    ("[2] + [1, 'a']", "list<dyn>"),
    ("[1] + [dyn('a')]", "list<dyn>"),
    ("true ? [] : [1]", "list<int>"),
    ("true ? [1] : [dyn('a')]", "list<dyn>"),
    ("true ? {} : {'a': [1.5]}", "map<string,list<double>>"),
    ("true ? 1 : dyn('a')", "dyn"),
])
def test_branches_and_joined_lists_take_the_more_general_type(expr: str, checked: str) -> None:
    assert compile_text(expr, {}).type == checked


@pytest.mark.parametrize("expr", ["[1] + ['a']", "[1] + [1.0]", "true ? 1 : 'a'"])
def test_lists_of_different_types_do_not_join(expr: str) -> None:
    with pytest.raises(RuleError) as info:
        compile_text(expr, {})
    assert [d.code for d in info.value.diagnostics] == ["E305"]


def test_an_expression_with_errors_gets_no_vectorisation_warning_besides() -> None:
    checker = Checker(make_vocabulary(), {"task": "Task", "node": "Node"}, vector_names=frozenset({"node"}))
    broken = checker.check(parse("node.idleGpus < task.gpuz"))     # the unknown field is dyn
    assert [p.code for p in broken.problems] == ["E302"] and broken.not_vectorizable is None
    scalar_only = checker.check(parse("node.idleGpus < dyn(task.gpus)"))
    assert scalar_only.problems == [] and scalar_only.not_vectorizable is not None
