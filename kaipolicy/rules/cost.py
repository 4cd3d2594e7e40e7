"""Stage 5, cost: how much work one evaluation may do, statically and at run time.

`estimate` bounds an expression's cost in units (about one basic operation each) from the
sizes its values can have: declared bounds of vocabulary fields (`FieldSpec.max_size`), the
length of literals, defaults otherwise. Lint refuses a rule over the limit (E401). The
`Meter` enforces a budget per evaluation in the same units, so a rule whose data outgrows
its declared bounds becomes an `error` outcome instead of a stalled cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sized

from kaipolicy.rules import tree as t
from kaipolicy.rules.vocabulary import TypeSpec, list_elem, map_kv

DEFAULT_COST_LIMIT = 100_000      # static estimate per expression (lint, E401)
RUNTIME_BUDGET = 1_000_000        # units one evaluation may spend in comprehensions (Kubernetes per-call limit)
DEFAULT_CONTAINER_SIZE = 100      # lists and maps without a declared bound
DEFAULT_STRING_SIZE = 1_024       # strings without a declared bound
CALL_COST = 4
STRING_UNIT = 10                  # a string operation costs 1 unit per 10 characters


class OverBudget(Exception):
    """An evaluation spent more than its run-time budget."""


class Meter:
    """The run-time budget of one compiled form. `start()` opens an evaluation; every
    comprehension charges its range's length times its body's cost. Going over trips the
    meter: later evaluations fail at once, so one runaway rule costs a cycle one budget."""

    __slots__ = ("budget", "left", "tripped")

    def __init__(self, budget: int = RUNTIME_BUDGET) -> None:
        self.budget = budget
        self.left = budget
        self.tripped = False

    def start(self) -> Meter:
        if self.tripped:
            raise OverBudget(f"over its run-time budget of {self.budget} cost units earlier in this cycle")
        self.left = self.budget
        return self

    def charge(self, items: Sized, unit: int) -> None:
        self.left -= (len(items) + 1) * unit
        if self.left < 0:
            self.tripped = True
            raise OverBudget(f"over its run-time budget of {self.budget} cost units "
                             f"(a comprehension over {len(items)} items)")


def body_unit(node: t.Comprehension) -> int:
    """What one item of a comprehension costs at run time, besides nested comprehensions
    (which charge for themselves)."""
    return 1 + sum(_flat(c) for c in (node.pred, node.result) if c is not None)


def _flat(node: t.Expr) -> int:
    if isinstance(node, t.Comprehension):
        return 1 + _flat(node.range)
    return 1 + sum(_flat(c) for c in node.children())


class Estimator:
    """Static cost of checked trees; `types` gives the declared sizes of vocabulary fields."""

    def __init__(self, types: Mapping[str, TypeSpec], functions: Collection[str] = ()) -> None:
        self.types = types
        self.functions = functions    # vocabulary functions: their arguments are passed, not scanned

    def cost(self, node: t.Expr) -> int:
        if isinstance(node, t.Comprehension):
            body = sum(self.cost(c) for c in (node.pred, node.result) if c is not None)
            return 1 + self.cost(node.range) + (self.size(node.range) + 1) * (body + 1)
        own = 1 + self._own(node)
        return own + sum(self.cost(child) for child in node.children())

    def _own(self, node: t.Expr) -> int:
        """Work beyond one unit that a node does itself: calls, scans, string operations."""
        if isinstance(node, t.Call) and node.target is None and node.name in self.functions:
            return CALL_COST
        if isinstance(node, t.Call):
            operands = ([node.target] if node.target is not None else []) + list(node.args)
            strings = sum(self.size(o) for o in operands if o.type in ("string", "bytes"))
            lists = sum(self.size(o) for o in operands if list_elem(o.type) is not None)
            return CALL_COST + strings // STRING_UNIT + lists
        if isinstance(node, t.Binary) and node.op == "in" and map_kv(node.right.type) is None:
            return self.size(node.right)
        if isinstance(node, t.Binary) and node.op in ("+", "==", "!=", "<", "<=", ">", ">="):
            if node.left.type in ("string", "bytes"):
                return (self.size(node.left) + self.size(node.right)) // STRING_UNIT
            if list_elem(node.left.type) is not None or map_kv(node.left.type) is not None:
                return self.size(node.left) + self.size(node.right)
        return 0

    def size(self, node: t.Expr) -> int:
        """An upper bound on the length of a list, map, string or bytes value (1 otherwise)."""
        if isinstance(node, t.Literal) and isinstance(node.value, (str, bytes)):
            return len(node.value)
        if isinstance(node, t.ListLit):
            return len(node.items)
        if isinstance(node, t.MapLit):
            return len(node.entries)
        if isinstance(node, t.Comprehension) and node.macro in ("map", "filter"):
            return self.size(node.range)
        if isinstance(node, t.Binary) and node.op == "+":
            return self.size(node.left) + self.size(node.right)
        if isinstance(node, t.Cond):
            return max(self.size(node.then), self.size(node.other))
        if isinstance(node, t.Select):
            spec = self.types.get(node.operand.type)
            declared = spec.fields[node.field].max_size if spec and node.field in spec.fields else None
            if declared is not None:
                return declared
        return _default_size(node.type)


def _default_size(type_: str) -> int:
    if type_ in ("string", "bytes", "dyn"):
        return DEFAULT_STRING_SIZE if type_ != "dyn" else DEFAULT_CONTAINER_SIZE
    if list_elem(type_) is not None or map_kv(type_) is not None:
        return DEFAULT_CONTAINER_SIZE
    return 1


def estimate(node: t.Expr, types: Mapping[str, TypeSpec] | None = None, functions: Collection[str] = ()) -> int:
    return Estimator(types or {}, functions).cost(node)
