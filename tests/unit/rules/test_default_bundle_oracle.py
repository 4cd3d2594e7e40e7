"""celpy as the semantic oracle for the default bundle (policies/).

Every expression of every default rule (`when`, the body, `message`) is evaluated on a table
of sample tasks, jobs, pod sets, queues, nodes and GPUs twice: by our compiled scalar function
and by celpy's interpreter over CEL maps holding exactly the vocabulary's fields. Vocabulary
functions run the same Python implementation on both sides, on the original model objects.
Vector mode is then compared with scalar mode node by node.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import celpy
import numpy as np
import pytest
import yaml
from celpy import celtypes
from rules_fixtures import normalise, same

from kaipolicy.actions.solver.scenario import Scenario
from kaipolicy.actions.solver.views import partial_job
from kaipolicy.api.task import ACTIVE_USED, WHOLE_GPU, Status
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cycle import open_session
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import GpuView, Session
from kaipolicy.framework.tasks import init_request_quantities
from kaipolicy.rules import BoundRule, Bundle, EvalError, FunctionSpec, load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.rules.vocabulary import list_elem, map_kv

POLICIES = Path(__file__).resolve().parents[3] / "policies"
MIG = "nvidia.com/mig-1g.10gb"
KUBEFLOW_ROLE = "training.kubeflow.org/job-role"
RAY_TYPE = "ray.io/node-type"
TASK_PRIORITY = "kai.scheduler/task-priority"


def _node(name: str, gpus: int, **extra: Any) -> dict[str, Any]:
    labels = {"kai.scheduler/type": name, **extra.pop("labels", {})}
    return {"name": name, "gpus": gpus, "gpuMemoryMiB": 1000, "cpuMillis": 16000, "memoryBytes": 64_000_000_000,
            "maxPods": 110, "labels": labels, **extra}


def _job(name: str, queue: str, tasks: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": name, "queue": queue, "priority": extra.pop("priority", 50), "createdMinutesAgo": 1,
            "perTask": extra.pop("perTask", {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 1_000_000}),
            "tasks": tasks, **extra}


def _pending(**task: Any) -> dict[str, Any]:
    return {"state": "Pending", **task}


def _running(node: str, **task: Any) -> dict[str, Any]:
    return {"state": "Running", "node": node, **task}


CPU = {"gpus": 0, "cpuMillis": 1000, "memoryBytes": 1_000_000}
MIG_TASK = {"gpus": 0, "cpuMillis": 500, "mig": {MIG: 1}}

SAMPLE: dict[str, Any] = {
    "name": "the oracle's sample cluster",
    "actions": ["allocate"],
    "queues": [
        {"name": "q-a", "deserved": {"gpu": 4}, "creationOrder": 0},
        {"name": "q-b", "deserved": {"gpu": 1}, "limit": {"gpu": 2}, "creationOrder": 1},
        {"name": "q-c", "priority": 200, "deserved": {"gpu": 2}, "creationOrder": 2},
    ],
    "topologies": [{"name": "topo", "levels": ["zone", "rack"]}],
    "nodes": [
        _node("n-free", 4, labels={"zone": "a", "rack": "r1"}),
        _node("n-full", 2, maxPods=3, labels={"zone": "b", "rack": "r3"}),
        _node("n-shared", 2, labels={"zone": "a", "rack": "r2"}),
        _node("n-mig-single", 2, migStrategy="single",
              labels={"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "single"}),
        _node("n-mig-mixed", 0, migStrategy="mixed", mig={MIG: 2},
              labels={"node-role.kubernetes.io/mig-enabled": "true", "nvidia.com/mig.strategy": "mixed"}),
        _node("n-cpu", 0, cpuMillis=8000),
        _node("n-cordoned", 4, unschedulable=True),
        _node("n-unsynced", 2, gpuMemorySynced=False),
        _node("n-sick", 2, conditions=["NotReady", "PIDPressure"]),
        _node("n-tainted", 2, taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}],
              labels={"gpu": "h100"}),
    ],
    "jobs": [
        # running work that shapes the nodes
        _job("run-full", "q-a", [_running("n-full"), _running("n-full")], lastStartMinutesAgo=60),
        _job("run-b", "q-b", [_running("n-cordoned"), _running("n-cordoned")], lastStartMinutesAgo=1),  # at q-b's limit
        _job("run-shared", "q-a", [_running("n-shared", gpuGroups=["g1"], labels={"app": "web"})],
             perTask={"gpus": 0.5, "cpuMillis": 1000}),
        # elastic jobs: below, at and above their minimum
        _job("elastic-below", "q-a", [_running("n-cpu"), _pending()], perTask=CPU, minAvailable=2),
        _job("elastic-at", "q-a", [_running("n-cpu"), _pending()], perTask=CPU, minAvailable=1),
        _job("elastic-above", "q-a", [_running("n-cpu"), _running("n-cpu"), _pending()], perTask=CPU,
             minAvailable=1, lastStartMinutesAgo=2),
        # one pending task of each kind
        _job("p-whole", "q-a", [_pending()], priority=100),
        _job("p-frac", "q-a", [_pending()], perTask={"gpus": 0.5, "cpuMillis": 500}),
        _job("p-gpumem", "q-a", [_pending()], perTask={"gpuMemoryMiB": 500, "cpuMillis": 500}),
        _job("p-multi", "q-a", [_pending()], perTask={"gpus": 0.5, "gpuDevices": 2, "cpuMillis": 500}),
        _job("p-mig", "q-a", [_pending()], perTask=MIG_TASK),
        _job("p-cpu", "q-a", [_pending()], perTask=CPU),
        _job("p-legacy", "q-a", [_pending(legacyMig=True)]),
        _job("p-affinity", "q-a", [_pending(nodeAffinity=["n-free", "n-full"])]),
        _job("p-selector", "q-a", [_pending(nodeSelector={"gpu": "h100"},
                                            tolerations=[{"key": "dedicated", "operator": "Exists"}])]),
        _job("p-required", "q-a", [_pending(requiredNodeAffinity=[
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-cpu"]}]}])]),
        _job("p-podaff", "q-a", [_pending(podAffinity={"labels": {"app": "web"}, "topologyKey": "zone"})]),
        _job("p-topo", "q-a", [_pending(), _pending()],
             topologyConstraint={"topology": "topo", "preferredLevel": "rack"}),
        # over the queue's limit, and a non-preemptible job over its quota
        _job("p-big", "q-b", [_pending()], perTask={"gpus": 3, "cpuMillis": 500}),
        _job("p-np", "q-b", [_pending()], priority=125, perTask={"gpus": 2, "cpuMillis": 500}),
        # task-order labels
        _job("p-labelled", "q-c", [
            _pending(name="kf-master", labels={KUBEFLOW_ROLE: "master"}),
            _pending(name="kf-launcher", labels={KUBEFLOW_ROLE: "launcher"}),
            _pending(name="kf-worker", labels={KUBEFLOW_ROLE: "worker"}),
            _pending(name="ray-head", labels={RAY_TYPE: "head"}),
            _pending(name="ray-worker", labels={RAY_TYPE: "worker"}),
            _pending(name="prio-7", priority=7),
            _pending(name="prio-neg", labels={TASK_PRIORITY: "-2"}),
            _pending(name="plain"),
        ], perTask=CPU),
        # pod sets: one below its minimum, one satisfied
        _job("p-podsets", "q-c", [
            _running("n-cpu", subGroup="ps-a"), _pending(subGroup="ps-a"),
            _running("n-cpu", subGroup="ps-b"), _running("n-cpu", subGroup="ps-b"),
        ], perTask=CPU, subGroups=[{"name": "ps-a", "minAvailable": 2}, {"name": "ps-b", "minAvailable": 1}]),
    ],
}


# ---- the sample world: snapshot, session, bundle -----------------------------------------------
class World:
    def __init__(self) -> None:
        self.bundle: Bundle = load_bundle([POLICIES], VOCABULARY)
        self.cluster = scenario_from_doc(SAMPLE).snapshot()
        self.session: Session = open_session(self.cluster, SchedulerConfig(), self.bundle)
        self.nodes = list(self.session.node_list)
        # what placement.binpack compares against in scalar mode: all sample nodes
        self.session.scoring_nodes = self.nodes
        self.session.scoring_memo = {}
        self._current: Any = None

    def enter(self, job: Any) -> None:
        """Start allocating `job` as the allocate action does: the topology built-ins reset
        their per-job state and fill topology.preferredScore's table for this job."""
        if job is None or job is self._current:
            return
        self._current = job
        self.session.pre_job_allocation(job)
        pending = [t for t in job.tasks.values() if t.status == Status.PENDING]
        self.session.subset_nodes(job, job.root, list(job.pod_sets.values()), pending, self.nodes)

    @functools.cached_property
    def pending(self) -> list[tuple[Any, Any]]:
        return [(t, j) for j in self.cluster.jobs.values() for t in j.tasks.values() if t.status == Status.PENDING]

    @functools.cached_property
    def preemptors(self) -> list[Any]:
        return [self.cluster.jobs[n] for n in ("p-whole", "p-np", "p-frac", "p-cpu", "p-big")]

    @functools.cached_property
    def victims(self) -> list[Any]:
        return [j for j in self.cluster.jobs.values() if any(t.status in ACTIVE_USED for t in j.tasks.values())]

    @functools.cached_property
    def scenarios(self) -> list[Scenario]:
        """For each preemptor, under reclaim and preempt: each running job alone, all of an elastic
        job's pods or only those above its minimum, and two victims together."""
        out = []
        for job, action in itertools.product(self.preemptors, ("reclaim", "preempt")):
            tasks = [t for t in job.tasks.values() if t.status == Status.PENDING]
            partial = partial_job(job, tasks)
            request = dict(init_request_quantities(self.session, partial))
            takes = [[(v, _running_tasks(v))] for v in self.victims]
            elastic = self.cluster.jobs["elastic-above"]
            takes.append([(elastic, _running_tasks(elastic)[:1])])
            takes.append([(self.cluster.jobs["run-b"], _running_tasks(self.cluster.jobs["run-b"])),
                          (self.cluster.jobs["run-full"], _running_tasks(self.cluster.jobs["run-full"])[:1])])
            for take in takes:
                scenario = Scenario(action, self.cluster.jobs, partial, request, [])
                for victim, victim_tasks in take:
                    scenario.add_potential(victim, victim_tasks)
                out.append(scenario)
        return out

    def gpus(self, node: Any) -> list[GpuView]:
        return [GpuView(node, g) for g in node.shared_used] + [GpuView(node, WHOLE_GPU)]

    def samples(self, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
        """Every combination of sample values for a hook's variables."""
        jobs = list(self.cluster.jobs.values())
        queues = list(self.cluster.queues.values())
        if names in (("task", "job", "node"), ("task", "node")):
            for (task, job), node in itertools.product(self.pending, self.nodes):
                yield {"task": task, "job": job, "node": node}
        elif names == ("task", "node", "gpu"):
            for (task, _), node in itertools.product(self.pending, self.nodes):
                for gpu in self.gpus(node):
                    yield {"task": task, "node": node, "gpu": gpu}
        elif names == ("task", "job"):
            for job in jobs:
                for task in job.tasks.values():
                    yield {"task": task, "job": job}
        elif names == ("job",):
            for job in jobs:
                yield {"job": job}
        elif names == ("job", "podSet"):
            for job in jobs:
                for pod_set in job.pod_sets.values():
                    yield {"job": job, "podSet": pod_set}
        elif names == ("queue", "job", "victims"):
            for queue in queues:
                mine = [j for j in jobs if j.queue == queue.name]
                if queue.is_leaf:
                    yield {"queue": queue, "job": None, "victims": []}
                    if mine:   # a victim order: the jobs already taken from the queue, no pending job
                        yield {"queue": queue, "job": None, "victims": mine}
                for job in mine:
                    yield {"queue": queue, "job": job, "victims": []}
        elif names == ("job", "queue"):
            for job in jobs:
                yield {"job": job, "queue": self.cluster.queues[job.queue]}
        elif names == ("job", "victim"):
            for job, victim in itertools.product(self.preemptors, self.victims):
                yield {"job": job, "victim": victim}
        elif names == ("job", "scenario"):
            for scenario in self.scenarios:
                yield {"job": scenario.preemptor, "scenario": scenario}
        else:
            raise AssertionError(f"no sample data for a hook seeing {names}: add some")


def _running_tasks(job: Any) -> list[Any]:
    return [t for t in job.tasks.values() if t.status in ACTIVE_USED]


@functools.cache
def world() -> World:
    return World()


# ---- CEL values for celpy ----------------------------------------------------------------------
class Oracle:
    """Model objects as CEL maps (exactly the vocabulary's fields) and the vocabulary's
    functions registered with celpy, which get the original objects back via `objects`."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.objects: dict[int, Any] = {}
        self._keep: list[Any] = []      # the maps stay alive, so their ids stay unique
        self._maps: dict[tuple[int, str], Any] = {}
        self.env = celpy.Environment()
        self.functions = {_cel_name(f.name): self._wrap(f) for f in VOCABULARY.functions.values()}
        self._programs: dict[str, Any] = {}

    def value(self, obj: Any, ctype: str) -> Any:
        if obj is None:
            return None
        if ctype in VOCABULARY.types:
            key = (id(obj), ctype)
            if key not in self._maps:
                spec = VOCABULARY.types[ctype]
                cel = celtypes.MapType({celtypes.StringType(f.name): self.value(getattr(obj, f.attr), f.type)
                                        for f in spec.fields.values()})
                self.objects[id(cel)] = obj
                self._keep += [cel, obj]
                self._maps[key] = cel
            return self._maps[key]
        elem = list_elem(ctype)
        if elem is not None:
            return celtypes.ListType([self.value(v, elem) for v in obj])
        return _plain_to_cel(obj, ctype)

    def activation(self, variables: dict[str, Any], args: dict[str, Any], arg_types: dict[str, str]) -> dict[str, Any]:
        out = {name: self.value(v, VOCABULARY.variables.get(name, "dyn")) for name, v in variables.items()}
        out["args"] = celtypes.MapType({celtypes.StringType(k): _plain_to_cel(v, arg_types[k]) for k, v in args.items()})
        out["cluster"] = self.value(self.session, "Cluster")
        return out

    def evaluate(self, text: str, activation: dict[str, Any]) -> tuple[bool, Any]:
        """(True, value) or (False, the error) from celpy."""
        program = self._programs.get(text)
        if program is None:
            program = self._programs[text] = self.env.program(self.env.compile(_for_celpy(text)),
                                                              functions=self.functions)
        try:
            result = program.evaluate(activation)
        except Exception as e:  # noqa: BLE001 - celpy raises CELEvalError, or Python errors from its evaluator
            return False, e
        if isinstance(result, celpy.CELEvalError):
            return False, result
        return True, normalise(result)

    def _wrap(self, spec: FunctionSpec) -> Callable[..., Any]:
        def back(a: Any) -> Any:
            """The model object a CEL value was made from (lists element by element)."""
            if id(a) in self.objects:
                return self.objects[id(a)]
            if isinstance(a, celtypes.ListType):
                return [back(v) for v in a]
            return normalise(a)

        def call(*args: Any) -> Any:
            return _plain_to_cel(spec.impl(*[back(a) for a in args]), spec.result)
        return call


# celpy reads `ns.fn(x)` as the method `fn` called on a variable `ns`, so it cannot resolve
# dotted function names: for celpy only, `ns.fn(` is rewritten to `ns_fn(` (registered under
# that name). Our compiler sees the original text.
_DOTTED = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(VOCABULARY.functions, key=len,
                                                                              reverse=True)) + r")\(")


def _cel_name(name: str) -> str:
    return name.replace(".", "_")


def _for_celpy(text: str) -> str:
    return _DOTTED.sub(lambda m: _cel_name(m.group(1)) + "(", text)


def _plain_to_cel(value: Any, ctype: str) -> Any:
    if value is None:
        return None
    if ctype == "int":
        return celtypes.IntType(int(value))
    if ctype == "uint":
        return celtypes.UintType(int(value))
    if ctype == "double":
        return celtypes.DoubleType(float(value))
    if ctype == "bool":
        return celtypes.BoolType(bool(value))
    if ctype == "string":
        return celtypes.StringType(str(value))
    elem = list_elem(ctype)
    if elem is not None:
        return celtypes.ListType([_plain_to_cel(v, elem) for v in value])
    kv = map_kv(ctype)
    if kv is not None:
        return celtypes.MapType({_plain_to_cel(k, kv[0]): _plain_to_cel(v, kv[1]) for k, v in value.items()})
    return _dyn_to_cel(value)


def _dyn_to_cel(value: Any) -> Any:
    """A dyn value by its Python type; opaque objects (e.g. capacity.Dominance) pass through."""
    for py, cel in ((bool, "bool"), (int, "int"), (float, "double"), (str, "string")):
        if isinstance(value, py):
            return _plain_to_cel(value, cel)
    if isinstance(value, np.generic):
        return _dyn_to_cel(value.item())
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([_dyn_to_cel(v) for v in value])
    return value


# ---- the rules ---------------------------------------------------------------------------------
BODY_KEYS = ("deny", "allow", "score", "key", "value")


# Argument values besides the defaults and the enums' other values, where they change results.
EXTRA_ARGS: dict[str, list[dict[str, Any]]] = {
    "minruntime": [{"defaultPreemptMinRuntime": "5m", "defaultReclaimMinRuntime": "90s"},
                   {"defaultReclaimMinRuntime": "1h", "reclaimResolveMethod": "queue"}],
    "proportion": [{"relcaimerSaturationMultiplier": 2.0}],
}


def _variants(plugin: Any) -> list[dict[str, Any]]:
    """The default arguments, each other value of every enum argument, then EXTRA_ARGS."""
    out: list[dict[str, Any]] = [{}]
    for name, arg in plugin.arguments.items():
        out += [{name: v} for v in arg.enum or () if v != arg.default]
    return out + EXTRA_ARGS.get(plugin.name, [])


def _rule_params() -> list[Any]:
    bundle = load_bundle([POLICIES], VOCABULARY)
    params = []
    for plugin in bundle.plugins.values():
        for args in _variants(plugin):
            for rule in plugin.rules:
                label = ",".join(f"{k}={v}" for k, v in args.items())
                rid = f"{plugin.name}/{rule.name}" + (f" [{label}]" if label else "")
                if rule.builtin:
                    # A `builtin` rule has no expression to compare: its Python runs in the
                    # session (topology, fair share) and is tested with the built-ins.
                    continue
                params.append(pytest.param(plugin.name, rule.name, args, id=rid))
    return params


def _texts(plugin_name: str, rule_name: str) -> dict[str, str]:
    doc = yaml.safe_load(world().bundle.plugins[plugin_name].text)
    spec = next(r for r in doc["rules"] if r["name"] == rule_name)
    return {k: spec[k] for k in ("when", *BODY_KEYS, "message") if k in spec}


def _bound(plugin_name: str, rule_name: str, args: dict[str, Any]) -> tuple[BoundRule, dict[str, Any]]:
    w = world()
    instance = w.bundle.instantiate(plugin_name, args).bind_cluster(w.session)
    rule = next(r for r in instance.rules if r.name == rule_name)
    return rule, dict(instance.args)


def _ours(fn: Callable[..., Any], values: list[Any]) -> tuple[bool, Any]:
    try:
        return True, normalise(fn(*values))
    except EvalError as e:
        return False, e


def _agree(ours: tuple[bool, Any], oracle: tuple[bool, Any]) -> bool:
    if ours[0] != oracle[0]:
        return False
    return not ours[0] or same(ours[1], oracle[1])


def _describe(sample: dict[str, Any]) -> str:
    return ", ".join(f"{k}={getattr(v, 'name', None) or getattr(v, 'group', v)}" for k, v in sample.items())


RULES = _rule_params()


def test_every_expression_rule_of_the_default_bundle_is_compared() -> None:
    expected = {(p, r.name) for p, plugin in load_bundle([POLICIES], VOCABULARY).plugins.items()
                for r in plugin.rules if not r.builtin}
    assert {(p.values[0], p.values[1]) for p in RULES} == expected
    assert len(expected) >= 20


@pytest.mark.parametrize(("plugin_name", "rule_name", "args"), RULES)
def test_compiled_rule_agrees_with_celpy_on_the_sample_data(plugin_name: str, rule_name: str,
                                                           args: dict[str, Any]) -> None:
    w = world()
    rule, arg_values = _bound(plugin_name, rule_name, args)
    plugin = w.bundle.plugins[plugin_name]
    arg_types = {n: a.type for n, a in plugin.arguments.items()}
    texts = _texts(plugin_name, rule_name)
    body_key = next(k for k in BODY_KEYS if k in texts)
    oracle = Oracle(w.session)
    names = rule.rule.hook.names
    mismatches: list[str] = []
    count = 0
    for sample in w.samples(names):
        count += 1
        w.enter(sample.get("job"))
        values = [sample[n] for n in names]
        activation = oracle.activation(sample, arg_values, arg_types)
        applies: tuple[bool, Any] = (True, True)
        if "when" in texts:
            applies = oracle.evaluate(texts["when"], activation)
        if applies[0] and not applies[1]:
            expected: tuple[bool, Any] = (True, None)
        elif not applies[0]:
            expected = applies
        else:
            expected = oracle.evaluate(texts[body_key], activation)
        got = _ours(rule.scalar, values)
        if not _agree(got, expected):
            mismatches.append(f"{body_key} on {_describe(sample)}: ours {got[1]!r}, celpy {expected[1]!r}")
        if "message" in texts:
            got_msg = _ours(rule.message, values)
            want_msg = oracle.evaluate(texts["message"], activation)
            if not _agree(got_msg, want_msg):
                mismatches.append(f"message on {_describe(sample)}: ours {got_msg[1]!r}, celpy {want_msg[1]!r}")
    assert count > 0
    assert not mismatches, f"{len(mismatches)} of {count} samples differ:\n" + "\n".join(mismatches[:10])


def test_the_expressions_see_the_interesting_cases() -> None:
    """The sample data reaches both branches of the rules it exists for."""
    w = world()
    bundle = w.bundle
    task = {t.name: (t, j) for t, j in w.pending}
    node = {n.name: n for n in w.nodes}

    def check(plugin: str, rule: str, *values: Any) -> Any:
        bound = bundle.instantiate(plugin).bind_cluster(w.session)
        return next(r for r in bound.rules if r.name == rule).scalar(*values)

    big, big_job = task["p-big-0"]
    w.enter(big_job)
    assert check("predicates", "queue-capacity-on-node", big, big_job, node["n-free"]) is True
    mig, mig_job = task["p-mig-0"]
    assert check("predicates", "resource-type", mig, mig_job, node["n-free"]) is True
    assert check("predicates", "resource-type", mig, mig_job, node["n-mig-mixed"]) is False
    mem, mem_job = task["p-gpumem-0"]
    assert check("predicates", "gpu-memory-synced", mem, mem_job, node["n-unsynced"]) is True
    frac, frac_job = task["p-frac-0"]
    assert check("predicates", "max-pods", frac, frac_job, node["n-full"]) is True
    assert check("gpusharingorder", "join-shared-gpu", frac, frac_job, node["n-shared"]) == 1000.0
    pod, pod_job = task["p-podaff-0"]
    assert check("predicates", "pod-affinity", pod, pod_job, node["n-full"]) is True
    assert check("predicates", "pod-affinity", pod, pod_job, node["n-free"]) is False
    topo, topo_job = task["p-topo-0"]
    w.enter(topo_job)
    scores = {n.name: check("topology", "preferred-domain", topo, topo_job, n) for n in w.nodes}
    assert any(s != 0.0 for s in scores.values()), scores
    jobs = w.cluster.jobs
    assert [check("elastic", "below-min-available-first", jobs[n]) for n in
            ("elastic-below", "elastic-at", "elastic-above")] == [[0], [1], [2]]
    assert check("proportion", "queue-limit-and-quota", jobs["p-big"], w.cluster.queues["q-b"]) is True
    assert check("proportion", "non-preemptible-quota", jobs["p-np"], w.cluster.queues["q-b"]) is True


# ---- vector mode against scalar mode -----------------------------------------------------------
NEUTRAL = {"deny": False, "allow": True, "score": 0.0}


def _vector_params() -> list[Any]:
    bundle = load_bundle([POLICIES], VOCABULARY)
    out = []
    for plugin in bundle.plugins.values():
        for args in _variants(plugin):
            for rule in plugin.rules:
                if rule.vectorizable:
                    label = ",".join(f"{k}={v}" for k, v in args.items())
                    rid = f"{plugin.name}/{rule.name}" + (f" [{label}]" if label else "")
                    out.append(pytest.param(plugin.name, rule.name, args, id=rid))
    return out


VECTOR_RULES = _vector_params()


def test_every_node_level_rule_of_the_default_bundle_is_vectorised() -> None:
    bundle = load_bundle([POLICIES], VOCABULARY)
    node_level = {(p, r.name) for p, plugin in bundle.plugins.items() for r in plugin.rules
                  if "node" in r.hook.names and r.form.value in NEUTRAL and not r.builtin}
    assert {(p.values[0], p.values[1]) for p in VECTOR_RULES} == node_level


@pytest.mark.parametrize(("plugin_name", "rule_name", "args"), VECTOR_RULES)
def test_vector_mode_agrees_with_scalar_mode_on_all_sample_nodes(plugin_name: str, rule_name: str,
                                                                 args: dict[str, Any]) -> None:
    w = world()
    rule, _ = _bound(plugin_name, rule_name, args)
    names = rule.rule.hook.names
    form = rule.rule.form.value
    view = w.session.table.view(w.nodes)
    assert rule.vector is not None
    mismatches = []
    contexts: list[dict[str, Any]] = [{"task": t, "job": j} for t, j in w.pending]
    if "gpu" in names:
        contexts = [{**c, "gpu": g} for c in contexts for g in w.gpus(w.cluster.nodes["n-shared"])]
    for context in contexts:
        w.enter(context["job"])
        scalar = [rule.scalar(*[n if name == "node" else context[name] for name in names]) for n in w.nodes]
        vector = rule.vector(*[view if name == "node" else context[name] for name in names])
        if vector is None:
            ok = all(s is None for s in scalar)
            vector_list: Any = None
        else:
            want = [NEUTRAL[form] if s is None else s for s in scalar]
            vector_list = normalise(np.asarray(vector).tolist())
            ok = len(vector_list) == len(want) and all(
                (math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12) if form == "score" else a == b)
                for a, b in zip(vector_list, want))
        if not ok:
            mismatches.append(f"{_describe(context)}: scalar {scalar}, vector {vector_list}")
    assert not mismatches, "\n".join(mismatches[:10])
