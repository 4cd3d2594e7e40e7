"""Stage 6, compile: checked trees -> Python source -> functions. The only compile()/exec.

Each rule becomes a factory `_make(v_args, v_cluster)` returning a closure over the
hook's variables, so binding arguments costs nothing per evaluation. `CompiledRule`
is the unbound result; `BoundRule` is what a plugin instance hands to the framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.framework.hooks import Form, HookKind
from kaipolicy.rules import tree as t
from kaipolicy.rules.alike import carried_scopes, fixed_for_the_pod, fixed_on_the_node
from kaipolicy.rules.cost import RUNTIME_BUDGET, Meter
from kaipolicy.rules.emit import FIELDS, HELPERS, METER, Emitter, Namespace
from kaipolicy.rules.runtime import EvalError, failure
from kaipolicy.rules.sandbox import fields_by_class
from kaipolicy.rules.total import is_total
from kaipolicy.rules.vectorize import VECTOR_HELPERS, VectorEmitter
from kaipolicy.rules.vocabulary import TypeSpec, Vocabulary, list_elem

__all__ = ["BoundRule", "CompiledRule", "EvalError", "compile_rule"]

Factory = Callable[[Any, Any], Callable[..., Any]]
NEUTRAL = {Form.DENY: "False", Form.ALLOW: "True", Form.SCORE: "0.0"}
BODY_KEYS = {Form.DENY: "deny", Form.SCORE: "score", Form.KEY: "key", Form.ALLOW: "allow",
             Form.VALUE: "value"}


@dataclass(frozen=True, slots=True)
class BoundRule:
    """A rule with `args` and `cluster` bound: call scalar(task, node) with the hook's variables."""

    rule: CompiledRule
    scalar: Callable[..., Any]
    vector: Callable[..., Any] | None
    message: Callable[..., str | None]
    # the vector body alone: no numpy error state, no result check, errors raised as they come
    # (the engine wraps a whole scoring pass in one error state, see Session.node_scores)
    vector_raw: Callable[..., Any] | None = None

    @property
    def name(self) -> str:
        return self.rule.name


@dataclass(frozen=True)
class CompiledRule:
    """One rule, compiled. Its unbound callables take the hook's variables, then args, then cluster."""

    name: str
    hook: HookKind
    file: str
    line: int
    form: Form
    variables: tuple[str, ...]
    weight: float = 1.0
    description: str = ""
    builtin: str = ""
    with_args: Mapping[str, Any] = field(default_factory=dict)
    vectorizable: bool = False
    cost: int = 0
    source: str = ""
    scalar_factory: Factory | None = None
    vector_factory: Factory | None = None
    message_factory: Factory | None = None
    reads: frozenset[str] = frozenset()   # the variables its expressions name (hook names, args, cluster)
    mode: str = "enforce"                 # enforce | warn | audit: warn and audit rules change nothing
    calls: str = ""    # the vocabulary function that is the rule's one expression (see lone_call)
    head_call: str = ""   # the vocabulary function the rule's one expression calls, whatever its arguments
    vector_raw_factory: Factory | None = None   # the vector body alone (see BoundRule.vector_raw)
    vocabulary_calls: frozenset[str] = frozenset()          # the vocabulary functions it calls
    selects: frozenset[tuple[str, str]] = frozenset()       # (variable, field) it reads
    total: bool = False   # its evaluation cannot fail (rules/total.py): skipping it hides no error
    # (variable, Python attribute) pairs, when plain fields of the hook's variables are all it
    # reads of them and it calls no vocabulary function (see plain_field_reads); else None
    field_reads: tuple[tuple[str, str], ...] | None = None
    # the set-relative calls, when it scores the other nodes alike for the next pod of a run
    # (rules/alike.py); else None
    alike_scopes: tuple[Any, ...] | None = None
    # its value reads only the pod's fields that never change and its arguments (rules/alike.py)
    fixed_for_pod: bool = False
    # its value reads only the pod's and the node's fields that never change, its arguments and
    # `fixed` functions (rules/alike.py)
    fixed_on_node: bool = False

    def scalar(self, *values: Any) -> Any:
        """The body's value, or None when the rule's guard (`when`) is false or it has no body."""
        if self.scalar_factory is None:
            return None
        return self.scalar_factory(values[-2], values[-1])(*values[:-2])

    def vector(self, *values: Any) -> Any:
        if self.vector_factory is None:
            return None
        return self.vector_factory(values[-2], values[-1])(*values[:-2])

    def message(self, *values: Any) -> str | None:
        if self.message_factory is None:
            return None
        result: str | None = self.message_factory(values[-2], values[-1])(*values[:-2])
        return result

    def bind(self, args: Any, cluster: Any) -> BoundRule:
        scalar = self.scalar_factory(args, cluster) if self.scalar_factory else _none
        vector = self.vector_factory(args, cluster) if self.vector_factory else None
        message = self.message_factory(args, cluster) if self.message_factory else _none
        raw = self.vector_raw_factory(args, cluster) if self.vector_raw_factory else None
        return BoundRule(self, scalar, vector, message, raw)


def _none(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class RuleInput:
    """What compile_rule needs besides the checked trees."""

    name: str
    hook: HookKind
    file: str
    line: int
    weight: float = 1.0
    description: str = ""
    builtin: str = ""
    with_args: Mapping[str, Any] = field(default_factory=dict)
    cost: int = 0
    mode: str = "enforce"


def compile_rule(rule: RuleInput, trees: Mapping[str, t.Expr], vocabulary: Vocabulary,
                 types: Mapping[str, TypeSpec], vectorizable: bool,
                 vector_names: frozenset[str] = frozenset({"node"})) -> CompiledRule:
    """Generate and compile the scalar, vector and message functions of one checked rule.

    All three share one namespace whose every bound name is fresh (see emit.Namespace)."""
    hook = rule.hook
    variables = (*hook.names, "args", "cluster")
    params = ", ".join("v_" + n for n in hook.names)
    ns = _namespace(types, failure(rule.name, rule.file, rule.line))
    sources: list[str] = []
    scalar = _scalar_body(rule, trees, vocabulary, types, ns)
    if scalar is not None:
        sources.append(_function("_make_scalar", params, *scalar))
    per_node = [n for n in hook.names if n in vector_names]
    can_vector = vectorizable and bool(per_node) and hook.form in NEUTRAL and BODY_KEYS[hook.form] in trees
    if can_vector:
        sources.append(_vector_function(rule, trees, vocabulary, types, ns, params, per_node))
    if "message" in trees:
        emitter = Emitter(vocabulary, types, ns, {})
        body = _checked("message", trees["message"], emitter.emit(trees["message"]))
        sources.append(_function("_make_message", params, None, body, metered=emitter.metered))
    _execute("\n".join(sources), ns, f"<rule {rule.file}:{rule.name}>")
    reads = frozenset(n.name for tree in trees.values() for n in t.walk(tree)
                      if isinstance(n, t.Ident) and n.name in variables)
    values = ns.values
    return CompiledRule(rule.name, hook, rule.file, rule.line, hook.form, variables, rule.weight,
                        rule.description, rule.builtin, dict(rule.with_args), can_vector, rule.cost,
                        "\n".join(sources), values.get("_make_scalar"), values.get("_make_vector"),
                        values.get("_make_message"), reads, rule.mode, lone_call(trees, hook.names),
                        head_call(trees), values.get("_make_vector_raw"), *uses(trees, vocabulary),
                        all(is_total(tree, types) for key, tree in trees.items() if key != "message"),
                        plain_field_reads(trees, hook.names, vocabulary, types),
                        carried_scopes(trees, hook.names, vocabulary),
                        fixed_for_the_pod(trees, hook.names, vocabulary),
                        fixed_on_the_node(trees, hook.names, vocabulary))


#: Field types whose values are plain, hashable and compared by value.
PLAIN_FIELD_TYPES = frozenset({"int", "uint", "double", "string", "bool"})


def plain_field_reads(trees: Mapping[str, t.Expr], names: Sequence[str], vocabulary: Vocabulary,
                      types: Mapping[str, TypeSpec]) -> tuple[tuple[str, str], ...] | None:
    """The (variable, Python attribute) pairs a rule reads when they are everything it reads of
    the hook's variables and of the session: each variable appears only as `variable.field` (or
    inside has()) with a field of a plain type, `cluster` does not appear, and no vocabulary
    function is called. The rule's value is then a function of those attributes' values and its
    arguments alone. None otherwise."""
    pairs: set[tuple[str, str]] = set()
    named = selected = 0
    for tree in trees.values():
        for n in t.walk(tree):
            if isinstance(n, t.Call) and n.function in vocabulary.functions:
                return None
            if isinstance(n, t.Ident) and (n.name in names or n.name == "cluster"):
                named += 1
            elif isinstance(n, (t.Select, t.Has)) and isinstance(n.operand, t.Ident) and n.operand.name in names:
                spec = types.get(n.operand.type)
                f = spec.fields.get(n.field) if spec is not None and not spec.by_key else None
                if f is None or f.type not in PLAIN_FIELD_TYPES:
                    return None
                pairs.add((n.operand.name, f.attr))
                selected += 1
    return tuple(sorted(pairs)) if named == selected else None


def uses(trees: Mapping[str, t.Expr], vocabulary: Vocabulary) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    """The vocabulary functions a rule calls and the (variable, field) pairs it reads: what the
    engine may rely on when it reasons about a rule without running it."""
    calls: set[str] = set()
    selects: set[tuple[str, str]] = set()
    for tree in trees.values():
        for n in t.walk(tree):
            if isinstance(n, t.Call) and n.function in vocabulary.functions:
                calls.add(n.function)
            elif isinstance(n, (t.Select, t.Has)) and isinstance(n.operand, t.Ident):
                selects.add((n.operand.name, n.field))
    return frozenset(calls), frozenset(selects)


def head_call(trees: Mapping[str, t.Expr]) -> str:
    """The vocabulary function whose value is the rule's value, when the rule's one expression (no
    guard, no message) is a call to it, whatever the arguments; otherwise "". The checker has
    typed the arguments, so a function taking the hook's only value of some type is given it."""
    if len(trees) != 1:
        return ""
    (tree,) = trees.values()
    return tree.function if isinstance(tree, t.Call) else ""


def lone_call(trees: Mapping[str, t.Expr], names: Sequence[str]) -> str:
    """The vocabulary function whose value is the rule's value, when the rule's one expression
    (no guard, no message) calls it on `cluster` and the hook's variables, each once, in order:
    the engine may then rely on what that function is known to read. Otherwise ""."""
    if len(trees) != 1:
        return ""
    (tree,) = trees.values()
    if not isinstance(tree, t.Call) or not all(isinstance(a, t.Ident) for a in tree.args):
        return ""
    if [a.name for a in tree.args if isinstance(a, t.Ident)] != ["cluster", *names]:
        return ""
    return tree.function


def _namespace(types: Mapping[str, TypeSpec], fail: Callable[[BaseException], EvalError]) -> Namespace:
    return Namespace({**HELPERS, **VECTOR_HELPERS, "_fail": fail, "_Meter": Meter, "_BUDGET": RUNTIME_BUDGET,
                      FIELDS: fields_by_class(types.values())})


def _execute(source: str, ns: Namespace, filename: str) -> None:
    exec(compile(source, filename, "exec"), ns.values)  # noqa: S102 - generated code


def _scalar_body(rule: RuleInput, trees: Mapping[str, t.Expr], vocabulary: Vocabulary,
                 types: Mapping[str, TypeSpec], ns: Namespace) -> tuple[str | None, str, bool] | None:
    emitter = Emitter(vocabulary, types, ns, {})
    guard = _checked("when", trees["when"], emitter.emit(trees["when"])) if "when" in trees else None
    form = rule.hook.form
    if form == Form.ANNOTATIONS:
        items = [f"{k.split('.', 1)[1]!r}: {_checked('message', v, emitter.emit(v))}" for k, v in trees.items()
                 if k.startswith("annotations.")]
        return guard, "{" + ", ".join(items) + "}", emitter.metered
    key = BODY_KEYS.get(form)
    if key is None or key not in trees:
        return None
    body = _checked(key, trees[key], emitter.emit(trees[key]))
    if form == Form.KEY and list_elem(trees[key].type) is None and trees[key].type != "dyn":
        body = f"[{body}]"
    return guard, body, emitter.metered


_RESULT_CHECKS = {"when": "_cond", "deny": "_cond", "allow": "_cond", "score": "_number", "message": "_string"}


def _checked(key: str, tree: t.Expr, code: str) -> str:
    """A body whose static type is dyn is checked at run time to be what its form needs (a
    bool, a number, a string, a key of scalars): a rule never hands the engine a Python object."""
    if key == "key" and (tree.type == "dyn" or list_elem(tree.type) == "dyn"):
        return f"_key({code})"
    if tree.type == "dyn" and key in _RESULT_CHECKS:
        return f"{_RESULT_CHECKS[key]}({code})"
    return code


def _function(name: str, params: str, guard: str | None, body: str, metered: bool = False, *,
              prelude: str = "", context: str = "", raw: bool = False) -> str:
    """`name(v_args, v_cluster)` returns the rule's closure; a metered one owns a budget meter
    for as long as the closure lives (a cycle: bind_cluster makes new closures). A `raw` closure
    lets errors out as they are (its caller evaluates the rule again the usual way on any)."""
    lines = ["def " + name + "(v_args, v_cluster):"]
    if metered:
        lines += ["    _meter = _Meter(_BUDGET)"]
    lines += [f"    def rule({params}):"]
    inner: list[str] = []
    if metered:
        inner += [f"{METER} = _meter.start()"]
    inner += [line for line in prelude.splitlines() if line]
    if guard is not None:
        inner += [f"if not ({guard}):", "    return None"]
    if context:
        inner += [f"with {context}:", f"    return {body}"]
    else:
        inner += [f"return {body}"]
    if raw:
        lines += [f"        {line}" for line in inner]
    else:
        lines += ["        try:", *(f"            {line}" for line in inner),
                  "        except Exception as _e:", "            raise _fail(_e) from _e"]
    lines += ["    return rule", ""]
    return "\n".join(lines)


def _vector_function(rule: RuleInput, trees: Mapping[str, t.Expr], vocabulary: Vocabulary,
                     types: Mapping[str, TypeSpec], ns: Namespace, params: str,
                     vector_names: list[str]) -> str:
    """Per-node arrays in, one array out; a scalar guard that is false still means None."""
    emitter = VectorEmitter(vocabulary, types, ns, {})
    form = rule.hook.form
    key = BODY_KEYS[form]
    body = _checked(key, trees[key], emitter.emit(trees[key]))
    guard_tree = trees.get("when")
    guard: str | None = None
    if guard_tree is not None and guard_tree.vector:
        body = f"_np.where({emitter.emit(guard_tree)}, {body}, {NEUTRAL[form]})"
    elif guard_tree is not None:
        guard = _checked("when", guard_tree, emitter.emit(guard_tree))
    count = f"len(v_{vector_names[0]})"
    # numpy follows IEEE for doubles (x/0.0 = inf) as CEL does, so its warnings are silenced
    return "\n".join([
        _function("_make_vector", params, guard, f"_vres({body}, _n)", emitter.metered, prelude=f"_n = {count}",
                  context="_np.errstate(all='ignore')"),
        _function("_make_vector_raw", params, guard, body, emitter.metered, raw=True)])


def compile_expression(tree: t.Expr, variables: tuple[str, ...], vocabulary: Vocabulary,
                       types: Mapping[str, TypeSpec], *, vector_names: frozenset[str] = frozenset(),
                       name: str = "<expression>") -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """A lone checked expression as (scalar, vector) functions of `variables`, positionally.

    The vector function exists when some variable is in `vector_names`; it is used by tests
    and tools, while rule files go through compile_rule.
    """
    params = ", ".join("v_" + n for n in variables)
    ns = _namespace(types, failure(name, "<expression>", 1))
    emitter = Emitter(vocabulary, types, ns, {})
    source = _function("_make_scalar", params, None, emitter.emit(tree), emitter.metered)
    per_node = [n for n in variables if n in vector_names]
    if per_node:
        vemitter = VectorEmitter(vocabulary, types, ns, {})
        body = f"_vres({vemitter.emit(tree)}, _n)"
        source += "\n" + _function("_make_vector", params, None, body, vemitter.metered,
                                   prelude=f"_n = len(v_{per_node[0]})", context="_np.errstate(all='ignore')")
    _execute(source, ns, f"<rule {name}>")
    vector = ns.values["_make_vector"](None, None) if per_node else None
    return ns.values["_make_scalar"](None, None), vector
