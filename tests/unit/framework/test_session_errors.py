"""A rule that fails is an error outcome on exactly the nodes it fails on, never the end of a
cycle: vector failures fall back to scalar evaluation, failing messages get a fallback, and an
over-budget rule is stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kaipolicy.cli.simulate import render_text
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.simulate import simulate_file

POLICIES = Path(__file__).resolve().parents[3] / "policies"

SCENARIO = """\
name: errors
actions: [allocate]
cycles: 1
queues: [{name: q, deserved: {gpu: 8}}]
nodes:
  - {name: a-cpu, gpus: 0, cpuMillis: 8000, memoryBytes: 100000000000, maxPods: 110, labels: LABELS}
  - {name: b-gpu, gpus: 4, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 100000000000, maxPods: 110,
     labels: LABELS}
jobs:
  - {name: j0, queue: q, priority: 50, perTask: {gpus: 0, cpuMillis: 1000, memoryBytes: 1000},
     tasks: [{state: Pending}]}
config: {tiers: [{plugins: [{name: predicates}, {name: proportion}, {name: hostile}]}]}
"""


def run(tmp_path: Path, rules: str, labels: int = 1, cost_limit: int | None = None) -> tuple[dict[str, Any], str]:
    policy = tmp_path / "hostile"
    policy.mkdir()
    (policy / "hostile.yaml").write_text("plugin: hostile\nrules:\n" + rules, encoding="utf-8")
    scenario = tmp_path / "scenario.yaml"
    label_map = "{" + ", ".join(f"l{i}: v" for i in range(labels)) + "}"
    scenario.write_text(SCENARIO.replace("LABELS", label_map), encoding="utf-8")
    options = {"cost_limit": cost_limit} if cost_limit else {}
    bundle = load_bundle([POLICIES, policy], VOCABULARY, **options)
    report = simulate_file(scenario, bundle).report()
    return report, render_text(str(scenario), report)


def test_a_vector_rule_failing_on_one_node_rejects_only_that_node(tmp_path: Path) -> None:
    report, _ = run(tmp_path, '  - {name: per-gpu, hook: predicate, deny: "10 / node.gpuCount > 100"}\n')
    assert report["tasks"][0]["node"] == "b-gpu"
    assert len(report["ruleErrors"]) == 1
    assert report["ruleErrors"][0].startswith("hostile/per-gpu: ") and "division by zero" in report["ruleErrors"][0]


@pytest.mark.parametrize("hook", ["predicate", "prePredicate"])
def test_a_failing_message_is_a_rule_error_with_a_fallback_and_the_cycle_goes_on(tmp_path: Path, hook: str) -> None:
    deny = "node.name == 'a-cpu'" if hook == "predicate" else "true"
    report, text = run(tmp_path, f'  - {{name: loud, hook: {hook}, deny: "{deny}", '
                                 f'message: "string(10 / (size(task.name) - size(task.name)))"}}\n')
    assert any("its message failed" in e and "division by zero" in e for e in report["ruleErrors"])
    if hook == "predicate":
        assert report["tasks"][0]["node"] == "b-gpu"     # the other node still served the task
    else:
        assert "denied by hostile/loud (its message failed)" in report["jobs"][0]["fitError"]
    assert "rule errors (rules that failed while evaluating; not denials):" in text


def test_rule_errors_print_apart_from_denials_with_the_rules_file_and_line(tmp_path: Path) -> None:
    _, text = run(tmp_path, '  - {name: per-gpu, hook: predicate, deny: "10 / node.gpuCount > 100"}\n')
    section = text.split("rule errors (rules that failed while evaluating; not denials):")[1]
    assert "hostile/per-gpu: " in section and "hostile.yaml:3:" in section


def test_a_pathological_rule_over_its_budget_is_an_error_and_the_cycle_finishes(tmp_path: Path) -> None:
    # 300 labels: the triple comprehension would walk 27 million items per node; the meter
    # stops it after its budget once per compiled form, and the cycle goes on without it
    rule = ('  - {name: cube, hook: predicate, deny: "node.labels.all(a, node.labels.all(b, '
            'node.labels.all(c, a + b + c != \'\')))"}\n')
    report, text = run(tmp_path, rule, labels=300, cost_limit=10**12)
    assert report["ruleErrors"] and all("run-time budget" in e for e in report["ruleErrors"])
    assert all(e.startswith("hostile/cube: ") for e in report["ruleErrors"])
    assert report["tasks"][0]["status"] == "Pending"      # a failing predicate rejects its node
    assert "hostile/cube" in text


def test_lint_refuses_the_same_rule_by_its_static_cost(tmp_path: Path) -> None:
    from kaipolicy.rules import lint
    path = tmp_path / "cube.yaml"
    path.write_text("plugin: cube\nrules:\n  - {name: cube, hook: predicate, deny: \"node.labels.all(a, "
                    "node.labels.all(b, node.labels.all(c, a + b + c != '')))\"}\n", encoding="utf-8")
    assert [d.code for d in lint([path], VOCABULARY) if d.is_error] == ["E401"]
