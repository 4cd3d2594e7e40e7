"""The checker's types for literals: an empty list or map literal's element is a free type
parameter that the other items bind, as in cel-spec; items of different types make dyn."""

from __future__ import annotations

import pytest

from kaipolicy.rules.expression import compile_text


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
