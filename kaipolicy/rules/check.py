"""Stage 4, check: names, fields, function signatures and types against a Vocabulary.

Annotates each tree node with its type and whether it varies per node (vector), and
reports every independent problem. A call that cannot run on arrays is not an error:
it is noted once so the rule falls back to scalar evaluation.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kaipolicy.rules import functions as fn
from kaipolicy.rules import tree as t
from kaipolicy.rules.runtime import RegexError, regex
from kaipolicy.rules.vocabulary import (
    NUMERIC,
    TypeSpec,
    Vocabulary,
    assignable,
    join,
    list_elem,
    map_kv,
)

ORDERED = NUMERIC | {"string", "bytes", "bool"}
# Python's special names start with two underscores; no rule may spell one (see sandbox.py)
RESERVED_PREFIX = "__"
RESERVED_REASON = "names starting with '__' are reserved"
MAP_KEYS = frozenset({"int", "uint", "bool", "string", "dyn"})
FREE = "?"   # the element type of an empty list or map literal while literals unify (never escapes)
_ARITH = {"-": NUMERIC, "*": NUMERIC, "/": NUMERIC, "%": frozenset({"int", "uint"})}


@dataclass(frozen=True)
class Problem:
    code: str
    pos: int
    message: str


@dataclass
class Checked:
    type: str
    problems: list[Problem] = field(default_factory=list)
    not_vectorizable: Problem | None = None


class Checker:
    """Types one expression; `variables` maps every visible name (incl. args, cluster) to a type."""

    def __init__(self, vocabulary: Vocabulary, variables: Mapping[str, str],
                 types: Mapping[str, TypeSpec] | None = None, vector_names: frozenset[str] = frozenset()):
        self.vocabulary = vocabulary
        self.types = dict(vocabulary.types) | dict(types or {})
        self.variables = dict(variables)
        self.vector_names = vector_names
        self._problems: list[Problem] = []
        self._novec: Problem | None = None
        self._scopes: list[dict[str, str]] = []
        self._patterns: dict[int, str] = {}   # literal node -> its type with free parameters left in

    def check(self, expr: t.Expr) -> Checked:
        self._problems, self._novec, self._scopes, self._patterns = [], None, [], {}
        result = self._type(expr)
        # An expression with errors compiles to nothing: whether it could vectorise is moot.
        return Checked(result, self._problems, None if self._problems else self._novec)

    def _fail(self, code: str, pos: int, message: str) -> str:
        self._problems.append(Problem(code, pos, message))
        return "dyn"

    def _novector(self, node: t.Expr, what: str) -> None:
        if self._novec is None:
            self._novec = Problem("W501", node.pos, f"{what}: the rule cannot be vectorised")

    def _type(self, node: t.Expr) -> str:
        reserved = _reserved_name(node)
        if reserved is not None:
            node.type = self._fail("E307", node.pos, f"{reserved!r}: {RESERVED_REASON}")
            return node.type
        method: Callable[[t.Expr], str] = getattr(self, "_" + type(node).__name__.lower())
        node.type = method(node)
        if not isinstance(node, (t.Ident, t.Comprehension)):
            node.vector = any(child.vector for child in node.children())
        return node.type

    def _literal(self, node: t.Literal) -> str:
        return node.kind

    def _ident(self, node: t.Ident) -> str:
        for scope in reversed(self._scopes):
            if node.name in scope:
                return scope[node.name]
        if node.name in self.variables:
            node.vector = node.name in self.vector_names
            return self.variables[node.name]
        known = set(self.variables) | {n for s in self._scopes for n in s}
        return self._fail("E301", node.pos, f"unknown name {node.name!r}{_hint(node.name, known)}")

    def _select(self, node: t.Select) -> str:
        operand = self._type(node.operand)
        if node.operand.vector and not isinstance(node.operand, t.Ident):
            self._novector(node, f"field {node.field!r} of a per-node value")
        return self._field(node, operand, node.field)

    def _field(self, node: t.Expr, operand: str, name: str) -> str:
        spec = self.types.get(operand)
        if spec is not None:
            if name in spec.fields:
                return spec.fields[name].type
            return self._fail("E302", node.pos, f"{operand} has no field {name!r}{_hint(name, set(spec.fields))}")
        kv = map_kv(operand)
        if kv is not None and assignable(kv[0], "string"):
            return kv[1]
        if operand == "dyn":
            return "dyn"
        return self._fail("E305", node.pos, f"{operand} has no fields (selecting {name!r})")

    def _has(self, node: t.Has) -> str:
        operand = self._type(node.operand)
        if node.operand.vector:
            self._novector(node, "has() on a per-node value")
        self._field(node, operand, node.field)
        return "bool"

    def _index(self, node: t.Index) -> str:
        operand, index = self._type(node.operand), self._type(node.index)
        if node.operand.vector or node.index.vector:
            self._novector(node, "indexing a per-node value")
        elem = list_elem(operand)
        if elem is not None:
            if not assignable("int", index) and not assignable("uint", index):
                return self._fail("E305", node.pos, f"a list index must be an int, not {index}")
            return elem
        kv = map_kv(operand)
        if kv is not None:
            if not assignable(kv[0], index):
                return self._fail("E305", node.pos, f"a map with {kv[0]} keys indexed by {index}")
            return kv[1]
        if operand == "dyn":
            return "dyn"
        return self._fail("E305", node.pos, f"{operand} cannot be indexed")

    def _listlit(self, node: t.ListLit) -> str:
        for item in node.items:
            self._type(item)
        if any(item.vector for item in node.items):
            self._novector(node, "a list built from per-node values")
        return self._with_pattern(node, f"list<{self._items_pattern(node.items)}>")

    def _maplit(self, node: t.MapLit) -> str:
        keys = [self._type(k) for k, _ in node.entries]
        for _, value in node.entries:
            self._type(value)
        if any(k.vector or v.vector for k, v in node.entries):
            self._novector(node, "a map built from per-node values")
        for (key, _), key_type in zip(node.entries, keys):
            if key_type not in MAP_KEYS:
                self._fail("E305", key.pos, f"a map key must be an int, uint, bool or string, not {key_type}")
        self._repeated_keys(node)
        pattern = (f"map<{self._items_pattern([k for k, _ in node.entries])},"
                   f"{self._items_pattern([v for _, v in node.entries])}>")
        return self._with_pattern(node, pattern)

    def _items_pattern(self, items: list[t.Expr]) -> str:
        """The element type of a literal: its items' types unified, an empty literal's element
        being a free type parameter (so `[[], [[1]]]` is a list<list<list<int>>>)."""
        common: str | None = FREE
        for item in items:
            common = _unify(common, self._pattern(item)) if common is not None else None
        return common or "dyn"

    def _pattern(self, node: t.Expr) -> str:
        """A node's type with the free parameters of the empty literals in it left in."""
        return self._patterns.get(id(node), node.type)

    def _with_pattern(self, node: t.Expr, pattern: str) -> str:
        self._patterns[id(node)] = pattern
        return pattern.replace(FREE, "dyn")  # a parameter nothing bound is dyn

    def _repeated_keys(self, node: t.MapLit) -> None:
        """A literal key given twice is an error (CEL's, at run time; here before it). 1 and 1u
        are one key, true and 1 are two."""
        seen: set[tuple[str, object]] = set()
        for key, _ in node.entries:
            if not isinstance(key, t.Literal) or key.kind not in MAP_KEYS:
                continue
            identity = ("number" if key.kind in ("int", "uint") else key.kind, key.value)
            if identity in seen:
                self._fail("E309", key.pos, f"the map literal repeats the key {key.value!r}")
            seen.add(identity)

    def _unary(self, node: t.Unary) -> str:
        operand = self._type(node.operand)
        allowed = {"bool"} if node.op == "!" else {"int", "double"}
        if operand != "dyn" and operand not in allowed:
            return self._fail("E305", node.pos, f"operator {node.op!r} does not apply to {operand}")
        return operand

    def _cond(self, node: t.Cond) -> str:
        cond, then, other = self._type(node.cond), self._type(node.then), self._type(node.other)
        if not assignable("bool", cond):
            self._fail("E305", node.pos, f"the condition of ?: must be a bool, not {cond}")
        pattern = _unify(self._pattern(node.then), self._pattern(node.other))
        if pattern is None:
            return self._fail("E305", node.pos, f"the branches of ?: differ: {then} and {other}")
        common = self._with_pattern(node, pattern)
        if node.cond.vector and (common not in ORDERED or cond != "bool"):
            self._novector(node, f"?: choosing a {common} per node by a {cond}")
        return common

    def _binary(self, node: t.Binary) -> str:
        left, right = self._type(node.left), self._type(node.right)
        result = self._operator(node, left, right)
        if (node.left.vector or node.right.vector) and not _vector_op(node.op, left, right):
            self._novector(node, f"operator {node.op!r} on per-node {left} and {right}")
        return result

    def _operator(self, node: t.Binary, left: str, right: str) -> str:
        op = node.op
        if op in ("&&", "||"):
            if assignable("bool", left) and assignable("bool", right):
                return "bool"
        elif op in ("==", "!="):
            if join(left, right) is not None:
                return "bool"
        elif op in ("<", "<=", ">", ">="):
            if join(left, right) in ORDERED | {"dyn"}:
                return "bool"
        elif op == "in":
            container = list_elem(right) or (map_kv(right) or (None, None))[0] or (right == "dyn" and "dyn")
            if container and assignable(container, left):
                return "bool"
        elif op == "+":
            return self._plus(node, left, right)
        else:
            common = join(left, right)
            if common == "dyn" or common in _ARITH[op]:
                return common if common != "dyn" else (left if left != "dyn" else right)
        return self._fail("E305", node.pos, f"operator {op!r} does not apply to {left} and {right}")

    def _plus(self, node: t.Binary, left: str, right: str) -> str:
        if list_elem(left) is not None and list_elem(right) is not None:
            pattern = _unify(self._pattern(node.left), self._pattern(node.right))
            if pattern is not None:  # the more general element type: [1, 'a'] + [2] is a list<dyn>
                return self._with_pattern(node, pattern)
        common = join(left, right)
        if common is not None and (common in NUMERIC | {"string", "bytes", "dyn"} or list_elem(common)):
            return common if common != "dyn" else (left if left != "dyn" else right)
        return self._fail("E305", node.pos, f"operator '+' does not apply to {left} and {right}")

    def _comprehension(self, node: t.Comprehension) -> str:
        rng = self._type(node.range)
        if node.range.vector:
            self._novector(node, f"{node.macro}() over a per-node value")
        elem = list_elem(rng) or (map_kv(rng) or (None, None))[0] or ("dyn" if rng == "dyn" else None)
        if elem is None:
            elem = self._fail("E305", node.pos, f"{node.macro}() needs a list or a map, not {rng}")
        self._scopes.append({node.var: elem})
        try:
            pred = self._type(node.pred) if node.pred is not None else "bool"
            result = self._type(node.result) if node.result is not None else elem
        finally:
            self._scopes.pop()
        node.vector = any(child.vector for child in node.children())
        if node.vector:
            self._novector(node, f"{node.macro}() over per-node values")
        if not assignable("bool", pred):
            self._fail("E305", node.pos, f"the predicate of {node.macro}() must be a bool, not {pred}")
        if node.macro in ("all", "exists", "exists_one"):
            return "bool"
        return f"list<{result if node.macro == 'map' else elem}>"

    def _call(self, node: t.Call) -> str:
        qualified = self._qualified(node)
        if qualified is not None:
            node.name, node.target = qualified, None
        receiver = self._type(node.target) if node.target is not None else None
        args = [self._type(a) for a in node.args]
        spec = self.vocabulary.functions.get(node.name) if node.target is None else None
        if spec is not None:
            return self._vocabulary_call(node, spec.params, spec.result, args, spec.vector_impl is not None)
        if node.name not in fn.GLOBAL | fn.RECEIVER_STRING | {"size"}:
            known = set(self.vocabulary.functions) | fn.GLOBAL
            return self._fail("E303", node.pos, f"unknown function {node.name!r}{_hint(node.name, known)}")
        result, reason = fn.builtin_type(node.name, receiver, args)
        if result is None:
            return self._fail("E304", node.pos, reason)
        if node.name == "matches":
            self._check_pattern(node.args[-1])
        if any(c.vector for c in node.children()) and node.name not in fn.VECTOR_BUILTINS:
            self._novector(node, f"{node.name}() of a per-node value")
        return result

    def _check_pattern(self, pattern: t.Expr) -> None:
        """A literal pattern is compiled now, once: an invalid one is a diagnostic, not an eval error."""
        if isinstance(pattern, t.Literal) and isinstance(pattern.value, str):
            try:
                regex(pattern.value)
            except RegexError as err:
                self._fail("E308", pattern.pos, str(err))

    def _vocabulary_call(self, node: t.Call, params: tuple[str, ...], result: str, args: list[str],
                         vectorizable: bool) -> str:
        if len(args) != len(params):
            return self._fail("E304", node.pos, f"{node.name}() takes {len(params)} arguments, got {len(args)}")
        for i, (want, got) in enumerate(zip(params, args)):
            if not assignable(want, got):
                self._fail("E304", node.args[i].pos, f"argument {i + 1} of {node.name}() must be {want}, not {got}")
        if any(a.vector for a in node.args) and not vectorizable:
            self._novector(node, f"{node.name}() has no vector implementation")
        return result

    def _qualified(self, node: t.Call) -> str | None:
        """`a.b.f(x)` names the function "a.b.f" when `a` is not a variable in scope."""
        parts: list[str] = [node.name]
        target = node.target
        while isinstance(target, t.Select):
            parts.append(target.field)
            target = target.operand
        if not isinstance(target, t.Ident) or node.target is None:
            return None
        if target.name in self.variables or any(target.name in s for s in self._scopes):
            return None
        return ".".join([target.name, *reversed(parts)])


def _reserved_name(node: t.Expr) -> str | None:
    """The reserved name a node spells (identifier, field, macro variable or function), if any."""
    names = {t.Ident: "name", t.Select: "field", t.Has: "field", t.Comprehension: "var", t.Call: "name"}
    attr = names.get(type(node))
    name = getattr(node, attr) if attr is not None else ""
    parts = name.split(".") if isinstance(node, t.Call) else [name]
    return name if any(p.startswith(RESERVED_PREFIX) for p in parts) else None


def _vector_op(op: str, left: str, right: str) -> bool:
    """Whether numpy's operator is CEL's here: on typed operands only, since numpy would take
    any truthy value for true and compare or add a bool as a number (`dyn(false) == 0.0`)."""
    if op in ("&&", "||"):
        return left == right == "bool"
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return left in ORDERED and right in ORDERED
    return op != "in" and left in NUMERIC and right in NUMERIC


def _unify(a: str, b: str) -> str | None:
    """Two types as one (items of a literal, branches of ?:, lists joined by +): a free parameter
    takes the other side, lists and maps unify part by part, and elsewhere dyn wins (the more
    general type: a value typed by the result never leaks); None when they do not agree."""
    if a == FREE or b == FREE:
        return b if a == FREE else a
    ea, eb = list_elem(a), list_elem(b)
    if ea is not None and eb is not None:
        elem = _unify(ea, eb)
        return None if elem is None else f"list<{elem}>"
    ka, kb = map_kv(a), map_kv(b)
    if ka is not None and kb is not None:
        key, value = _unify(ka[0], kb[0]), _unify(ka[1], kb[1])
        return None if key is None or value is None else f"map<{key},{value}>"
    return join(a, b)


def _hint(word: str, known: set[str]) -> str:
    close = difflib.get_close_matches(word, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def result_problem(form_key: str, result: str) -> str | None:
    """Why a rule body of this kind may not have type `result`, or None when it fits."""
    want = {"when": "bool", "deny": "bool", "allow": "bool", "message": "string"}.get(form_key)
    if form_key.startswith("annotations."):
        want = "string"
    if want is not None:
        return None if assignable(want, result) else f"{form_key!r} must be a {want}, not {result}"
    if form_key == "score" and result not in NUMERIC | {"dyn"}:
        return f"'score' must be a number, not {result}"
    elem = list_elem(result) or result
    if form_key == "key" and elem not in ORDERED | {"dyn"}:
        return f"'key' must be a list of comparable values (bools, numbers, strings, bytes), not {result}"
    return None
