"""Stage 6, compile: checked trees -> Python source -> functions. The only compile()/exec.

Each rule becomes a factory `_make(v_args, v_cluster)` returning a closure over the
hook's variables, so binding arguments costs nothing per evaluation. `CompiledRule`
is the unbound result; `BoundRule` is what a plugin instance hands to the framework.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.framework.hooks import Form, HookKind
from kaipolicy.rules import tree as t
from kaipolicy.rules.emit import HELPERS, Emitter
from kaipolicy.rules.runtime import EvalError, failure
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
        return BoundRule(self, scalar, vector, message)


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
    """Generate and compile the scalar, vector and message functions of one checked rule."""
    hook = rule.hook
    variables = (*hook.names, "args", "cluster")
    params = ", ".join("v_" + n for n in hook.names)
    ns: dict[str, Any] = {**HELPERS, **VECTOR_HELPERS, "_fail": failure(rule.name, rule.file, rule.line),
                          "EvalError": EvalError}
    sources: list[str] = []
    scalar = _scalar_body(rule, trees, vocabulary, types, ns)
    if scalar is not None:
        sources.append(_function("_make_scalar", params, *scalar))
    per_node = [n for n in hook.names if n in vector_names]
    can_vector = vectorizable and bool(per_node) and hook.form in NEUTRAL and BODY_KEYS[hook.form] in trees
    if can_vector:
        sources.append(_vector_function(rule, trees, vocabulary, types, ns, params, per_node))
    if "message" in trees:
        body = Emitter(vocabulary, types, ns, {}).emit(trees["message"])
        sources.append(_function("_make_message", params, None, body))
    source = "\n".join(sources)
    exec(compile(source, f"<rule {rule.file}:{rule.name}>", "exec"), ns)  # noqa: S102 - generated code
    reads = frozenset(n.name for tree in trees.values() for n in t.walk(tree)
                      if isinstance(n, t.Ident) and n.name in variables)
    return CompiledRule(rule.name, hook, rule.file, rule.line, hook.form, variables, rule.weight,
                        rule.description, rule.builtin, dict(rule.with_args), can_vector, rule.cost, source,
                        ns.get("_make_scalar"), ns.get("_make_vector"), ns.get("_make_message"), reads,
                        rule.mode)


def _scalar_body(rule: RuleInput, trees: Mapping[str, t.Expr], vocabulary: Vocabulary,
                 types: Mapping[str, TypeSpec], ns: dict[str, Any]) -> tuple[str | None, str] | None:
    emitter = Emitter(vocabulary, types, ns, {})
    guard = emitter.emit(trees["when"]) if "when" in trees else None
    form = rule.hook.form
    if form == Form.ANNOTATIONS:
        items = [f"{k.split('.', 1)[1]!r}: {emitter.emit(v)}" for k, v in trees.items()
                 if k.startswith("annotations.")]
        return guard, "{" + ", ".join(items) + "}"
    key = BODY_KEYS.get(form)
    if key is None or key not in trees:
        return None
    body = emitter.emit(trees[key])
    if form == Form.KEY and list_elem(trees[key].type) is None:
        body = f"[{body}]"
    return guard, body


def _function(name: str, params: str, guard: str | None, body: str, *, prelude: str = "",
              context: str = "") -> str:
    lines = ["def " + name + "(v_args, v_cluster):", f"    def rule({params}):", "        try:"]
    lines += [f"            {line}" for line in prelude.splitlines() if line]
    if guard is not None:
        lines += [f"            if not ({guard}):", "                return None"]
    if context:
        lines += [f"            with {context}:", f"                return {body}"]
    else:
        lines += [f"            return {body}"]
    lines += ["        except Exception as _e:", "            raise _fail(_e) from _e", "    return rule", ""]
    return "\n".join(lines)


def _vector_function(rule: RuleInput, trees: Mapping[str, t.Expr], vocabulary: Vocabulary,
                     types: Mapping[str, TypeSpec], ns: dict[str, Any], params: str,
                     vector_names: list[str]) -> str:
    """Per-node arrays in, one array out; a scalar guard that is false still means None."""
    emitter = VectorEmitter(vocabulary, types, ns, {})
    form = rule.hook.form
    body = emitter.emit(trees[BODY_KEYS[form]])
    guard_tree = trees.get("when")
    guard: str | None = None
    if guard_tree is not None and guard_tree.vector:
        body = f"_np.where({emitter.emit(guard_tree)}, {body}, {NEUTRAL[form]})"
    elif guard_tree is not None:
        guard = emitter.emit(guard_tree)
    count = f"len(v_{vector_names[0]})"
    # numpy follows IEEE for doubles (x/0.0 = inf) as CEL does, so its warnings are silenced
    return _function("_make_vector", params, guard, f"_vres({body}, _n)", prelude=f"_n = {count}",
                     context="_np.errstate(all='ignore')")


def compile_expression(tree: t.Expr, variables: tuple[str, ...], vocabulary: Vocabulary,
                       types: Mapping[str, TypeSpec], *, vector_names: frozenset[str] = frozenset(),
                       name: str = "<expression>") -> tuple[Callable[..., Any], Callable[..., Any] | None]:
    """A lone checked expression as (scalar, vector) functions of `variables`, positionally.

    The vector function exists when some variable is in `vector_names`; it is used by tests
    and tools, while rule files go through compile_rule.
    """
    params = ", ".join("v_" + n for n in variables)
    ns: dict[str, Any] = {**HELPERS, **VECTOR_HELPERS, "_fail": failure(name, "<expression>", 1)}
    source = _function("_make_scalar", params, None, Emitter(vocabulary, types, ns, {}).emit(tree))
    per_node = [n for n in variables if n in vector_names]
    if per_node:
        body = f"_vres({VectorEmitter(vocabulary, types, ns, {}).emit(tree)}, _n)"
        source += "\n" + _function("_make_vector", params, None, body, prelude=f"_n = len(v_{per_node[0]})",
                                   context="_np.errstate(all='ignore')")
    exec(compile(source, f"<rule {name}>", "exec"), ns)  # noqa: S102 - generated code
    vector = ns["_make_vector"](None, None) if per_node else None
    return ns["_make_scalar"](None, None), vector
