"""Scalar code generation: a checked tree -> one Python expression (source text).

Names the generated code uses (helpers, vocabulary functions, constants) are bound in a
`Namespace` that `compile` executes the source in. Types from the checker pick the cheapest
correct form: typed double arithmetic is plain Python, int arithmetic checks for 64-bit
overflow, dyn operands go through the sandbox's run-time checks (`sandbox.py`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

from kaipolicy.rules import runtime as rt
from kaipolicy.rules import tree as t
from kaipolicy.rules.cost import body_unit
from kaipolicy.rules.sandbox import SANDBOX_HELPERS
from kaipolicy.rules.vocabulary import TypeSpec, Vocabulary, list_elem, map_kv

HELPERS: dict[str, Any] = {
    "_ovf": rt.overflow, "_idiv": rt.idiv, "_imod": rt.imod, "_fdiv": rt.fdiv, "_neg": rt.neg,
    "_dneg": rt.neg_dyn, "_arith": rt.arith, "_and": rt.and_, "_or": rt.or_, "_all": rt.all_,
    "_exists": rt.exists, "_exists_one": rt.exists_one, "_each": rt.each, "_lidx": rt.list_index,
    "_matches": rt.matches, "_min": rt.min_, "_max": rt.max_, "_u64": rt.uint_check, "_i64": rt.int_check,
    "_to_int": rt.to_int, "_to_uint": rt.to_uint, "_to_double": rt.to_double, "_to_string": rt.to_string,
    "_to_bool": rt.to_bool, "_to_bytes": rt.to_bytes, "_truth": rt.truth, "_equals": rt.equals, "_compare": rt.compare,
    "_contains": rt.contains, "_new_map": rt.new_map, **SANDBOX_HELPERS,
}
# Helpers for values the checker saw as dyn (CEL's rules across kinds, bools that must be bools,
# the sandbox's accessors): typed code never needs them, and the default bundle calls none.
DYNAMIC_HELPERS = frozenset({"_dneg", "_arith", "_truth", "_equals", "_compare", "_contains", "_new_map",
                             "_sel", "_has", "_idx", "_size", "_iter", "_str", "_bool"})
CONVERT = {"int": "_to_int", "uint": "_to_uint", "double": "_to_double", "string": "_to_string",
           "bool": "_to_bool", "bytes": "_to_bytes", "dyn": ""}
METER = "_m"          # the generated name of the evaluation's budget (see cost.Meter)
FIELDS = "_T"         # the generated name of the sandbox's class -> fields table
_SAFE_LEAVES = (t.Literal, t.Ident)


class Namespace:
    """The globals one rule's generated functions run in. Every name bound here is fresh for the
    whole namespace, so the scalar, vector and message forms of a rule never overwrite each
    other's regexes, constants or functions."""

    def __init__(self, base: Mapping[str, Any]) -> None:
        self.values: dict[str, Any] = dict(base)
        self._counter = itertools.count(1)

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}"

    def bind(self, prefix: str, value: Any) -> str:
        name = self.fresh(prefix)
        self.values[name] = value
        return name


class Emitter:
    """Emits one Python expression per tree; `names` maps CEL variables to Python parameters."""

    def __init__(self, vocabulary: Vocabulary, types: Mapping[str, TypeSpec], namespace: Namespace,
                 names: Mapping[str, str]) -> None:
        self.vocabulary = vocabulary
        self.types = types
        self.ns = namespace
        self.names = dict(names)
        self.metered = False   # whether the emitted code charges the budget (has a comprehension)

    def fresh(self, prefix: str) -> str:
        return self.ns.fresh(prefix)

    def const(self, value: Any) -> str:
        if isinstance(value, float) and not math.isfinite(value) or not isinstance(
                value, (int, float, str, bytes, bool, type(None))):
            return self.ns.bind("_k", value)
        return repr(value)

    def emit(self, node: t.Expr) -> str:
        method = getattr(self, "_" + type(node).__name__.lower())
        return str(method(node))

    def _literal(self, node: t.Literal) -> str:
        if node.kind == "uint":  # a uint carries its type at run time (kinds.UInt)
            return f"_u64({node.value!r})"
        return self.const(node.value)

    def _ident(self, node: t.Ident) -> str:
        return self.names.get(node.name, "v_" + node.name)

    def _select(self, node: t.Select) -> str:
        operand = self.emit(node.operand)
        spec = self.types.get(node.operand.type)
        if spec is not None:
            # the attribute comes from the vocabulary (or a declared argument), never from the rule
            attr = spec.fields[node.field].attr
            if spec.by_key:
                return f"{operand}[{attr!r}]"
            return f"{operand}.{attr}" if attr.isidentifier() else f"getattr({operand}, {attr!r})"
        if map_kv(node.operand.type) is not None:
            return f"{operand}[{node.field!r}]"
        return f"_sel({operand}, {node.field!r}, {FIELDS})"

    def _has(self, node: t.Has) -> str:
        operand = self.emit(node.operand)
        spec = self.types.get(node.operand.type)
        if spec is not None:
            attr = spec.fields[node.field].attr
            if spec.by_key:
                return f"({attr!r} in {operand})"
            return f"(getattr({operand}, {attr!r}, None) is not None)"
        if map_kv(node.operand.type) is not None:
            return f"({node.field!r} in {operand})"
        return f"_has({operand}, {node.field!r}, {FIELDS})"

    def _index(self, node: t.Index) -> str:
        operand, index = self.emit(node.operand), self.emit(node.index)
        if list_elem(node.operand.type) is not None:
            return f"_lidx({operand}, {index})"
        kv = map_kv(node.operand.type)
        if kv is not None and kv[0] == node.index.type != "dyn":
            return f"{operand}[{index}]"
        return f"_idx({operand}, {index})"  # across kinds a Python dict would find true under 1

    def _listlit(self, node: t.ListLit) -> str:
        return "[" + ", ".join(self.emit(i) for i in node.items) + "]"

    def _maplit(self, node: t.MapLit) -> str:
        if _plain_keys(node):
            return "{" + ", ".join(f"{self.emit(k)}: {self.emit(v)}" for k, v in node.entries) + "}"
        pairs = "".join(f"({self.emit(k)}, {self.emit(v)}), " for k, v in node.entries)
        return f"_new_map(({pairs}))"

    def _unary(self, node: t.Unary) -> str:
        operand = self.emit(node.operand)
        if node.op == "!":
            return f"(not _bool({operand}))" if node.operand.type == "dyn" else f"(not {operand})"
        if node.operand.type == "int":
            return f"_neg({operand})"
        if node.operand.type == "double":
            return f"(-{operand})"
        return f"_dneg({operand})"

    def _cond(self, node: t.Cond) -> str:
        return f"({self.emit(node.then)} if {truth(node.cond, self.emit(node.cond))} else {self.emit(node.other)})"

    def _binary(self, node: t.Binary) -> str:
        left, right = self.emit(node.left), self.emit(node.right)
        op, lt, rt_ = node.op, node.left.type, node.right.type
        if op in ("&&", "||"):
            if can_fail(node.left) or node.left.type != "bool" or node.right.type != "bool":
                helper = "_and" if op == "&&" else "_or"
                return f"{helper}(lambda: {left}, lambda: {right})"
            return f"({left} {'and' if op == '&&' else 'or'} {right})"
        if op in ("==", "!=", "<", "<=", ">", ">=", "in"):
            if _python_relation_is_exact(op, lt, rt_):
                return f"({left} {op} {right})"
            return _cel_relation(op, left, right)
        return self._arith(op, left, right, lt if lt != "dyn" else rt_, lt == "dyn" or rt_ == "dyn")

    def _arith(self, op: str, left: str, right: str, typ: str, dynamic: bool) -> str:
        if dynamic:
            return f"_arith({op!r}, {left}, {right})"
        if typ == "double":
            return f"_fdiv({left}, {right})" if op == "/" else f"({left} {op} {right})"
        if typ == "int":
            if op in "/%":
                return f"{'_idiv' if op == '/' else '_imod'}({left}, {right})"
            # a call, not a walrus: `:=` is a SyntaxError inside a comprehension's iterable
            return f"_i64({left} {op} {right})"
        if typ == "uint":
            if op in "/%":
                return f"_u64({'_idiv' if op == '/' else '_imod'}({left}, {right}))"
            return f"_u64({left} {op} {right})"
        return f"({left} {op} {right})"

    def _comprehension(self, node: t.Comprehension) -> str:
        rng = self.emit(node.range)
        if node.range.type == "dyn":
            rng = f"_iter({rng})"
        self.metered = True
        charged = f"{METER}, {body_unit(node)}, {rng}"
        var = self.fresh(f"c_{node.var}_")
        saved = self.names.get(node.var)
        self.names[node.var] = var
        try:
            pred = self.emit(node.pred) if node.pred is not None else None
            result = self.emit(node.result) if node.result is not None else None
        finally:
            if saved is None:
                del self.names[node.var]
            else:
                self.names[node.var] = saved
        if node.macro in ("all", "exists", "exists_one"):  # these helpers check each result is a bool
            return f"_{node.macro}({charged}, lambda {var}: {pred})"
        cond = f" if {truth(node.pred, pred)}" if node.pred is not None and pred is not None else ""
        return f"[{result or var} for {var} in _each({charged}){cond}]"

    def _call(self, node: t.Call) -> str:
        args = [self.emit(a) for a in node.args]
        spec = self.vocabulary.functions.get(node.name) if node.target is None else None
        if spec is not None:
            return f"{self.ns.bind('_f', spec.impl)}({', '.join(args)})"
        if node.target is not None:
            args.insert(0, self.emit(node.target))
        return self._builtin(node, args)

    def _builtin(self, node: t.Call, args: list[str]) -> str:
        name = node.name
        operands = ([node.target] if node.target is not None else []) + list(node.args)
        if name == "size":
            return f"_size({args[0]})" if operands[0].type == "dyn" else f"len({args[0]})"
        if name in ("startsWith", "endsWith", "contains", "matches"):
            args = [f"_str({a})" if o.type == "dyn" else a for a, o in zip(args, operands)]
        if name in ("startsWith", "endsWith"):
            return f"{args[0]}.{name.lower()}({args[1]})"
        if name == "contains":
            return f"({args[1]} in {args[0]})"
        if name == "matches":
            pattern = node.args[-1]
            if isinstance(pattern, t.Literal) and isinstance(pattern.value, str):
                compiled = self.ns.bind("_re", rt.regex(pattern.value))
                return f"({compiled}.search({args[0]}) is not None)"
            return f"_matches({args[0]}, {args[1]})"
        if name in ("min", "max"):
            return f"_{name}({', '.join(args)})"
        helper = CONVERT[name]
        return f"{helper}({args[0]})" if helper else args[0]


def truth(node: t.Expr, code: str) -> str:
    """`code` as a condition (of `?:`, `filter`): a bool, never the truthiness of a dyn value."""
    return code if node.type == "bool" else f"_truth({code})"


def _plain_keys(node: t.MapLit) -> bool:
    """Literal keys of one kind: the checker refused repeats, so a Python dict literal is exact
    (bool beside int keys would merge in a dict, computed keys need run-time checks)."""
    kinds = {k.kind if isinstance(k, t.Literal) else "" for k, _ in node.entries}
    return len(kinds) <= 1 and "" not in kinds


def _python_relation_is_exact(op: str, left: str, right: str) -> bool:
    """Whether Python's own operator gives CEL's answer for these static types. Not across kinds
    behind dyn (Python calls true equal to 1), and not on lists or maps: Python compares their
    items by identity first, so a NaN would equal itself inside one (`[x] == [x]`, `x in [x]`)."""
    if op == "in":
        kv = map_kv(right)
        items = kv[0] if kv is not None else list_elem(right)
        return items is not None and items != "double" and _plain(items) and _plain(left)
    return _plain(left) and _plain(right)


def _plain(typ: str) -> bool:
    """A type whose values Python compares as CEL does: not dyn, not a list or a map."""
    return typ != "dyn" and list_elem(typ) is None and map_kv(typ) is None


def _cel_relation(op: str, left: str, right: str) -> str:
    """A relation Python's operators would get wrong follows CEL across kinds (kinds.equals, ...)."""
    if op == "==":
        return f"_equals({left}, {right})"
    if op == "!=":
        return f"(not _equals({left}, {right}))"
    if op == "in":
        return f"_contains({left}, {right})"
    return f"_compare({op!r}, {left}, {right})"


def can_fail(node: t.Expr) -> bool:
    """Whether evaluating `node` may raise (decides if `&&`/`||` need error absorption)."""
    if isinstance(node, _SAFE_LEAVES):
        return False
    if isinstance(node, (t.Index, t.Call, t.Comprehension)) or isinstance(node, t.MapLit) and not _plain_keys(node):
        return True
    if isinstance(node, t.Select) and node.operand.type in ("dyn",) or (
            isinstance(node, t.Select) and map_kv(node.operand.type) is not None):
        return True
    if isinstance(node, t.Binary) and node.op in "+-*/%" and node.type != "double":
        return True
    if isinstance(node, t.Unary) and node.op == "-" and node.type != "double":
        return True
    if isinstance(node, (t.Binary, t.Unary)) and "dyn" in (node.type, *(c.type for c in node.children())):
        return True
    return any(can_fail(child) for child in node.children())
