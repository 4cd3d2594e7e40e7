"""Which rules cannot fail at run time (and so may go unevaluated where their value is not
needed), and the engine leaving a lone candidate unscored only when scoring could record nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.actions.placement import allocate_task
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import config_from
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.unit.helpers import job, node, scenario
from tests.unit.rules.rules_fixtures import POLICIES, node_order_cases

CASES = {
    # total: typed fields, comparisons, booleans, double arithmetic, conditionals, safe functions
    "double-math": ("node.freeGpus * 2.0 - node.freeCpuMillis / 1000.0", True),
    "conditional": ("task.cpuOnly && node.cpuOnly ? 10.0 : 0.0", True),
    "fits": ("fits.idle(task, node) ? 100.0 : 0.0", True),
    "binpack-literal": ("placement.binpack(cluster, node, 'gpu')", True),
    "converted-int": ("double(node.gpuCount) + 0.5", True),
    "sizes": ("size(node.labels) > 3 && node.name.startsWith('n') ? 1.0 : 0.0", True),
    "argument": ("args.weight * 3.0", True),
    # partial: integer arithmetic, lookups, parsing conversions, comprehensions, unknown values
    "int-division": ("double(100 / node.gpuCount)", False),
    "int-sum": ("double(node.gpuCount + 1)", False),
    "map-index": ("node.labels['zone'] == 'a' ? 1.0 : 0.0", False),
    "map-select": ("node.labels.zone == 'a' ? 1.0 : 0.0", False),
    "binpack-argument": ("placement.binpack(cluster, node, args.resource)", False),
    "to-int": ("double(int(node.freeGpus))", False),
    "comprehension": ("task.labels.exists(k, k == 'a') ? 1.0 : 0.0", False),
    "parsed": ("double(node.name)", False),
}


def _bundle(tmp_path: Path) -> object:
    return node_order_cases(tmp_path, {name: expr for name, (expr, _) in CASES.items()})


def test_a_rule_is_total_exactly_when_nothing_in_it_can_fail(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    found = {r.name: r.total for r in bundle.plugins["cases"].rules}   # type: ignore[attr-defined]
    assert found == {name: total for name, (_, total) in CASES.items()}


def test_the_default_node_order_rules_are_total() -> None:
    bundle = load_bundle([POLICIES], VOCABULARY)
    assert all(r.total for p in bundle.plugins.values() for r in p.rules if r.hook.name == "nodeOrder")


def _lone(tmp_path: Path, extra: str | None, monkeypatch: pytest.MonkeyPatch) -> tuple[int, object]:
    """Place a one-GPU pod that fits one node of four (two are full, one has no GPU); count the scorings."""
    dirs = [POLICIES]
    plugins = [{"name": "predicates"}, {"name": "nodeplacement"}]
    if extra is not None:
        (tmp_path / "extra.yaml").write_text("plugin: extra\nrules:\n" + extra)
        dirs.append(tmp_path)
        plugins.append({"name": "extra"})
    bundle = load_bundle(dirs, VOCABULARY)
    full = [job(f"full-{n}", "q0", [{"state": "Running", "node": n}] * 4) for n in ("n0", "n2")]
    scn = scenario([node("n0"), node("n1"), node("n2"), node("n3", gpus=0)], [*full, job("want")])
    ssn = open_session(scn.snapshot(), config_from({"tiers": [{"plugins": plugins}]}, actions=["allocate"]), bundle)
    calls = []
    scores = ssn.node_scores
    monkeypatch.setattr(ssn, "node_scores", lambda *a: calls.append(1) or scores(*a))
    want = ssn.cluster.jobs["want"]
    task = next(iter(want.tasks.values()))
    stmt = ssn.statement()
    assert allocate_task(ssn, stmt, ssn.node_list, want, task, pipeline_only=True)
    assert task.node == "n1"
    return len(calls), ssn


def test_a_lone_candidate_is_not_scored_when_every_node_order_rule_is_total(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    scored, _ = _lone(tmp_path, None, monkeypatch)
    assert scored == 0


def test_a_rule_that_may_fail_is_still_evaluated_and_its_error_recorded(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    scored, ssn = _lone(tmp_path, '  - {name: per-gpu, hook: nodeOrder, score: "double(100 / node.gpuCount)"}\n',
                        monkeypatch)
    assert scored == 1
    assert [e.rule for e in ssn.errors] == ["extra/per-gpu"]   # n3 has no GPU: 100 / 0
