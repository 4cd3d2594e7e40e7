"""Scenario validation: every shared scenario passes; broken documents name the key path."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from kaipolicy.cache.scenario_schema import load_schema, schema_errors, validate_scenario
from kaipolicy.errors import InputError, ScenarioError

SHARED = Path(__file__).resolve().parents[3].parent / "shared"
SCENARIO_FILES = sorted((SHARED / "scenarios").rglob("*.yaml"))

BASE_YAML = """
name: tiny
actions: [allocate, reclaim]
cycles: 1
params: {maxConsolidationPreemptees: 0, allowConsolidatingReclaim: true, useSchedulingSignatures: false,
  fullHierarchyFairness: false, detailedFitErrors: false}
config:
  tiers:
  - plugins:
    - {name: proportion}
    - {name: nodeplacement, arguments: {gpu: binpack, cpu: binpack}}
  queueDepthPerAction: {allocate: 10}
defaultDepartment: false
departments:
- {name: dept0, deserved: {gpu: -1, cpu: -1, memory: -1}, overQuotaWeight: {gpu: -1, cpu: 1, memory: 1}}
queues:
- {name: queue0, parent: dept0, priority: 100, deserved: {gpu: 1, cpu: -1, memory: -1},
   limit: {gpu: -1, cpu: -1, memory: -1}, creationOrder: 0}
- {name: queue1, parent: dept0, deserved: {gpu: 0.5}, creationOrder: 1}
nodes:
- name: node0
  gpus: 2
  gpuMemoryMiB: 100
  cpuMillis: 1000
  memoryBytes: 1000
  maxPods: 110
  labels: {nvidia.com/gpu.count: '2', kai.scheduler/type: node0}
- {name: node1, gpus: 0, migStrategy: mixed, mig: {nvidia.com/mig-1g.5gb: 2}}
topologies:
- {name: topo, levels: [zone, rack]}
jobs:
- name: running_job0
  queue: queue0
  priority: 50
  perTask: {gpus: 0.5, cpuMillis: 100}
  tasks:
  - {name: running_job0-0, state: Running, node: node0, gpuGroups: [g0]}
  - {name: running_job0-1, state: Pending, podAffinity: {labels: {app: a}, topologyKey: rack}}
- name: pending_job0
  queue: queue1
  minAvailable: 5
  topologyConstraint: {topology: topo, requiredLevel: rack}
  subGroups:
  - {name: grp, topology: {topology: topo, preferredLevel: zone}}
  - {name: sg0, minAvailable: 1, parent: grp}
  tasks:
  - {name: pending_job0-0, state: Pending, subGroup: sg0, node: node1}
  - {state: Pending, subGroup: sg0, resources: {mig: {nvidia.com/mig-1g.5gb: 1}}}
expect:
  jobs:
    running_job0: {status: Running, node: node0, gpus: 1}
  tasks:
    pending_job0-0: {status: Pending, gpus: 0}
  binds: 0
  evictionsAtMost: 1
  nodes:
    node0: {idleGpus: 1, releasingGpus: 0}
"""

Mutation = Callable[[dict[str, Any]], Any]


def base() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(BASE_YAML)
    return doc


def at(doc: Any, path: str) -> tuple[Any, Any]:
    """The container and last key of a dotted path (digits index lists)."""
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
    node = doc
    for key in keys[:-1]:
        node = node[key]
    return node, keys[-1]


def set_(path: str, value: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        node, key = at(doc, path)
        node[key] = value

    return mutate


def del_(path: str) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        node, key = at(doc, path)
        del node[key]

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        for m in mutations:
            m(doc)

    return mutate


RUN0 = "jobs[running_job0]"
PEND0 = "jobs[pending_job0]"

BROKEN: list[tuple[str, Mutation, str, str]] = [
    # (case, mutation, key path, message fragment) -- schema errors
    ("top level is a list", lambda d: [d], "", "expected a mapping at the top level, got a list"),
    ("unknown top-level key", set_("cycle", 2), "cycle", "unknown key 'cycle' (allowed: name, source, features"),
    ("missing actions", del_("actions"), "", "missing required key 'actions'"),
    ("misspelt action", set_("actions.1", "reclam"), "actions[1]",
     "'reclam' is not one of allocate, consolidation, reclaim, preempt, stalegangeviction"),
    ("zero cycles", set_("cycles", 0), "cycles", "expected a number >= 1, got 0"),
    ("feature not a string", set_("features", [1]), "features[0]", "expected a string, got 1"),
    ("jobs not a list", set_("jobs", {"a": 1}), "jobs", "expected a list, got a mapping"),
    ("misspelt task state", set_("jobs.0.tasks.0.state", "Runing"), f"{RUN0}.tasks[running_job0-0].state",
     "'Runing' is not one of Pending, Running, Releasing, Pipelined, Binding"),
    ("task without state", del_("jobs.0.tasks.1.state"), f"{RUN0}.tasks[running_job0-1]",
     "missing required key 'state'"),
    ("job without name", del_("jobs.0.name"), "jobs[0]", "missing required key 'name'"),
    ("unknown perTask key", set_("jobs.0.perTask.gpuz", 1), f"{RUN0}.perTask.gpuz",
     "unknown key 'gpuz' (allowed: gpus, gpuMemoryMiB, gpuDevices, cpuMillis, memoryBytes, mig)"),
    ("gpus not a number", set_("jobs.0.perTask.gpus", "abc"), f"{RUN0}.perTask.gpus",
     "expected a number, got 'abc'"),
    ("negative gpus", set_("jobs.0.perTask.gpus", -1), f"{RUN0}.perTask.gpus", "expected a number >= 0, got -1"),
    ("gpus as a bool", set_("jobs.0.perTask.gpus", True), f"{RUN0}.perTask.gpus", "expected a number, got true"),
    ("zero gpuDevices", set_("jobs.1.tasks.1.resources.gpuDevices", 0), f"{PEND0}.tasks[1].resources.gpuDevices",
     "expected a number >= 1, got 0"),
    ("fractional cpuMillis", set_("jobs.0.perTask.cpuMillis", 1.5), f"{RUN0}.perTask.cpuMillis",
     "expected an integer, got 1.5"),
    ("negative task mig count",
     lambda d: d["jobs"][1]["tasks"][1]["resources"]["mig"].update({"nvidia.com/mig-1g.5gb": -1}),
     f"{PEND0}.tasks[1].resources.mig[nvidia.com/mig-1g.5gb]", "expected a number >= 0, got -1"),
    ("deserved below -1", set_("queues.0.deserved.gpu", -2), "queues[queue0].deserved.gpu",
     "expected -1 (unlimited) or a number >= 0, got -2"),
    ("limit not a number", set_("queues.0.limit.cpu", "x"), "queues[queue0].limit.cpu",
     "expected a number, got 'x'"),
    ("unknown deserved resource", set_("queues.1.deserved.gpus", 1), "queues[queue1].deserved.gpus",
     "unknown key 'gpus' (allowed: gpu, cpu, memory)"),
    ("department with a parent", set_("departments.0.parent", "x"), "departments[dept0].parent",
     "unknown key 'parent'"),
    ("misspelt migStrategy", set_("nodes.1.migStrategy", "mixd"), "nodes[node1].migStrategy",
     "'mixd' is not one of none, single, mixed"),
    ("node label not a string", lambda d: d["nodes"][0]["labels"].update({"nvidia.com/gpu.count": 2}),
     "nodes[node0].labels[nvidia.com/gpu.count]", "expected a string, got 2"),
    ("negative node mig count", lambda d: d["nodes"][1]["mig"].update({"nvidia.com/mig-1g.5gb": -1}),
     "nodes[node1].mig[nvidia.com/mig-1g.5gb]", "expected a number >= 0, got -1"),
    ("unknown param", set_("params.maxPreemptees", 3), "params.maxPreemptees",
     "unknown key 'maxPreemptees' (allowed: maxConsolidationPreemptees, allowConsolidatingReclaim"),
    ("param of the wrong type", set_("params.detailedFitErrors", "yes"), "params.detailedFitErrors",
     "expected a boolean (true/false), got 'yes'"),
    ("plugin argument is a list", set_("config.tiers.0.plugins.1.arguments.gpu", ["a"]),
     "config.tiers[0].plugins[nodeplacement].arguments.gpu",
     "expected a string, a number or a boolean (true/false), got a list"),
    ("queue depth for an unknown action", set_("config.queueDepthPerAction.alocate", 1),
     "config.queueDepthPerAction.alocate", "'alocate' is not one of allocate, consolidation"),
    ("topology constraint without topology", del_("jobs.1.topologyConstraint.topology"),
     f"{PEND0}.topologyConstraint", "missing required key 'topology'"),
    ("unknown podAffinity key", set_("jobs.0.tasks.1.podAffinity.topology", "x"),
     f"{RUN0}.tasks[running_job0-1].podAffinity.topology", "unknown key 'topology' (allowed: labels"),
    ("unknown expect key", set_("expect.bind", 1), "expect.bind", "unknown key 'bind' (allowed: jobs, tasks"),
    ("misspelt expect job key", set_("expect.jobs.running_job0.statu", "Running"),
     "expect.jobs.running_job0.statu", "unknown key 'statu'"),
    ("expected status misspelt", set_("expect.tasks.pending_job0-0.status", "Pendin"),
     "expect.tasks.pending_job0-0.status", "'Pendin' is not one of Pending"),
    ("negative expected binds", set_("expect.binds", -1), "expect.binds", "expected a number >= 0, got -1"),
    ("expected idle gpus not a number", set_("expect.nodes.node0.idleGpus", "x"), "expect.nodes.node0.idleGpus",
     "expected a number, got 'x'"),
    ("first error in document order wins", both(set_("nodes.0.gpus", -1), set_("jobs.0.priority", "hi")),
     "nodes[node0].gpus", "expected a number >= 0, got -1"),
    # reference errors
    ("queue and department share names", set_("queues.1.name", "dept0"), "queues[1].name",
     "duplicate queue name 'dept0' (also departments[0])"),
    ("duplicate node", set_("nodes.1.name", "node0"), "nodes[1].name", "duplicate node name 'node0' (also nodes[0])"),
    ("duplicate job", set_("jobs.1.name", "running_job0"), "jobs[1].name", "duplicate job name 'running_job0'"),
    ("unknown queue parent", set_("queues.0.parent", "nope"), "queues[queue0].parent",
     "unknown queue 'nope' (declared: dept0, queue0, queue1)"),
    ("queue parent cycle", both(set_("queues.0.parent", "queue1"), set_("queues.1.parent", "queue0")),
     "queues[queue0].parent", "queue parents form a cycle: queue0 -> queue1 -> queue0"),
    ("job in an unknown queue", set_("jobs.0.queue", "queueX"), f"{RUN0}.queue", "unknown queue 'queueX'"),
    ("task on an unknown node", set_("jobs.0.tasks.0.node", "node9"), f"{RUN0}.tasks[running_job0-0].node",
     "unknown node 'node9' (declared: node0, node1)"),
    ("running task without node", del_("jobs.0.tasks.0.node"), f"{RUN0}.tasks[running_job0-0]",
     "a Running task must name its 'node'"),
    ("duplicate task name across jobs", set_("jobs.1.tasks.0.name", "running_job0-0"),
     f"{PEND0}.tasks[running_job0-0].name", "duplicate task name 'running_job0-0' (also jobs[running_job0]"),
    ("default task name taken", set_("jobs.0.tasks.1.name", "pending_job0-1"), f"{PEND0}.tasks[1]",
     "duplicate task name 'pending_job0-1' (the default name)"),
    ("unknown subgroup", set_("jobs.1.tasks.0.subGroup", "sgX"), f"{PEND0}.tasks[pending_job0-0].subGroup",
     "unknown subgroup 'sgX' in job 'pending_job0' (declared: grp, sg0)"),
    ("task without subgroup in a job that has them", del_("jobs.1.tasks.1.subGroup"), f"{PEND0}.tasks[1]",
     "missing 'subGroup'"),
    ("task in a grouping-only subgroup", set_("jobs.1.tasks.0.subGroup", "grp"),
     f"{PEND0}.tasks[pending_job0-0].subGroup", "subgroup 'grp' has no minAvailable"),
    ("subgroup in a job without subgroups", set_("jobs.0.tasks.1.subGroup", "sg0"),
     f"{RUN0}.tasks[running_job0-1].subGroup", "job 'running_job0' declares no subGroups"),
    ("unknown subgroup parent", set_("jobs.1.subGroups.1.parent", "nope"), f"{PEND0}.subGroups[sg0].parent",
     "unknown subgroup 'nope'"),
    ("subgroup parent cycle", set_("jobs.1.subGroups.0.parent", "sg0"), f"{PEND0}.subGroups[grp].parent",
     "subgroup parents form a cycle: grp -> sg0 -> grp"),
    ("unknown job topology", set_("jobs.1.topologyConstraint.topology", "topoX"),
     f"{PEND0}.topologyConstraint.topology", "unknown topology 'topoX' (declared: topo)"),
    ("unknown topology level", set_("jobs.1.topologyConstraint.requiredLevel", "host"),
     f"{PEND0}.topologyConstraint.requiredLevel", "'host' is not a level of topology 'topo' (zone, rack)"),
    ("unknown subgroup topology", set_("jobs.1.subGroups.0.topology.topology", "t2"),
     f"{PEND0}.subGroups[grp].topology.topology", "unknown topology 't2'"),
]


def test_the_schema_is_valid_draft_2020_12_and_loaded_once() -> None:
    Draft202012Validator.check_schema(load_schema())
    assert load_schema() is load_schema()


def test_the_shared_scenarios_are_there() -> None:
    assert len(SCENARIO_FILES) >= 191


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=lambda p: str(p.relative_to(SHARED / "scenarios")))
def test_every_shared_scenario_validates(path: Path) -> None:
    validate_scenario(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))


def test_the_small_base_scenario_validates() -> None:
    validate_scenario(base(), "base.yaml")


@pytest.mark.parametrize(("mutation", "path", "fragment"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_a_broken_scenario_names_the_key_path(mutation: Mutation, path: str, fragment: str) -> None:
    doc = base()
    replaced = mutation(doc)
    if replaced is not None:
        doc = replaced
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc, "broken.yaml")
    err = info.value
    assert (err.file, err.path) == ("broken.yaml", path), str(err)
    assert fragment in str(err)
    assert str(err).startswith(f"broken.yaml: {path}: " if path else "broken.yaml: ")
    assert isinstance(err, InputError)


@pytest.mark.parametrize(
    "mutation",
    [
        set_("jobs.1.minAvailable", 50),  # larger than the task count: the reference allows it
        set_("jobs.0.tasks.1.node", "node1"),  # a Pending task may name a node
        set_("queues.1.deserved.cpu", -1),
        set_("config.actions", "allocate, reclaim"),  # accepted and ignored
        set_("features", ["a-tag-from-the-future"]),
        set_("staleGracePeriodSeconds", -1),  # negative = never
        both(del_("departments"), del_("defaultDepartment"), set_("queues.0.parent", "default"),
             set_("queues.1.parent", "default")),  # the implicit default department
    ],
    ids=["minAvailable above task count", "pending task with node", "unlimited cpu", "config actions",
         "unknown feature tag", "negative stale grace", "implicit default department"],
)
def test_these_variations_are_accepted(mutation: Mutation) -> None:
    doc = base()
    mutation(doc)
    validate_scenario(doc, "ok.yaml")


def test_the_document_is_not_modified() -> None:
    doc = base()
    before = copy.deepcopy(doc)
    validate_scenario(doc, "base.yaml")
    assert doc == before


# ---------------------------------------------------------------- equal parts checked once
def replicated(copies: int) -> dict[str, Any]:
    """The base scenario with its nodes and jobs repeated under new names: equal tasks, requests,
    labels and queue names occur many times over, as in a large cluster."""
    doc = base()
    nodes, jobs = list(doc["nodes"]), list(doc["jobs"])
    for c in range(1, copies):
        doc["nodes"].extend(dict(copy.deepcopy(n), name=f"{n['name']}-{c}") for n in nodes)
        for j in jobs:
            twin = dict(copy.deepcopy(j), name=f"{j['name']}-{c}")
            for t in twin["tasks"]:
                if "name" in t:
                    t["name"] = f"{t['name']}-{c}"
            doc["jobs"].append(twin)
    return doc


def paths_in(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths_in(v, (*here, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths_in(v, (*here, i))
    return found


ODD_VALUES: list[Any] = [-1, 0, 1, 1.0, 1.5, True, False, "x", "", None, [], ["a"], {}, {"bogus": 1}, 2**40,
                         {"state": "Running"}, {"gpus": True}]


def mutated(doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """`doc` with one to three random changes: a value replaced by an odd one, a key dropped, an
    unknown key added, or a part copied over another."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in paths_in(doc) if p]
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        move = rng.randrange(4)
        if move == 0:
            parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif move == 1 and isinstance(parent, dict):
            del parent[path[-1]]
        elif move == 2 and isinstance(parent[path[-1]], dict):
            parent[path[-1]]["unknownKey"] = 1
        else:
            parent[path[-1]] = copy.deepcopy(doc_at(doc, rng.choice(paths)))
    return doc


def doc_at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def errors_of(doc: Any, once: bool) -> list[tuple[Any, ...]]:
    return [(list(e.absolute_path), list(e.absolute_schema_path), e.validator, e.message)
            for e in schema_errors(doc, once=once)]


def test_a_large_document_has_equal_parts_the_check_skips() -> None:
    # what the rest of these tests rely on: the replicated document repeats its parts
    doc = replicated(4)
    tasks = [json.dumps(t, sort_keys=True) for j in doc["jobs"] for t in j["tasks"] if "name" not in t]
    assert len(tasks) > len(set(tasks))
    assert errors_of(doc, once=True) == errors_of(doc, once=False) == []


@pytest.mark.parametrize("seed", range(8))
def test_parts_checked_once_give_every_error_the_full_check_gives(seed: int) -> None:
    rng = random.Random(seed)
    doc = replicated(3)
    failing = 0
    for _ in range(60):
        broken = mutated(doc, rng)
        once = errors_of(broken, once=True)
        assert once == errors_of(broken, once=False)
        failing += bool(once)
    assert failing > 20   # (the mutations do break documents)


def test_a_request_asking_true_gpus_is_refused_after_an_equal_looking_one_of_1() -> None:
    # True == 1 in Python: a check remembering parts by value alone would take the second for the first
    doc = replicated(2)
    doc["jobs"][0]["perTask"] = {"gpus": 1, "cpuMillis": 100}
    doc["jobs"][2]["perTask"] = {"gpus": True, "cpuMillis": 100}
    with pytest.raises(ScenarioError) as info:
        validate_scenario(doc, "twins.yaml")
    assert info.value.path == "jobs[running_job0-1].perTask.gpus"
    assert "expected a number, got true" in str(info.value)


def test_a_part_that_fails_is_checked_again_wherever_it_recurs() -> None:
    doc = replicated(3)
    for j in (0, 2, 4):   # running_job0 and its two copies: one broken request, three times over
        doc["jobs"][j]["perTask"] = {"gpus": -1, "cpuMillis": 100}
    errors = errors_of(doc, once=True)
    assert errors == errors_of(doc, once=False)
    assert [e[0] for e in errors] == [["jobs", j, "perTask", "gpus"] for j in (0, 2, 4)]
