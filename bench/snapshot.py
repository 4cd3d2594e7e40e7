"""What a live snapshot costs, without an API server; prints JSON.

Shapes: N nodes x 8 GPUs with 4 queues, 2 PodGroup pods per node running and as many pending,
half in gangs of 4, plus one DaemonSet-like pod of another scheduler per node. Per shape, median
seconds of: converting every object (a cold start), re-converting 1% of them (a cycle after a
few changes), joining the views into the scenario document (assemble), building the ClusterInfo
from it (the scenario source's builder, as `K8sSource.snapshot()` does every cycle), and the
schema check that `kaipolicy snapshot` adds once.

usage: python bench/snapshot.py [--repeat 5] [--shapes 100,500,1000]
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
from kaipolicy.cache.scenario_schema import validate_scenario
from kaipolicy.cache.scenario_source import scenario_from_doc

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


def objects(nodes: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"Node": [], "Queue": [], "PodGroup": [], "Pod": []}
    for i in range(nodes):
        out["Node"].append({"metadata": _meta(f"node-{i}", labels={"nvidia.com/gpu.memory": "81559", "zone": str(i % 4)}),
                            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110",
                                                       "nvidia.com/gpu": "8"}}})
        out["Pod"].append(_pod(f"ds-{i}", None, f"node-{i}", 0, scheduler="default-scheduler"))
    for q in range(4):
        out["Queue"].append({"metadata": _meta(f"q{q}"), "spec": {"resources": {
            "gpu": {"quota": nodes * 2, "limit": -1, "overQuotaWeight": 1}}}})
    for g in range(nodes):   # one gang of 4 per node: 2 running, 2 pending
        out["PodGroup"].append({"metadata": _meta(f"g{g}", "ns"), "spec": {"queue": f"q{g % 4}", "minMember": 2}})
        for k in range(4):
            out["Pod"].append(_pod(f"g{g}-{k}", f"g{g}", f"node-{g}" if k < 2 else "", 1))
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


def bench(nodes: int, repeat: int) -> dict[str, Any]:
    objs = objects(nodes)
    views = convert_all(objs)
    head = {"actions": ["allocate"], "staleGracePeriodSeconds": 60.0}
    doc = assemble(views, Scope(), NOW, head).doc
    return {
        "nodes": nodes, "pods": len(objs["Pod"]),
        "convert_all_s": round(median(lambda: convert_all(objs), repeat), 4),
        "convert_1pct_s": round(median(lambda: convert_all(objs, 0.01), repeat), 4),
        "assemble_s": round(median(lambda: assemble(views, Scope(), NOW, head), repeat), 4),
        "build_s": round(median(lambda: scenario_from_doc(doc, validate=False).snapshot(), repeat), 4),
        "schema_check_s": round(median(lambda: validate_scenario(doc, "bench"), repeat), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shapes", default="100,500,1000")
    args = ap.parse_args()
    print(json.dumps([bench(int(n), args.repeat) for n in args.shapes.split(",")], indent=1))


if __name__ == "__main__":
    main()
