"""Hostile rule files: escapes from the sandbox are refused or fail as rule errors, and CEL that
once crashed the compiler is a diagnostic. The corpus lives in tests/hostile/rules/*.yaml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.cli.simulate import render_text
from kaipolicy.rules import Bundle, lint, load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.simulate import simulate_file

CORPUS = Path(__file__).resolve().parent / "rules"
POLICIES = Path(__file__).resolve().parents[2] / "policies"
CANARY = "canary-7f3a9c-never-printed"
ESCAPES = yaml.safe_load((CORPUS / "escapes.yaml").read_text(encoding="utf-8"))
COMPILER = yaml.safe_load((CORPUS / "compiler.yaml").read_text(encoding="utf-8"))
HOOKS = {"message": "predicate", "deny": "predicate", "score": "nodeOrder", "key": "taskOrder"}

SCENARIO = """\
name: hostile
actions: [allocate]
cycles: 1
queues: [{name: q, deserved: {gpu: 4}}]
nodes:
  - {name: n0, gpus: 4, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 100000000000, maxPods: 110,
     labels: {zone: a}}
jobs:
  - {name: j0, queue: q, priority: 50, perTask: {gpus: 1, cpuMillis: 1000, memoryBytes: 1000},
     tasks: [{state: Pending}, {state: Pending}]}   # two: a task order rule never sorts one
config: {tiers: [{plugins: [{name: predicates}, {name: proportion}, {name: PLUGIN}]}]}
"""


def expand(body: Any) -> str:
    """A corpus body: a string, or {repeat, times, join, suffix, close, tail} for huge inputs."""
    if isinstance(body, str):
        return body
    times = body["times"]
    return (body.get("join", "").join([body["repeat"]] * times) + body.get("suffix", "")
            + body.get("close", "") * times + body.get("tail", ""))


def rule_file(plugin: str, field: str, expr: str) -> str:
    rule: dict[str, Any] = {"name": "hostile", "hook": HOOKS[field]}
    if field == "message":
        rule |= {"deny": "true", "message": expr}
    else:
        rule[field] = expr
    return yaml.safe_dump({"plugin": plugin, "rules": [rule]}, width=10**9)


def cases(table: list[dict[str, Any]]) -> list[Any]:
    return [pytest.param(i, case, id=case["note"]) for i, case in enumerate(table)]


# ---- escapes --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def escape_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Bundle]:
    """Every escape that loads, each in its own plugin, in one bundle with the default policies."""
    folder = tmp_path_factory.mktemp("escapes")
    for i, case in enumerate(ESCAPES):
        if case["want"] in ("error", "ok"):
            (folder / f"escape{i}.yaml").write_text(rule_file(f"escape{i}", case.get("field", "message"),
                                                              case["expr"]), encoding="utf-8")
    return folder, load_bundle([POLICIES, folder], VOCABULARY)


@pytest.mark.parametrize(("index", "case"), cases(ESCAPES))
def test_an_escape_is_refused_by_lint_or_fails_as_a_rule_error_and_never_prints_the_canary(
        index: int, case: dict[str, Any], tmp_path: Path, escape_bundle: tuple[Path, Bundle],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIPOLICY_CANARY", CANARY)
    if case["want"] not in ("error", "ok"):
        path = tmp_path / "escape.yaml"
        path.write_text(rule_file("escape", case.get("field", "message"), case["expr"]), encoding="utf-8")
        diags = lint([path], VOCABULARY)
        assert case["want"] in {d.code for d in diags}, [str(d) for d in diags]
        assert all(d.line >= 1 and d.column >= 1 for d in diags if d.is_error)
        return
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO.replace("PLUGIN", f"escape{index}"), encoding="utf-8")
    result = simulate_file(scenario, escape_bundle[1])
    report = result.report()
    printed = render_text(str(scenario), report) + json.dumps(report) + "\n".join(result.audit.lines())
    assert CANARY not in printed
    failed = [e for e in report["ruleErrors"] if e.startswith(f"escape{index}/hostile: ")]
    if case["want"] == "error":
        assert failed, printed
        assert f"escape{index}.yaml:" in failed[0]          # the rule's file:line
        assert "rule errors" in render_text(str(scenario), report)
    else:
        assert not failed, failed


def test_a_dyn_value_never_reads_a_python_attribute_even_one_holding_a_secret() -> None:
    from kaipolicy.rules import EvalError
    from kaipolicy.rules.expression import compile_text

    class Holder:
        secret = CANARY

    expression = compile_text("x.secret", {"x": "dyn"})
    with pytest.raises(EvalError) as info:
        expression.scalar(Holder())
    assert CANARY not in str(info.value) and "no such field 'secret'" in str(info.value)


def test_an_argument_named_like_a_python_special_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "args.yaml"
    path.write_text("plugin: a\narguments:\n  __class__: {type: string, default: x}\nrules:\n"
                    "  - {name: r, hook: predicate, deny: 'true'}\n", encoding="utf-8")
    assert [(d.code, d.line) for d in lint([path], VOCABULARY)] == [("E307", 3)]


# ---- compiler crashes -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiler_diagnostics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """The whole corpus linted in one run, one file per case: one bad file never stops the rest."""
    folder = tmp_path_factory.mktemp("compiler")
    for i, case in enumerate(COMPILER):
        (folder / f"case{i:02}.yaml").write_text(rule_file(f"case{i}", "deny", expand(case["deny"])),
                                                 encoding="utf-8")
    by_file: dict[str, list[Any]] = {}
    for d in lint([folder], VOCABULARY):
        by_file.setdefault(Path(d.file).stem, []).append(d)
    return by_file


@pytest.mark.parametrize(("index", "case"), cases(COMPILER))
def test_crashing_cel_is_a_diagnostic_at_the_rules_place(index: int, case: dict[str, Any],
                                                          compiler_diagnostics: dict[str, list[Any]]) -> None:
    errors = [d for d in compiler_diagnostics.get(f"case{index:02}", []) if d.is_error]
    if case["want"] == "ok":
        assert errors == []
        return
    assert case["want"] in {d.code for d in errors}, [str(d) for d in errors]
    assert all(d.line >= 1 and d.column >= 1 and d.rule == "hostile" for d in errors)
