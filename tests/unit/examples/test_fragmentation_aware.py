"""examples/policies/fragmentation-aware: the rule file compiles beside the default bundle, runs
vectorised, and places a pod where the GPUs left behind stay usable (where bin-packing does not)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.rules import lint
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.simulate import simulate

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "policies" / "fragmentation-aware"
PLUGINS = ["predicates", "proportion", "priority", "nodeavailability", "gpusharingorder", "gpupack",
           "resourcetype", "nodeplacement"]


def two_nodes() -> dict[str, Any]:
    # equal GPUs, different CPU: a pod taking 8 of node a's 16 cores leaves its other GPU with
    # too little CPU for the trace's one-GPU pods (11 cores); on node b it leaves plenty
    nodes = [{"name": name, "gpus": 2, "gpuMemoryMiB": 100, "cpuMillis": cores * 1000, "memoryBytes": 10**12,
              "maxPods": 110, "labels": {"nvidia.com/gpu.count": "2"}} for name, cores in (("a", 16), ("b", 64))]
    return {"name": "two nodes", "actions": ["allocate"], "queues": [{"name": "q", "deserved": {"gpu": 4}}],
            "nodes": nodes, "expect": {},
            "jobs": [{"name": "new", "queue": "q", "perTask": {"gpus": 1, "cpuMillis": 8000}, "tasks": [{"state": "Pending"}]}]}


def placed_on(plugins: list[str], vectorize: bool = True) -> str:
    doc = copy.deepcopy(two_nodes())
    doc["config"] = {"tiers": [{"plugins": [{"name": p} for p in plugins]}]}
    bundle = load([str(ROOT / "policies"), str(EXAMPLE)])
    report = simulate(scenario_from_doc(doc, "<two nodes>"), bundle, vectorize=vectorize).report()
    assert not report["ruleErrors"]
    return str(report["tasks"][0]["node"])


def test_the_rule_file_lints_clean_and_vectorises() -> None:
    diagnostics = lint([ROOT / "policies", EXAMPLE], VOCABULARY)
    assert [d for d in diagnostics if d.file.endswith("fragmentation.yaml")] == []
    bundle = load([str(ROOT / "policies"), str(EXAMPLE)])
    assert all(r.vectorizable for r in bundle.plugins["fragmentationaware"].rules)


def test_bin_packing_takes_the_first_node_and_the_rule_keeps_its_other_gpu_usable() -> None:
    assert placed_on(PLUGINS) == "a"
    assert placed_on([*PLUGINS, "fragmentationaware"]) == "b"


@pytest.mark.parametrize("vectorize", [True, False])
def test_scalar_and_vector_evaluation_agree(vectorize: bool) -> None:
    assert placed_on([*PLUGINS, "fragmentationaware"], vectorize) == "b"
