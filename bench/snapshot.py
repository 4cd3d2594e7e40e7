"""What a live snapshot costs, without an API server; prints JSON.

Shapes: N nodes x 8 GPUs with 4 queues, 2 PodGroup pods per node running and as many pending,
half in gangs of 4, plus one DaemonSet-like pod of another scheduler per node (`--gangs G` puts
G gangs of 4 on each node, the later ones CPU-only: G = 8 gives the large shape's ~33 pods per
node). Per shape, median seconds of: converting every object (a cold start), re-converting 1% of
them (a cycle after a few changes), joining the views into the scenario document (assemble),
building the ClusterInfo from it (the scenario source's builder), and the schema check that
`kaipolicy snapshot` adds once.

A cycle's snapshot, alternating in one run: `full_cycle_s` is the whole rebuild the loop did
before the delta (assemble, then `scenario_from_doc`, which builds once for its warnings, then
the snapshot), `delta_cycle_s` the delta (`cache/delta.py`) after 1% of the pods changed
(labels changed; every other one of those also Running <-> Succeeded), `delta_idle_s` after
nothing changed (the copies alone). Each delta cycle is checked against the full rebuild.

usage: python bench/snapshot.py [--repeat 5] [--shapes 100,500,1000,4000] [--gangs 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from kaipolicy.cache import convert, convert_pods
from kaipolicy.cache.assemble import Scope, Views, assemble
from kaipolicy.cache.delta import DeltaSnapshot
from kaipolicy.cache.scenario_schema import validate_scenario
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.collector import paused_gc

NOW = 1_800_000_000.0
CREATED = "2026-11-30T00:00:00Z"


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": "1", "creationTimestamp": CREATED, **extra}
    return meta | ({"namespace": namespace} if namespace else {})


def _pod(name: str, group: str | None, node: str, gpus: int, scheduler: str = "kai-scheduler") -> dict[str, Any]:
    annotations = {"pod-group-name": group} if group else {}
    requests = {"cpu": "4", "memory": "32Gi"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return {"metadata": _meta(name, "ns", labels={"kai.scheduler/queue": "q0", "app": name[:3]}, annotations=annotations),
            "spec": {"schedulerName": scheduler, "nodeName": node or None,
                     "containers": [{"name": "main", "resources": {"requests": requests, "limits": requests}}],
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "effect": "NoExecute"}]},
            "status": {"phase": "Running" if node else "Pending"}}


def objects(nodes: int, gangs: int = 1) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"Node": [], "Queue": [], "PodGroup": [], "Pod": []}
    for i in range(nodes):
        out["Node"].append({"metadata": _meta(f"node-{i}", labels={"nvidia.com/gpu.memory": "81559", "zone": str(i % 4)}),
                            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                                       "nvidia.com/gpu": "8"}}})
        out["Pod"].append(_pod(f"ds-{i}", None, f"node-{i}", 0, scheduler="default-scheduler"))
    for q in range(4):
        out["Queue"].append({"metadata": _meta(f"q{q}"), "spec": {"resources": {
            "gpu": {"quota": nodes * 2, "limit": -1, "overQuotaWeight": 1}}}})
    for g in range(nodes * gangs):   # gangs of 4 per node: 2 running, 2 pending
        out["PodGroup"].append({"metadata": _meta(f"g{g}", "ns"), "spec": {"queue": f"q{g % 4}", "minMember": 2}})
        for k in range(4):
            out["Pod"].append(_pod(f"g{g}-{k}", f"g{g}", f"node-{g % nodes}" if k < 2 else "", 1 if g < nodes else 0))
    return out


CONVERTERS: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "Node": (convert.node, "nodes"), "Queue": (convert.queue, "queues"),
    "PodGroup": (convert_pods.pod_group, "pod_groups"), "Pod": (convert_pods.pod, "pods")}


def convert_all(objs: dict[str, list[dict[str, Any]]], share: float = 1.0) -> Views:
    views = Views()
    for kind, items in objs.items():
        fn, attr = CONVERTERS[kind]
        step = max(int(1 / share), 1)
        for obj in items[::step]:
            view = fn(obj)
            getattr(views, attr)[view.meta.key] = view
    return views


def median(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def change(objs: dict[str, list[dict[str, Any]]], views: Views, cycle: int) -> set[str]:
    """Change 1% of the pods (another slice each cycle) and convert them; their keys."""
    pods = objs["Pod"]
    step = 100
    keys = set()
    for obj in pods[cycle % step::step]:
        obj["metadata"]["labels"]["rev"] = str(cycle)
        obj["metadata"]["resourceVersion"] = str(cycle + 2)
        if obj["spec"]["nodeName"] and len(keys) % 2 == 0:
            obj["status"]["phase"] = "Succeeded" if obj["status"]["phase"] == "Running" else "Running"
        view = convert_pods.pod(obj)
        views.pods[view.meta.key] = view
        keys.add(view.meta.key)
    return keys


def full_cycle(views: Views, head: dict[str, Any], now: float) -> Any:
    out = assemble(views, Scope(), now, head)
    return out, scenario_from_doc(out.doc, "bench", validate=False).snapshot()


def cycles(objs: dict[str, list[dict[str, Any]]], views: Views, head: dict[str, Any], repeat: int) -> dict[str, float]:
    """Full rebuilds and delta cycles, alternating; the delta's result checked against the full one."""
    delta = DeltaSnapshot()
    delta.snapshot(views, None, Scope(), NOW, head)
    times: dict[str, list[float]] = {"full_cycle_s": [], "delta_cycle_s": [], "delta_idle_s": []}
    for r in range(repeat):
        changed = {"Pod": change(objs, views, r)}
        t = time.perf_counter()
        got = delta.snapshot(views, changed, Scope(), NOW + r, head)
        times["delta_cycle_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        want = full_cycle(views, head, NOW + r)
        times["full_cycle_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        delta.snapshot(views, {}, Scope(), NOW + r, head)
        times["delta_idle_s"].append(time.perf_counter() - t)
        if got[0].doc != want[0].doc or list(got[1].jobs) != list(want[1].jobs):
            raise SystemExit("the delta's snapshot differs from the full rebuild")
    if delta.stats.full != 1:
        raise SystemExit(f"the delta rebuilt whole: {delta.stats}")
    return {k: round(statistics.median(v), 4) for k, v in times.items()}


def bench(nodes: int, repeat: int, gangs: int) -> dict[str, Any]:
    objs = objects(nodes, gangs)
    views = convert_all(objs)
    head = {"actions": ["allocate"], "staleGracePeriodSeconds": 60.0}
    doc = assemble(views, Scope(), NOW, head).doc
    out: dict[str, Any] = {"nodes": nodes, "pods": len(objs["Pod"])}
    with paused_gc():     # as the loop takes its snapshot
        out |= {
            "convert_all_s": round(median(lambda: convert_all(objs), repeat), 4),
            "convert_1pct_s": round(median(lambda: convert_all(objs, 0.01), repeat), 4),
            "assemble_s": round(median(lambda: assemble(views, Scope(), NOW, head), repeat), 4),
            "build_s": round(median(lambda: scenario_from_doc(doc, validate=False).snapshot(), repeat), 4),
        }
        out |= cycles(objs, views, head, repeat)
    out["full_over_delta"] = round(out["full_cycle_s"] / out["delta_cycle_s"], 1)
    if nodes <= 1000:
        out["schema_check_s"] = round(median(lambda: validate_scenario(doc, "bench"), repeat), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shapes", default="100,500,1000,4000")
    ap.add_argument("--gangs", type=int, default=1, help="gangs of 4 pods per node (default 1)")
    args = ap.parse_args()
    print(json.dumps([bench(int(n), args.repeat, args.gangs) for n in args.shapes.split(",")], indent=1))


if __name__ == "__main__":
    main()
