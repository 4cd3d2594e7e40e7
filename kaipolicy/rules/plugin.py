"""One rule file through every stage: source, schema, parse, check, cost, compile.

Problems from every stage and every rule are collected; a file with any error yields
no plugin. `CompiledPlugin` is the result for a file that compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaipolicy.rules.arguments import Argument
from kaipolicy.rules.check import Checker, result_problem
from kaipolicy.rules.compile import CompiledRule, RuleInput, compile_rule
from kaipolicy.rules.cost import estimate
from kaipolicy.rules.diagnostics import WARNING, Diagnostic, has_errors
from kaipolicy.rules.parse import ParseError, parse
from kaipolicy.rules.schema import PluginSpec, RuleSpec, check_structure
from kaipolicy.rules.source import SourceFile, read_source
from kaipolicy.rules.tree import Expr
from kaipolicy.rules.vocabulary import FieldSpec, TypeSpec, Vocabulary

ARGS_TYPE = "Args"


@dataclass(frozen=True)
class CompiledPlugin:
    name: str
    file: str
    description: str
    reference: str
    arguments: dict[str, Argument]
    rules: tuple[CompiledRule, ...]
    text: str
    enable: str = "configured"    # always: runs even where the scheduler configuration does not list it


@dataclass(frozen=True)
class Options:
    vocabulary: Vocabulary
    vector_names: frozenset[str]
    cost_limit: int


def compile_file(path: str, options: Options, text: str | None = None
                 ) -> tuple[CompiledPlugin | None, list[Diagnostic]]:
    src, diags = read_source(path, text)
    if src.data is None:
        return None, diags
    spec, structural = check_structure(src)
    diags += structural
    if spec is None:
        return None, diags
    types = {ARGS_TYPE: TypeSpec(ARGS_TYPE, {n: FieldSpec(n, a.type, n) for n, a in spec.arguments.items()},
                                 by_key=True)}
    rules = []
    for rule in spec.rules:
        compiled, rule_diags = _guarded(src, spec, rule, options, types)
        diags += rule_diags
        if compiled is not None:
            rules.append(compiled)
    if has_errors(diags):
        return None, diags
    plugin = CompiledPlugin(spec.name, src.path, spec.description, spec.reference, spec.arguments,
                            tuple(rules), src.text, spec.enable)
    return plugin, diags


def _guarded(src: SourceFile, spec: PluginSpec, rule: RuleSpec, options: Options,
             types: dict[str, TypeSpec]) -> tuple[CompiledRule | None, list[Diagnostic]]:
    """_compile_rule, with any failure of the compiler itself reported at the rule (E901)
    instead of a traceback, so that lint goes on with the other rules and files."""
    try:
        return _compile_rule(src, spec, rule, options, types)
    except Exception as err:  # noqa: BLE001 - a compiler bug must not hide other problems
        line, col = src.place(("rules", rule.index, "name"))
        reason = f"{type(err).__name__}: {err}"[:300]
        return None, [src.diagnostic("E901", f"the rule could not be compiled ({reason}); please report this",
                                     line, col, rule=rule.name)]


def _compile_rule(src: SourceFile, spec: PluginSpec, rule: RuleSpec, options: Options,
                  types: dict[str, TypeSpec]) -> tuple[CompiledRule | None, list[Diagnostic]]:
    diags: list[Diagnostic] = []
    trees: dict[str, Expr] = {}
    for key, text in rule.expressions.items():
        try:
            trees[key] = parse(text)
        except ParseError as err:
            line, col = src.expr_place(rule.path(key), err.pos)
            message = f"syntax error: {err.message}" if err.code == "E201" else err.message
            diags.append(src.diagnostic(err.code, message, line, col, rule=rule.name))
    vocabulary = options.vocabulary
    variables = {n: vocabulary.variables.get(n, "dyn") for n in rule.hook.names}
    variables |= {"args": ARGS_TYPE, "cluster": vocabulary.variables.get("cluster", "dyn")}
    checker = Checker(vocabulary, variables, types, options.vector_names & set(rule.hook.names))
    vectorizable, cost = True, 0
    for key, tree in trees.items():
        checked = checker.check(tree)
        for problem in checked.problems:
            line, col = src.expr_place(rule.path(key), problem.pos)
            diags.append(src.diagnostic(problem.code, problem.message, line, col, rule=rule.name))
        wrong = result_problem(key, checked.type) if not checked.problems else None
        if wrong is not None:
            line, col = src.expr_place(rule.path(key), 0)
            diags.append(src.diagnostic("E306", wrong, line, col, rule=rule.name))
        novec = checked.not_vectorizable
        if novec is not None and key != "message" and vectorizable:
            vectorizable = False
            line, col = src.expr_place(rule.path(key), novec.pos)
            diags.append(src.diagnostic(novec.code, novec.message, line, col, rule=rule.name, severity=WARNING))
        cost = max(cost, _cost(src, rule, key, tree, options, types, diags))
    if has_errors(diags):
        return None, diags
    data = RuleInput(rule.name, rule.hook, src.path, rule.line, rule.weight, rule.description, rule.builtin,
                     rule.with_args, cost, rule.mode)
    return compile_rule(data, trees, vocabulary, dict(vocabulary.types) | types, vectorizable,
                        options.vector_names), diags


def _cost(src: SourceFile, rule: RuleSpec, key: str, tree: Expr, options: Options, types: dict[str, TypeSpec],
          diags: list[Diagnostic]) -> int:
    vocabulary = options.vocabulary
    cost = estimate(tree, dict(vocabulary.types) | types, vocabulary.functions)
    if cost > options.cost_limit:
        line, col = src.expr_place(rule.path(key), 0)
        msg = (f"{key!r} may cost {cost} units per evaluation, over the limit of {options.cost_limit} "
               "(comprehensions multiply by their list's declared size)")
        diags.append(src.diagnostic("E401", msg, line, col, rule=rule.name))
    return cost
