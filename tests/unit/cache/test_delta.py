"""The snapshot built from the informers' changes equals the full rebuild after every cycle of
random informer events (nodes, pods, pod groups, queues, BindRequests and priority classes
added, changed and deleted), and scheduling on it decides the same; a step that fails falls
back to the full rebuild and says why."""

from __future__ import annotations

import copy
import logging
import random
from typing import Any

import pytest

from kaipolicy import metrics
from kaipolicy.cache import convert
from kaipolicy.cache.assemble import Assembly, Scope, Views, assemble
from kaipolicy.cache.delta import DeltaSnapshot
from kaipolicy.cache.k8s_source import KINDS, K8sSource
from kaipolicy.cache.scenario_source import scenario_from_doc, scenario_settings
from kaipolicy.cycle import run_cycle
from kaipolicy.errors import ObjectError
from kaipolicy.framework.config import Params, config_from
from tests.scenarios.shared import default_bundle
from tests.unit.api.model_dump import dump_cluster
from tests.unit.fakeapi import FakeApi

NOW = 1_800_000_000.0
HEAD = {"actions": ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"],
        "staleGracePeriodSeconds": 60.0}
POOL = convert.NODE_POOL_LABEL
PODS = [f"p{i}" for i in range(24)] + ["g1", "g2"]   # two named like pod groups
GROUPS = [f"g{i}" for i in range(6)]
NODES = [f"n{i}" for i in range(6)]
QUEUES = ["dept", "q0", "q1", "q2"]


def _stamp(t: float) -> str:
    from datetime import UTC, datetime
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RandomCluster:
    """Kubernetes objects as the informers hold them, changed at random; `views` and `changed`
    are what K8sSource keeps (converted objects, keys converted since the last cycle)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.version = 0
        self.views = Views()
        self.changed: dict[str, set[str]] = {}
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        for name in NODES[:5]:
            self.put("Node", self.node(name))
        for name in QUEUES:
            self.put("Queue", self.queue(name))
        self.put("Topology", self.topology())
        for name in GROUPS:
            self.put("PodGroup", self.pod_group(name))
        for name in PODS:
            self.put("Pod", self.pod(name))
        for _ in range(20):
            self.event()

    def meta(self, name: str, namespace: str | None, age: float, **extra: Any) -> dict[str, Any]:
        self.version += 1
        meta = {"name": name, "uid": f"uid-{name}-{self.rng.randrange(2)}", "resourceVersion": str(self.version),
                "creationTimestamp": _stamp(NOW - age)} | extra
        return meta | ({"namespace": namespace} if namespace else {})

    # ---- objects ------------------------------------------------------------------------------
    def node(self, name: str) -> dict[str, Any]:
        r = self.rng
        labels = {"zone": r.choice("ab"), convert.GPU_MEMORY_LABEL: r.choice(["40960", "81920"])}
        if r.random() < 0.1:
            labels[POOL] = "other"
        alloc = {"cpu": str(r.choice([16, 64])), "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(r.choice([2, 4, 8]))}
        spec = {"unschedulable": True} if r.random() < 0.1 else {}
        return {"metadata": self.meta(name, None, 3600, labels=labels), "spec": spec, "status": {"allocatable": alloc}}

    def queue(self, name: str) -> dict[str, Any]:
        r = self.rng
        free = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
        spec: dict[str, Any] = {"priority": r.choice([50, 100]), "resources": {
            "gpu": {"quota": r.choice([0, 4, 8]), "limit": r.choice([-1, -1, 6]), "overQuotaWeight": 1},
            "cpu": free, "memory": free}}
        if name != "dept":
            spec["parentQueue"] = "dept"
        return {"metadata": self.meta(name, None, 600 + QUEUES.index(name)), "spec": spec}

    def pod(self, name: str) -> dict[str, Any]:
        r = self.rng
        group = r.choice([None, None, *GROUPS])
        labels = {convert.QUEUE_LABEL: r.choice(["q0", "q1", "q2"] * 6 + ["dept", "nope"])}
        if r.random() < 0.04:
            labels["app"] = "kai-resource-reservation"
        if r.random() < 0.06:
            labels[convert.SUB_GROUP_LABEL] = "workers"
        annotations: dict[str, str] = {"pod-group-name": group} if group else {}
        if r.random() < 0.15:
            annotations["gpu-fraction"] = r.choice(["0.5", "0.25"])
            labels[convert.GPU_GROUP_LABEL] = r.choice(["s1", "s2"])
        node = r.choice(["", "", "", *NODES])
        phase = r.choice(["Running", "Running", "Pending", "Succeeded"]) if node else "Pending"
        gpus = r.choice([0, 1, 2]) if "gpu-fraction" not in annotations else 0
        requests = {"cpu": "1", "memory": "1Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        extra: dict[str, Any] = {"labels": labels, "annotations": annotations}
        if node and r.random() < 0.1:
            extra["deletionTimestamp"] = _stamp(NOW - 1)
        spec: dict[str, Any] = {"schedulerName": r.choice(["kai-scheduler"] * 5 + ["default-scheduler"]),
                                "nodeName": node or None,
                                "containers": [{"name": "c", "resources": {"requests": requests}}]}
        if not node and r.random() < 0.1:
            spec["schedulingGates"] = [{"name": "wait"}]
        return {"metadata": self.meta(name, "ns", r.choice([10, 60, 600]), **extra), "spec": spec,
                "status": {"phase": phase}}

    def pod_group(self, name: str) -> dict[str, Any]:
        r = self.rng
        spec: dict[str, Any] = {"queue": r.choice(["q0", "q1", "q2"] * 6 + ["dept", "nope"]),
                                "minMember": r.choice([1, 1, 2, 3])}
        if r.random() < 0.08:
            spec["subGroups"] = [{"name": "workers", "minMember": 1}]
        if r.random() < 0.1:
            spec["topologyConstraint"] = {"topology": "racks", "preferredTopologyLevel": r.choice(["zone", "row"])}
        annotations = {convert.LAST_START_ANNOTATION: _stamp(NOW - 300)} if r.random() < 0.2 else {}
        if r.random() < 0.2:
            annotations[convert.STALE_SINCE_ANNOTATION] = _stamp(NOW - 100)
        return {"metadata": self.meta(name, "ns", r.choice([30, 300]), annotations=annotations), "spec": spec}

    def bind_request(self, name: str) -> dict[str, Any]:
        r = self.rng
        status = {"phase": "Failed"} if r.random() < 0.2 else {}
        return {"metadata": self.meta(f"br-{name}-{r.randrange(2)}", "ns", r.choice([5, 20])), "status": status,
                "spec": {"podName": name, "selectedNode": r.choice(NODES), "selectedGPUGroups": ["s1"]}}

    def topology(self) -> dict[str, Any]:
        levels = [{"nodeLabel": "zone"}] + ([{"nodeLabel": "kubernetes.io/hostname"}] if self.rng.random() < 0.5 else [])
        return {"metadata": self.meta("racks", None, 60), "spec": {"levels": levels}}

    def priority_class(self, name: str) -> dict[str, Any]:
        return {"metadata": self.meta(name, None, 60), "value": self.rng.choice([10, 100, 200])}

    # ---- events --------------------------------------------------------------------------------
    def put(self, kind: str, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        key = f"{m['namespace']}/{m['name']}" if m.get("namespace") else m["name"]
        self.objects[(kind, key)] = obj
        self._convert(kind, key, obj)

    def delete(self, kind: str, key: str) -> None:
        self.objects.pop((kind, key), None)
        self._convert(kind, key, None)

    def _convert(self, kind: str, key: str, obj: dict[str, Any] | None) -> None:
        _, converter, attr = KINDS[kind]
        views: dict[str, Any] = getattr(self.views, attr)
        views.pop(key, None)
        self.changed.setdefault(kind, set()).add(key)
        if obj is not None:
            try:
                views[key] = convert.safely(converter, kind, obj)
            except ObjectError:
                pass

    def event(self) -> None:
        r = self.rng
        kind = r.choices(["Pod", "PodGroup", "BindRequest", "Node", "Queue", "PriorityClass", "Topology"],
                         [12, 3, 3, 1.5, 0.7, 0.1, 0.1])[0]
        if kind == "Pod":
            name = r.choice(PODS)
            self.delete("Pod", f"ns/{name}") if r.random() < 0.1 else self.put("Pod", self.pod(name))
        elif kind == "PodGroup":
            name = r.choice(GROUPS)
            self.delete("PodGroup", f"ns/{name}") if r.random() < 0.2 else self.put("PodGroup", self.pod_group(name))
        elif kind == "BindRequest":
            if r.random() < 0.3 and self.views.bind_requests:
                self.delete("BindRequest", r.choice(sorted(self.views.bind_requests)))
            else:
                self.put("BindRequest", self.bind_request(r.choice(PODS)))
        elif kind == "Node":
            name = r.choice(NODES)
            self.delete("Node", name) if r.random() < 0.1 else self.put("Node", self.node(name))
        elif kind == "Queue":
            name = r.choice(QUEUES[1:])
            self.delete("Queue", name) if r.random() < 0.1 else self.put("Queue", self.queue(name))
        elif kind == "Topology":
            self.delete("Topology", "racks") if r.random() < 0.3 else self.put("Topology", self.topology())
        else:
            self.put("PriorityClass", self.priority_class(r.choice(["train", "high"])))

    def take_changes(self) -> dict[str, set[str]]:
        changed, self.changed = self.changed, {}
        return changed


def reference(views: Views, scope: Scope, now: float) -> tuple[Assembly, Any]:
    out = assemble(views, scope, now, HEAD)
    return out, scenario_from_doc(out.doc, "<cluster>", validate=False).snapshot()


def decisions(cluster: Any, doc: dict[str, Any]) -> Any:
    scn = scenario_settings(doc)
    config = config_from(scn.config, actions=scn.actions, params=Params.from_scenario(scn.params, scn.stale_grace_seconds))
    ssn = run_cycle(cluster, config, default_bundle()).session
    fit = {j.name: (list(j.fit_errors), dict(j.task_fit_errors)) for j in ssn.cluster.jobs.values()}
    return (repr(ssn.binds), repr(ssn.pipelines), repr(ssn.evictions), fit)


def same(delta: tuple[Assembly, Any], full: tuple[Assembly, Any]) -> bool:
    (a, c), (b, d) = delta, full
    return (a.doc == b.doc and [str(p) for p in a.problems] == [str(p) for p in b.problems]
            and a.origins == b.origins and dump_cluster(c) == dump_cluster(d))


@pytest.mark.parametrize("seed", range(40))
def test_the_delta_snapshot_equals_the_full_rebuild_after_random_informer_events(seed: int) -> None:
    cluster = RandomCluster(seed)
    builder = DeltaSnapshot(resync_every=7)
    scope = Scope(partition="other") if seed % 10 == 9 else Scope()
    for cycle in range(25):
        changes = None if cycle == 0 else cluster.take_changes()
        now = NOW + 7.3 * cycle
        got = builder.snapshot(cluster.views, changes, scope, now, HEAD)
        want = reference(cluster.views, scope, now)
        assert same(got, want), f"seed {seed}, cycle {cycle}, changes {changes}"
        if cycle % 6 == 5:   # the pieces stay pristine: the first copy is scheduled on, the second not
            assert decisions(got[1], got[0].doc) == decisions(want[1], want[0].doc)
        for _ in range(cluster.rng.choice([0, 1, 1, 2, 4, 8])):
            cluster.event()
    assert (builder.stats.failures, builder.stats.drifts) == (0, 0)
    assert builder.stats.delta > 0


def test_a_cycle_without_changes_builds_nothing_again() -> None:
    cluster = RandomCluster(1)
    builder = DeltaSnapshot()
    builder.snapshot(cluster.views, None, Scope(), NOW, HEAD)
    builder.snapshot(cluster.views, {}, Scope(), NOW + 1, HEAD)
    assert (builder.stats.full, builder.stats.delta, builder.stats.jobs, builder.stats.nodes) == (1, 1, 0, 0)


def test_a_pod_that_changes_rebuilds_its_job_and_its_node_only() -> None:
    cluster = RandomCluster(2)
    pod = cluster.pod("p3")
    pod["metadata"]["annotations"].pop("pod-group-name", None)
    pod["metadata"]["labels"] = {convert.QUEUE_LABEL: "q0"}
    pod["spec"] |= {"nodeName": "n1", "schedulerName": "kai-scheduler"}
    pod["status"]["phase"] = "Running"
    cluster.put("Pod", pod)
    builder = DeltaSnapshot()
    builder.snapshot(cluster.views, None, Scope(), NOW, HEAD)
    cluster.take_changes()
    pod["status"]["phase"] = "Succeeded"
    cluster.put("Pod", pod)
    got = builder.snapshot(cluster.views, cluster.take_changes(), Scope(), NOW + 1, HEAD)
    assert (builder.stats.full, builder.stats.delta, builder.stats.jobs, builder.stats.nodes) == (1, 1, 1, 1)
    assert same(got, reference(cluster.views, Scope(), NOW + 1))


def test_a_new_node_or_priority_class_rebuilds_everything() -> None:
    cluster = RandomCluster(3)
    builder = DeltaSnapshot()
    builder.snapshot(cluster.views, None, Scope(), NOW, HEAD)
    cluster.take_changes()
    node = cluster.node("n-new")
    node["metadata"]["labels"].pop(POOL, None)
    for kind, obj in (("Node", node), ("PriorityClass", cluster.priority_class("train"))):
        cluster.put(kind, obj)
        got = builder.snapshot(cluster.views, cluster.take_changes(), Scope(), NOW + 1, HEAD)
        assert same(got, reference(cluster.views, Scope(), NOW + 1))
    got = builder.snapshot(cluster.views, {}, Scope(partition="other"), NOW + 2, HEAD)   # another shard
    assert same(got, reference(cluster.views, Scope(partition="other"), NOW + 2))
    assert (builder.stats.full, builder.stats.failures) == (4, 0)


def test_a_delta_step_that_fails_falls_back_to_the_full_rebuild_and_says_why(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = RandomCluster(4)
    builder = DeltaSnapshot()
    builder.snapshot(cluster.views, None, Scope(), NOW, HEAD)
    cluster.take_changes()
    cluster.put("Pod", cluster.pod("p5"))
    real, calls = builder._index_pod, []

    def broken_once(views: Views, key: str) -> Any:    # an index out of step with the views, once
        calls.append(key)
        if len(calls) == 1:
            raise KeyError(key)
        return real(views, key)
    monkeypatch.setattr(builder, "_index_pod", broken_once)
    before = _counted("fallback")
    with caplog.at_level(logging.WARNING, logger="kaipolicy.cache"):
        got = builder.snapshot(cluster.views, cluster.take_changes(), Scope(), NOW + 1, HEAD)
    assert same(got, reference(cluster.views, Scope(), NOW + 1))
    assert builder.stats.failures == 1 and builder.stats.full == 2
    assert _counted("fallback") == before + 1
    assert "the delta failed (KeyError: 'ns/p5'); rebuilding it whole" in caplog.text


def _counted(build: str) -> float:
    return metrics.REGISTRY.get_sample_value("kaipolicy_snapshots_total", {"build": build}) or 0.0


class _Store:
    """An informer's store over the random cluster's objects of one kind."""

    def __init__(self, cluster: RandomCluster, kind: str) -> None:
        self.cluster, self.kind = cluster, kind

    def get(self, key: str) -> dict[str, Any] | None:
        obj = self.cluster.objects.get((self.kind, key))
        return None if obj is None else copy.deepcopy(obj)


def _source(cluster: RandomCluster, delta: bool) -> K8sSource:
    source = K8sSource(FakeApi(), delta=delta)   # type: ignore[arg-type]
    source.informers = {kind: _Store(cluster, kind) for kind in KINDS}   # type: ignore[misc]
    return source


@pytest.mark.parametrize("seed", range(6))
def test_the_live_source_builds_from_its_informers_changes_what_it_builds_whole(seed: int) -> None:
    cluster = RandomCluster(seed)
    sources = [_source(cluster, delta=True), _source(cluster, delta=False)]
    changes = {kind: {key for k, key in cluster.objects if k == kind} for kind in KINDS}
    for cycle in range(15):
        for source in sources:
            for kind, keys in changes.items():
                for key in keys:
                    source._marker(kind)(key)
        if cycle % 4 == 3:    # `kaipolicy snapshot`'s whole document in between takes no change from the delta
            sources[0].scenario(NOW)
        now = NOW + cycle
        got, want = (source.cycle(now) for source in sources)
        assert same(got, want), f"seed {seed}, cycle {cycle}"
        for _ in range(cluster.rng.choice([1, 2, 5])):
            cluster.event()
        changes = cluster.take_changes()
    assert sources[0].delta is not None and sources[0].delta.stats.delta > 0


def test_a_resync_builds_whole_and_says_when_the_delta_had_drifted(caplog: pytest.LogCaptureFixture) -> None:
    cluster = RandomCluster(5)
    builder = DeltaSnapshot(resync_every=3)
    for cycle in range(3):
        got = builder.snapshot(cluster.views, None if cycle == 0 else {}, Scope(), NOW + cycle, HEAD)
    assert (builder.stats.full, builder.stats.delta, builder.stats.drifts) == (2, 1, 0)
    (_, unit), *_ = builder.order
    spec = builder.pieces[unit].piece.spec
    assert spec is not None
    spec["priority"] += 1      # a kept piece gone wrong
    with caplog.at_level(logging.ERROR, logger="kaipolicy.cache"):
        for cycle in range(3, 6):
            got = builder.snapshot(cluster.views, {}, Scope(), NOW + cycle, HEAD)
    assert same(got, reference(cluster.views, Scope(), NOW + 5))
    assert builder.stats.drifts == 1
    assert f"the delta had drifted from the whole rebuild (jobs {spec['name']})" in caplog.text
