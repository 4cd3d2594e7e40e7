"""Which node-order rules score the other nodes alike for the next pod of a run (so that a run's
scores may be carried from one pod to the next, only the node the last pod landed on scored
again), and what the set-relative ones among them compare against."""

from __future__ import annotations

from pathlib import Path

from kaipolicy.rules import load_bundle
from kaipolicy.rules.standard import VOCABULARY

POLICIES = Path(__file__).resolve().parents[3] / "policies"

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
    rules = "\n".join(f'  - {{name: {name}, hook: nodeOrder, score: "{expr}"}}' for name, (expr, _) in CASES.items())
    text = ("plugin: cases\narguments:\n  weight: {type: double, default: 1.0}\n"
            "  resource: {type: string, default: gpu}\nrules:\n" + rules + "\n" + extra)
    (tmp_path / "cases.yaml").write_text(text)
    bundle = load_bundle([POLICIES, tmp_path], VOCABULARY)
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
