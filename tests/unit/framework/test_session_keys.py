"""Order keys: one element per rule, so keys of different lengths and failing rules stay aligned."""

from __future__ import annotations

from kaipolicy.framework.session import LAST


def test_a_failed_rule_sorts_after_any_value() -> None:
    assert ((0, 5),) < ((LAST,),)
    assert ((LAST,),) > ((1, 0, 0),)
    assert max([((LAST,), 1.0), ((0, 0, -3), 2.0), ((1, 0, 0), 0.0)])[0] == (LAST,)
