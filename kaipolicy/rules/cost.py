"""Stage 5, cost: a static estimate of how much work one evaluation of an expression does.

Every node costs 1, a function call 4 more, and a macro's body counts ten times (a
guess at the length of the list it walks). Rules over the limit are refused (E401).
"""

from __future__ import annotations

from kaipolicy.rules import tree as t

DEFAULT_COST_LIMIT = 500
CALL_COST = 4
MACRO_FACTOR = 10


def estimate(node: t.Expr) -> int:
    if isinstance(node, t.Comprehension):
        body = sum(estimate(c) for c in (node.pred, node.result) if c is not None)
        return 1 + estimate(node.range) + MACRO_FACTOR * body
    own = 1 + (CALL_COST if isinstance(node, t.Call) else 0)
    return own + sum(estimate(child) for child in node.children())
