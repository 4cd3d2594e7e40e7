"""Which node-order rules score the other nodes alike for the next pod of a run (so that a run's
scores may be carried from one pod to the next, only the node the last pod landed on scored
again), and what the set-relative ones among them compare against; which task-order rules give
a pod the same key all session long."""

from __future__ import annotations

from pathlib import Path

from kaipolicy.cycle import open_session
from kaipolicy.framework.config import config_from
from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY
from tests.unit.helpers import job, node, scenario
from tests.unit.rules.rules_fixtures import POLICIES, node_order_cases

#: expression -> the literal arguments of its set-relative calls, or None when it is not carried
CASES = {
    # the node, the pod's request, the job's fixed fields, arguments and per-node functions
    "fits": ("fits.idle(task, node) ? 100.0 : 0.0", ()),
    "shared": ("fits.sharedGroup(task, node) ? 1000.0 : 0.0", ()),
    "request": ("task.gpus * 2.0 + task.cpuMillis / 1000.0 + (task.sharedGpu ? 1.0 : 0.0)", ()),
    "node-labels": ("node.labels.exists(k, k == 'zone') ? 1.0 : 0.0", ()),
    "job-fixed": ("job.priority > 5 && job.queue == 'q' ? 1.0 : 0.0", ()),
    "argument": ("args.weight * placement.spread(node.freeGpus, double(node.gpuCount))", ()),
    "fragments": ("gpu.fragmentsAfter(task, node, 1.0, 0.0) - gpu.fragments(node, 1.0, 0.0)", ()),
    "binpack-gpu": ("placement.binpack(cluster, node, 'gpu')", ("gpu",)),
    "binpack-both": ("placement.binpack(cluster, node, 'gpu') + placement.binpack(cluster, node, 'cpu')",
                     ("gpu", "cpu")),
    "topology": ("topology.preferredScore(cluster, task, job, node)", ()),
    # the pod beyond its request, state a placement moves, functions reading more than the node
    "pod-name": ("task.name.startsWith('a') ? 1.0 : 0.0", None),
    "pod-labels": ("task.labels.exists(k, k == 'a') ? 1.0 : 0.0", None),
    "pod-status": ("task.status == 'Pending' ? 1.0 : 0.0", None),
    "whole-pod": ("size([task]) > 0 ? 1.0 : 0.0", None),
    "binpack-argument": ("placement.binpack(cluster, node, args.resource)", None),
    "node-affinity": ("affinity.nodeMatches(task, node) ? 1.0 : 0.0", None),
    "pod-affinity": ("affinity.podFits(cluster, task, node) ? 1.0 : 0.0", None),
    "queue-on-node": ("capacity.onNode(cluster, task, job, node) == '' ? 1.0 : 0.0", None),
    "elastic": ("job.elasticState > 0 ? 1.0 : 0.0", None),
}


def _rules(tmp_path: Path, extra: str = "") -> dict[str, object]:
    bundle = node_order_cases(tmp_path, {name: expr for name, (expr, _) in CASES.items()}, extra)
    return {r.name: r for r in bundle.plugins["cases"].rules}   # type: ignore[attr-defined]


def test_a_rule_is_carried_exactly_when_it_reads_no_more_than_its_node_and_the_request(tmp_path: Path) -> None:
    rules = _rules(tmp_path)
    found = {name: None if r.alike_scopes is None else tuple(args for _, args in r.alike_scopes)   # type: ignore[attr-defined]
             for name, r in rules.items()}
    want = {name: None if scopes is None else tuple((a,) for a in scopes) for name, (_, scopes) in CASES.items()}
    assert found == want


def test_a_guard_counts_as_much_as_the_score(tmp_path: Path) -> None:
    extra = ('  - {name: named, hook: nodeOrder, when: "task.name == \'a\'", score: "1.0"}\n'
             '  - {name: requested, hook: nodeOrder, when: "task.cpuOnly", score: "1.0"}\n')
    rules = _rules(tmp_path, extra)
    assert rules["named"].alike_scopes is None   # type: ignore[attr-defined]
    assert rules["requested"].alike_scopes == ()   # type: ignore[attr-defined]


def test_the_default_node_order_rules_are_carried_against_the_bin_packing_bounds() -> None:
    bundle = load_bundle([POLICIES], VOCABULARY)
    node_order = [r for p in bundle.plugins.values() for r in p.rules if r.hook.name == "nodeOrder"]
    assert node_order and all(r.alike_scopes is not None for r in node_order)
    literals = {args for r in node_order for _, args in r.alike_scopes}
    assert literals == {("gpu",), ("cpu",)}


#: task-order key -> whether it reads only the pod's fields that never change
KEYS = {
    "labels": ("'p' in task.labels ? [1] : [0]", True),
    "name": ("[size(task.name), task.gpus > 0.5 ? 1 : 0]", True),
    "status": ("[task.status == 'Pending' ? 0 : 1]", False),
    "job": ("[job.priority]", False),
    "whole-pod": ("[size([task])]", False),
    "argument": ("[args.rank]", True),
}


def test_a_task_key_is_kept_exactly_when_it_reads_only_the_pods_fixed_fields(tmp_path: Path) -> None:
    cases = KEYS
    rules = "\n".join(f'  - {{name: {name}, hook: taskOrder, key: "{expr}"}}' for name, (expr, _) in cases.items())
    (tmp_path / "keys.yaml").write_text("plugin: keys\narguments:\n  rank: {type: int, default: 1}\nrules:\n" + rules + "\n")
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    found = {r.name: r.fixed_for_pod for r in bundle.plugins["keys"].rules}   # type: ignore[attr-defined]
    assert found == {name: fixed for name, (_, fixed) in cases.items()}


def test_the_default_task_order_rules_give_a_pod_its_key_for_the_session() -> None:
    bundle = load_bundle([POLICIES], VOCABULARY)
    task_order = [r for p in bundle.plugins.values() for r in p.rules if r.hook.name == "taskOrder"]
    assert task_order and all(r.fixed_for_pod for r in task_order)


def test_a_kept_key_is_the_rules_own_and_a_failing_one_is_asked_again(tmp_path: Path) -> None:
    (tmp_path / "keys.yaml").write_text(
        "plugin: keys\nrules:\n  - {name: parsed, hook: taskOrder, key: \"[int(task.labels['rank'])]\"}\n")
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    pods = [{"state": "Pending", "labels": {"rank": "3"}}, {"state": "Pending", "labels": {"rank": "x"}}]
    scn = scenario([node("n0")], [job("j", tasks=pods)])
    config = config_from({"tiers": [{"plugins": [{"name": "keys"}]}]}, actions=["allocate"])
    ssn = open_session(scn.snapshot(), config, bundle)
    j = ssn.cluster.jobs["j"]
    good, bad = sorted(j.tasks.values(), key=lambda t: t.name)
    first = ssn.task_key(good, j)
    assert ssn.task_key(good, j) is first     # kept
    errors = len(ssn.errors)
    ssn.task_key(bad, j)
    ssn.task_key(bad, j)
    assert len(ssn.errors) == errors + 2    # not kept: each ask records the error


def test_every_field_of_the_model_is_classed_as_fixed_or_moving() -> None:
    # a field added to the model must be classed here before rules reading it are carried or kept
    from kaipolicy.rules.alike import FIXED_FIELDS, FIXED_POD_FIELDS, TASK_FIELDS
    from kaipolicy.rules.standard import TYPES
    moving = {"Task": {"status"}, "Job": {"elasticState"}, "PodSet": {"allocated", "gangSatisfied", "allocationRatio"},
              "Queue": set(), "SubGroup": set()}
    assert set(TYPES["Task"].fields) == FIXED_POD_FIELDS | moving["Task"]
    assert TASK_FIELDS <= FIXED_POD_FIELDS
    for var, spec in (("job", "Job"), ("podSet", "PodSet"), ("queue", "Queue"), ("subGroup", "SubGroup")):
        assert set(TYPES[spec].fields) == FIXED_FIELDS[var] | moving[spec], spec


#: predicate deny expression -> whether it reads only the pod's and the node's fields that never change
PREDICATES = {
    "labels": ("node.labels['pool'] != 'a' || !('p' in task.labels)", True),
    "condition": ("node.notReadyReason != '' || node.unschedulable", True),
    "taint": ("affinity.untoleratedTaint(task, node) != ''", True),
    "room": ("node.freePods < 1.0", False),
    "queue": ("capacity.onNode(cluster, task, job, node) != ''", False),
    "job": ("job.priority > 100", False),
    "status": ("task.status == 'Pending' && node.gpuCount == 0", False),
    "pods": ("!affinity.podFits(cluster, task, node)", False),
    "argument": ("node.gpuCount < args.least", True),
}


def test_a_predicate_is_fixed_on_a_node_exactly_when_it_reads_only_fields_that_never_change(tmp_path: Path) -> None:
    rules = "\n".join(f'  - {{name: {name}, hook: predicate, deny: "{expr}"}}'
                      for name, (expr, _) in PREDICATES.items())
    (tmp_path / "preds.yaml").write_text("plugin: preds\narguments:\n  least: {type: int, default: 1}\nrules:\n"
                                         + rules + "\n")
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
    found = {r.name: r.fixed_on_node for r in bundle.plugins["preds"].rules}   # type: ignore[attr-defined]
    assert found == {name: fixed for name, (_, fixed) in PREDICATES.items()}


def test_the_default_predicates_fixed_on_a_node_are_those_of_spec_labels_taints_and_conditions() -> None:
    bundle = load_bundle([POLICIES], VOCABULARY)
    found = {r.name: r.fixed_on_node for r in bundle.plugins["predicates"].rules}   # type: ignore[attr-defined]
    assert {name for name, fixed in found.items() if fixed} == {
        "gpu-memory-synced", "unschedulable", "node-condition", "taints", "node-affinity"}


def test_every_node_field_is_classed_as_fixed_or_moving() -> None:
    from kaipolicy.rules.alike import FIXED_NODE_FIELDS
    from kaipolicy.rules.standard import TYPES
    moving = {"idleGpus", "releasingGpus", "freeGpus", "freeCpuMillis", "freeMemoryBytes", "freePods"}
    assert set(TYPES["Node"].fields) == FIXED_NODE_FIELDS | moving
    assert not FIXED_NODE_FIELDS & moving
