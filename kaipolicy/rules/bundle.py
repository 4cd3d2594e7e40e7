"""A bundle: every rule file of a policy, compiled all together or not at all.

`load_bundle` raises RuleError with every diagnostic when any file fails; `Bundle.hash`
names the content (audit records carry it); `Bundle.instantiate` binds a plugin's
arguments from the scheduler configuration into a `PluginInstance`; `Bundle.with_modes`
switches rules between enforce, warn and audit. Files named `*_test.yaml` are policy test
suites (`kaipolicy test`), never rule files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kaipolicy.errors import RuleError
from kaipolicy.rules.arguments import ArgumentValues, ArgValue, bind
from kaipolicy.rules.compile import BoundRule
from kaipolicy.rules.cost import DEFAULT_COST_LIMIT
from kaipolicy.rules.diagnostics import ERROR, Diagnostic, has_errors, sort_and_cap
from kaipolicy.rules.plugin import CompiledPlugin, Options, compile_file
from kaipolicy.rules.schema import SHADOWABLE
from kaipolicy.rules.vocabulary import Vocabulary

DEFAULT_VECTOR_NAMES = frozenset({"node"})
MODES = ("enforce", "warn", "audit")
TEST_SUFFIXES = ("_test.yaml", "_test.yml")


@dataclass(frozen=True)
class PluginInstance:
    """A plugin with its arguments bound. `cluster` is bound per cycle with bind_cluster().

    `args` are the values as a dict; `arg_values` is the object expressions see as `args`.
    """

    plugin: CompiledPlugin
    args: Mapping[str, ArgValue]
    rules: tuple[BoundRule, ...]
    cluster: Any = None
    arg_values: ArgumentValues = field(default_factory=lambda: ArgumentValues({}), repr=False)

    def bind_cluster(self, cluster: Any) -> PluginInstance:
        """A copy whose rules see `cluster` (rebinding closures costs a few microseconds per rule)."""
        rules = tuple(r.rule.bind(self.arg_values, cluster) for r in self.rules)
        return replace(self, rules=rules, cluster=cluster)

    def rules_for(self, hook: str) -> tuple[BoundRule, ...]:
        return tuple(r for r in self.rules if r.rule.hook.name == hook)


@dataclass(frozen=True)
class Bundle:
    plugins: Mapping[str, CompiledPlugin]
    hash: str
    diagnostics: tuple[Diagnostic, ...] = ()  # warnings kept from a successful load

    def instantiate(self, name: str, arguments: Mapping[str, ArgValue] | None = None) -> PluginInstance:
        """Bind configured arguments (strings are parsed); unknown plugin or argument: RuleError."""
        plugin = self.plugins.get(name)
        if plugin is None:
            known = ", ".join(sorted(self.plugins)) or "none"
            raise RuleError([Diagnostic("E601", ERROR, "<configuration>", 0, 0,
                                        f"unknown plugin {name!r} (bundle has: {known})")])
        values, problems = bind(plugin.arguments, arguments or {})
        if problems:
            raise RuleError([Diagnostic("E602", ERROR, plugin.file, 0, 0, f"plugin {name!r}: {p}")
                             for p in problems])
        rules = tuple(rule.bind(values, None) for rule in plugin.rules)
        return PluginInstance(plugin, values.as_dict(), rules, None, values)

    def rule_labels(self) -> list[str]:
        """Every rule as "plugin/rule", in file order."""
        return [f"{p.name}/{r.name}" for p in self.plugins.values() for r in p.rules]

    def with_arguments(self, arguments: Mapping[str, Mapping[str, Any]]) -> Bundle:
        """A copy whose plugins take these values as their argument defaults (a scheduler
        configuration's values still win); an unknown plugin or argument is a RuleError."""
        plugins = dict(self.plugins)
        problems: list[Diagnostic] = []
        for name, given in sorted(arguments.items()):
            plugin = plugins.get(name)
            if plugin is None:
                problems.append(Diagnostic("E601", ERROR, "<arguments>", 0, 0, f"unknown plugin {name!r}"))
                continue
            values, errors = bind(plugin.arguments, given)
            problems += [Diagnostic("E602", ERROR, plugin.file, 0, 0, f"plugin {name!r}: {e}") for e in errors]
            defaults = values.as_dict()
            plugins[name] = replace(plugin, arguments={n: replace(a, default=defaults[n])
                                                       for n, a in plugin.arguments.items()})
        if problems:
            raise RuleError(problems)
        given_text = repr(sorted((k, sorted(v.items())) for k, v in arguments.items()))
        digest = hashlib.sha256(f"{self.hash}|{given_text}".encode()).hexdigest()
        return Bundle(plugins, digest, self.diagnostics)

    def with_modes(self, modes: Mapping[str, str]) -> Bundle:
        """A copy with the rules named "plugin/rule" switched to the given mode (and a new hash).

        An unknown rule, an unknown mode or a mode on a rule that is always enforced is a
        RuleError naming the rule."""
        problems = _mode_problems(self, modes)
        if problems:
            raise RuleError([Diagnostic("E603", ERROR, "<modes>", 0, 0, p) for p in problems])
        plugins = {name: replace(p, rules=tuple(replace(r, mode=modes.get(f"{name}/{r.name}", r.mode))
                                                for r in p.rules))
                   for name, p in self.plugins.items()}
        changed = ",".join(f"{k}={v}" for k, v in sorted(modes.items()))
        digest = hashlib.sha256(f"{self.hash}|{changed}".encode()).hexdigest()
        return Bundle(plugins, digest, self.diagnostics)


def _mode_problems(bundle: Bundle, modes: Mapping[str, str]) -> list[str]:
    rules = {f"{p.name}/{r.name}": r for p in bundle.plugins.values() for r in p.rules}
    problems = []
    for label, mode in sorted(modes.items()):
        rule = rules.get(label)
        if rule is None:
            problems.append(f"no rule {label!r} in the bundle (rules are named plugin/rule)")
        elif mode not in MODES:
            problems.append(f"rule {label!r}: mode {mode!r} is not one of {', '.join(MODES)}")
        elif mode != "enforce" and rule.form not in SHADOWABLE:
            problems.append(f"rule {label!r}: a {rule.form.value} rule is always enforced")
    return problems


def rule_files(paths: Sequence[str | Path]) -> list[Path]:
    """Files named directly, plus every *.yaml (and *.yml) under named directories, sorted;
    test suites (*_test.yaml) found in a directory are left out."""
    out: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
                          and not p.name.endswith(TEST_SUFFIXES))
        else:
            out.append(path)
    return out


def compile_paths(paths: Sequence[str | Path], vocabulary: Vocabulary, *,
                  vector_names: frozenset[str] = DEFAULT_VECTOR_NAMES,
                  cost_limit: int = DEFAULT_COST_LIMIT) -> tuple[dict[str, CompiledPlugin], list[Diagnostic]]:
    """Every file compiled; plugins by name and all diagnostics (sorted, capped)."""
    files = rule_files(paths)
    where = ", ".join(map(str, paths)) or "<none>"
    return _compile_all([(str(f), None) for f in files], Options(vocabulary, frozenset(vector_names), cost_limit),
                        where)


def compile_texts(files: Mapping[str, str], vocabulary: Vocabulary, *,
                  vector_names: frozenset[str] = DEFAULT_VECTOR_NAMES,
                  cost_limit: int = DEFAULT_COST_LIMIT) -> tuple[dict[str, CompiledPlugin], list[Diagnostic]]:
    """`compile_paths` for rule files given as name -> text (a ConfigMap's keys): the same stages
    and limits, and diagnostics naming each file by its name here."""
    return _compile_all(sorted(files.items()), Options(vocabulary, frozenset(vector_names), cost_limit),
                        "<no files>")


def _compile_all(files: Sequence[tuple[str, str | None]], options: Options,
                 where: str) -> tuple[dict[str, CompiledPlugin], list[Diagnostic]]:
    plugins: dict[str, CompiledPlugin] = {}
    diags: list[Diagnostic] = []
    if not files:
        diags.append(Diagnostic("E005", ERROR, where, 0, 0, "no rule files found"))
    for path, text in files:
        plugin, file_diags = _compile_one(path, options, text)
        diags += file_diags
        if plugin is None:
            continue
        if plugin.name in plugins:
            first = plugins[plugin.name].file
            diags.append(Diagnostic("E107", ERROR, plugin.file, 1, 1,
                                    f"plugin {plugin.name!r} is already defined in {first}"))
            continue
        plugins[plugin.name] = plugin
    return plugins, sort_and_cap(diags)


def _compile_one(path: str, options: Options, text: str | None = None) -> tuple[CompiledPlugin | None, list[Diagnostic]]:
    """One file; whatever goes wrong inside is that file's diagnostic (E901), never the end of
    the run: the other files are still compiled and reported."""
    try:
        return compile_file(path, options, text)
    except Exception as err:  # noqa: BLE001 - one bad file must not stop the others
        reason = f"{type(err).__name__}: {err}"[:300]
        return None, [Diagnostic("E901", ERROR, path, 0, 0, f"the file could not be compiled ({reason})")]


def load_bundle(paths: Sequence[str | Path], vocabulary: Vocabulary, *,
                vector_names: frozenset[str] = DEFAULT_VECTOR_NAMES,
                cost_limit: int = DEFAULT_COST_LIMIT) -> Bundle:
    """All files compile, or RuleError carrying every diagnostic."""
    return _bundle(*compile_paths(paths, vocabulary, vector_names=vector_names, cost_limit=cost_limit))


def load_texts(files: Mapping[str, str], vocabulary: Vocabulary, *,
               vector_names: frozenset[str] = DEFAULT_VECTOR_NAMES,
               cost_limit: int = DEFAULT_COST_LIMIT) -> Bundle:
    """`load_bundle` for rule files given as name -> text; the same content gives the same hash."""
    return _bundle(*compile_texts(files, vocabulary, vector_names=vector_names, cost_limit=cost_limit))


def _bundle(plugins: dict[str, CompiledPlugin], diags: list[Diagnostic]) -> Bundle:
    if has_errors(diags):
        raise RuleError(diags)
    digest = hashlib.sha256()
    for text in sorted(hashlib.sha256(p.text.encode("utf-8")).hexdigest() for p in plugins.values()):
        digest.update(text.encode("ascii"))
    return Bundle(dict(sorted(plugins.items())), digest.hexdigest(), tuple(diags))
