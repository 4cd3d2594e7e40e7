"""Node scores summed in one pass give the very bits of the rule-by-rule sum; scoring only the
nodes a caller reads gives them the very bits they have among all; a rule that raises sends the
scoring back to the rule-by-rule path, which records the error on the nodes it fails on."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cycle import open_session
from kaipolicy.framework import session
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.config import Params, config_from
from kaipolicy.framework.session import Session
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.fuzz.generate import scenario as fuzz_scenario
from tests.fuzz.reclaim_pressure import scenario as pressure_scenario
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def _both_ways(ssn: Session) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every pending task's scores over every node, summed in one pass and rule by rule."""
    out = []
    nodes = ssn.node_list
    for j in ssn.cluster.jobs.values():
        for t in j.tasks.values():
            if not t.should_allocate(False):
                continue
            assert ssn._summing_scores
            summed = ssn.node_scores(t, j, nodes)
            ssn._summing_scores = False
            try:
                by_rule = ssn.node_scores(t, j, nodes)
            finally:
                ssn._summing_scores = True
            out.append((summed, by_rule))
    return out


# weighted parts of every kind the sum adds: a live column, a computed array, a constant, zero,
# a guard that is false, and a bool made a number
WEIGHTED = """\
plugin: weighted
enable: always
rules:
  - {name: column, hook: nodeOrder, weight: 2.5, score: "node.freeGpus"}
  - {name: computed, hook: nodeOrder, weight: 0.1, score: "node.freeCpuMillis / 3.0 + 0.7"}
  - {name: constant, hook: nodeOrder, weight: 3.0, score: "task.cpuOnly ? 0.3 : 1.7"}
  - {name: zero, hook: nodeOrder, weight: 7.0, score: "0.0"}
  - {name: guarded, hook: nodeOrder, weight: 1.3, when: "task.cpuOnly", score: "1.0 / 3.0"}
  - {name: flag, hook: nodeOrder, weight: 0.3, score: "node.cpuOnly ? 1.0 : 0.0"}
"""


@pytest.fixture(scope="module")
def weighted_bundle(tmp_path_factory: pytest.TempPathFactory) -> Any:
    policy = tmp_path_factory.mktemp("weighted")
    (policy / "weighted.yaml").write_text(WEIGHTED)
    return load_bundle([POLICIES, policy], VOCABULARY)


@pytest.mark.parametrize("seed", range(0, 400, 7))
@pytest.mark.parametrize("weighted", [False, True])
def test_summed_scores_are_the_rule_by_rule_sum_bit_for_bit(seed: int, weighted: bool, weighted_bundle: Any) -> None:
    scn = scenario_from_doc(fuzz_scenario(seed), f"<fuzz {seed}>")
    params = Params.from_scenario(scn.params, scn.stale_grace_seconds)
    bundle = weighted_bundle if weighted else default_bundle()
    ssn = open_session(scn.snapshot(), config_from(scn.config, actions=scn.actions, params=params), bundle)
    pairs = _both_ways(ssn)
    assert pairs or not any(t.should_allocate(False) for j in ssn.cluster.jobs.values() for t in j.tasks.values())
    for summed, by_rule in pairs:
        assert summed.dtype == by_rule.dtype == np.float64
        assert np.array_equal(summed.view(np.int64), by_rule.view(np.int64))


@pytest.mark.parametrize("start", range(0, 100, 25))
@pytest.mark.parametrize("weighted", [False, True])
def test_the_nodes_read_score_alone_as_they_score_among_all(start: int, weighted: bool, weighted_bundle: Any) -> None:
    """Bin-packing compares each node with the emptiest and fullest of the whole set (every node,
    or some of them), so it is the case that must keep its bits when only a few nodes are scored."""
    bundle = weighted_bundle if weighted else default_bundle()
    compared = 0
    for seed in range(start, start + 25):
        scn = scenario_from_doc(pressure_scenario(seed), f"<pressure {seed}>")
        params = Params.from_scenario(scn.params, scn.stale_grace_seconds)
        ssn = open_session(scn.snapshot(), config_from(scn.config, actions=scn.actions, params=params), bundle)
        assert ssn._lone_unscored     # every node-order rule is total: the nodes left out could record nothing
        rng = random.Random(seed)
        some = [n for n in ssn.node_list if rng.random() < 0.7]
        for nodes in (ssn.node_list, some):
            k = int(len(nodes) * session.PART_SHARE)
            if k == 0:
                continue      # too few nodes to score some alone
            for j in ssn.cluster.jobs.values():
                for t in j.tasks.values():
                    if not t.should_allocate(False):
                        continue
                    whole = ssn.node_scores(t, j, nodes)
                    read = np.zeros(len(nodes), dtype=bool)
                    read[rng.sample(range(len(nodes)), k)] = True
                    part = ssn.node_scores(t, j, nodes, read)
                    if ssn.table.view(nodes).every:
                        # over every node the rules read kept arrays: all are scored
                        assert np.array_equal(part.view(np.int64), whole.view(np.int64))
                        continue
                    assert np.array_equal(part[read].view(np.int64), whole[read].view(np.int64))
                    assert not part[~read].any()      # only the nodes read were scored
                    compared += 1
    assert compared > 10


def test_scoring_many_of_the_nodes_scores_them_all() -> None:
    scn = scenario([node(f"n{i}", gpus=8) for i in range(5)], [job("a")])
    ssn = open_session(scn.snapshot(), config_from(None, actions=["allocate"]), default_bundle())
    a = ssn.cluster.jobs["a"]
    t = next(iter(a.tasks.values()))
    some = ssn.node_list[:4]
    read = np.array([True, True, False, False])     # half the nodes: past the share scored alone
    assert np.array_equal(ssn.node_scores(t, a, some, read), ssn.node_scores(t, a, some))


def test_the_audit_log_keeps_each_rule_s_part() -> None:
    scn = scenario([node("n0"), node("n1", gpus=8)], [job("a")])
    ssn = open_session(scn.snapshot(), config_from(None, actions=["allocate"]), default_bundle(),
                       audit=Audit(enabled=True))
    t = next(iter(ssn.cluster.jobs["a"].tasks.values()))
    total = ssn.node_scores(t, ssn.cluster.jobs["a"], ssn.node_list)
    sheet = ssn.last_scores
    assert sheet.total is total and sheet.parts     # the parts the audit log reads were kept
    assert np.array_equal(sum(sheet.parts.values()), total)


SCORE_RULE = """\
plugin: hostile
rules:
  - name: per-gpu
    hook: nodeOrder
    score: "double(100 / node.gpuCount)"
"""


def test_a_score_rule_failing_on_some_nodes_is_an_error_there_and_scores_the_rest(tmp_path: Path) -> None:
    policy = tmp_path / "hostile"
    policy.mkdir()
    (policy / "hostile.yaml").write_text(SCORE_RULE)
    bundle = load_bundle([POLICIES, policy], VOCABULARY)
    scn = scenario([node("cpu", gpus=0), node("gpu4", gpus=4)], [job("a", perTask={"cpuMillis": 1000})])
    config = config_from({"tiers": [{"plugins": [{"name": "predicates"}, {"name": "hostile"}]}]},
                         actions=["allocate"])
    ssn = open_session(scn.snapshot(), config, bundle)
    assert ssn._summing_scores
    a = ssn.cluster.jobs["a"]
    scores = ssn.node_scores(next(iter(a.tasks.values())), a, ssn.node_list)
    assert scores.tolist() == [0.0, 25.0]          # the failing node scores nothing
    assert len(ssn.errors) == 1 and "hostile/per-gpu" in ssn.errors[0].rule
