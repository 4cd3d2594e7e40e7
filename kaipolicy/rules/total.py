"""Whether a checked expression can fail at run time: a static, conservative answer.

An expression is *total* when its evaluation always gives a value: it reads only fields of known
types, compares, negates and combines booleans, does double arithmetic (IEEE: no error), picks
with a conditional, and calls only functions known never to fail. Integer arithmetic (overflow,
division by zero), indexing, map lookups, conversions that parse, comprehensions and anything
typed `dyn` may fail. The engine may skip evaluating a total rule whose value it does not need:
skipping it cannot hide a rule error.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaipolicy.rules import tree as t
from kaipolicy.rules.vocabulary import TypeSpec

#: Vocabulary functions that never fail on the values their checked arguments can hold.
TOTAL_FUNCTIONS = frozenset({"fits.idle", "fits.sharedGroup", "nodes.resourceTypeError", "placement.spread",
                             "affinity.nodeMatches", "affinity.untoleratedTaint", "topology.preferredScore"})
#: Vocabulary functions that never fail when some argument is a literal among these values.
TOTAL_WITH = {"placement.binpack": (2, frozenset({"gpu", "cpu"}))}
#: CEL functions and methods that never fail on checked arguments.
TOTAL_CEL = frozenset({"size", "startsWith", "endsWith", "contains"})
_ORDERED = frozenset({"==", "!=", "<", "<=", ">", ">="})


def is_total(node: t.Expr, types: Mapping[str, TypeSpec]) -> bool:
    if node.type == "dyn":
        return False
    if isinstance(node, (t.Literal, t.Ident)):
        return True
    if isinstance(node, (t.Select, t.Has)):
        # fields of the model's types and of a plugin's declared arguments are always there
        return node.operand.type in types and is_total(node.operand, types)
    if isinstance(node, t.Unary):
        return (node.op == "!" or node.operand.type == "double") and is_total(node.operand, types)
    if isinstance(node, t.Binary):
        if node.op in ("&&", "||") or node.op in _ORDERED:
            ok = True
        elif node.op in ("+", "-", "*", "/"):
            ok = node.left.type == node.right.type == "double"
        else:
            ok = False
        return ok and is_total(node.left, types) and is_total(node.right, types)
    if isinstance(node, t.Cond):
        return all(is_total(x, types) for x in (node.cond, node.then, node.other))
    if isinstance(node, t.ListLit):
        return all(is_total(x, types) for x in node.items)
    if isinstance(node, t.Call):
        return _total_call(node, types)
    return False   # indexing, map literals, comprehensions


def _total_call(node: t.Call, types: Mapping[str, TypeSpec]) -> bool:
    name = node.function
    args_total = all(is_total(a, types) for a in node.args)
    if name in TOTAL_FUNCTIONS:
        return args_total
    if name in TOTAL_WITH:
        i, allowed = TOTAL_WITH[name]
        arg = node.args[i] if i < len(node.args) else None
        return args_total and isinstance(arg, t.Literal) and arg.value in allowed
    if name == "double":
        return args_total and all(a.type in ("int", "uint", "double") for a in node.args)
    if node.name in TOTAL_CEL:
        return args_total and (node.target is None or node.target.type not in ("dyn",)) \
            and (node.target is None or is_total(node.target, types))
    return False
