"""The reference's production shape: 4000 nodes x 8 GPUs, ~140k running pods, 5k pending in gangs; prints JSON.

Cluster: 4000 nodes (8 GPUs, 128 cores, 1 TiB, 110 pods). 100 leaf queues in a 3-level tree (4
departments, 20 sub-departments, 100 queues; deserved GPUs split evenly). Per node, running:
one 6-pod training gang on 6 whole GPUs (priority 50), four 0.25-GPU inference pods sharing one
GPU (priority 125, non-preemptible), three 8-pod CPU-only service jobs' pods (priority 100); one
GPU per node is idle. Pending: ~5,000 one-GPU training pods in gangs of 1 to 64 (priority 50),
spread over the queues. One cycle of all five actions; each phase timed as the reference's
metrics name them (open session includes taking the snapshot, as the reference's does).

usage: python bench/large.py [--repeat 3] [--nodes 4000]
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import time
import tracemalloc
from typing import Any

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import release, run_cycle
from kaipolicy.framework.config import Params, config_from

ALL_ACTIONS = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
GANGS = (1, 2, 4, 8, 16, 32, 64)
GIB = 2**30
TARGETS = {"e2eSeconds": 2.0, "peakRssMiB": 2048}


def queues(nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    gpus = nodes * 8
    depts = [{"name": f"dept-{d}", "deserved": {"gpu": gpus / 4}, "creationOrder": d} for d in range(4)]
    subs = [{"name": f"sub-{s}", "parent": f"dept-{s // 5}", "deserved": {"gpu": gpus / 20}, "creationOrder": 4 + s}
            for s in range(20)]
    leaves = [{"name": f"queue-{q:02d}", "parent": f"sub-{q // 5}", "deserved": {"gpu": gpus / 100},
               "creationOrder": 24 + q} for q in range(100)]
    return depts, subs + leaves


def _job(name: str, queue: int, priority: int, per_task: dict[str, Any], tasks: list[dict[str, Any]],
         age: float) -> dict[str, Any]:
    return {"name": name, "queue": f"queue-{queue:02d}", "priority": priority, "createdMinutesAgo": age,
            "perTask": per_task, "tasks": tasks}


def running_jobs(nodes: int) -> list[dict[str, Any]]:
    train = {"gpus": 1, "cpuMillis": 8000, "memoryBytes": 64 * GIB}
    infer = {"gpus": 0.25, "cpuMillis": 2000, "memoryBytes": 8 * GIB}
    service = {"cpuMillis": 1000, "memoryBytes": 2 * GIB}
    jobs = []
    for n in range(nodes):
        node = f"node-{n:04d}"
        jobs.append(_job(f"train-{n}", n % 100, 50, train, [{"state": "Running", "node": node}] * 6, 600 + n % 97))
        jobs += [_job(f"infer-{n}-{k}", (n + k) % 100, 125, infer,
                      [{"state": "Running", "node": node, "gpuGroups": [f"{node}-shared"]}], 300 + k)
                 for k in range(4)]
    for s in range(nodes * 3):
        # each service job spreads its 8 pods over 8 consecutive nodes
        tasks = [{"state": "Running", "node": f"node-{(s // 3 * 8 + k) % nodes:04d}"} for k in range(8)]
        jobs.append(_job(f"svc-{s}", s % 100, 100, service, tasks, 900 + s % 13))
    return jobs


def pending_jobs(pods: int) -> list[dict[str, Any]]:
    jobs, made, i = [], 0, 0
    while made < pods:
        size = min(GANGS[i % len(GANGS)], pods - made)
        jobs.append(_job(f"pending-{i}", (i * 7) % 100, 50, {"gpus": 1, "cpuMillis": 8000, "memoryBytes": 64 * GIB},
                         [{"state": "Pending"}] * size, 1 + (i % 50) / 10))
        made += size
        i += 1
    return jobs


def shape(nodes: int, pending: int) -> dict[str, Any]:
    node_specs = [{"name": f"node-{n:04d}", "gpus": 8, "gpuMemoryMiB": 81000, "cpuMillis": 128000,
                   "memoryBytes": 1024 * GIB, "maxPods": 110,
                   "labels": {"nvidia.com/gpu.count": "8", "nvidia.com/gpu.product": "H100"}} for n in range(nodes)]
    depts, leaf_queues = queues(nodes)
    return {"name": f"large {nodes} nodes", "actions": ALL_ACTIONS, "departments": depts, "queues": leaf_queues,
            "nodes": node_specs, "jobs": running_jobs(nodes) + pending_jobs(pending), "expect": {}}


def footprint(nodes: int = 100) -> dict[str, int]:
    """Bytes the model keeps per node and per running pod (its job's share included), traced
    while building the snapshot of this shape without and with its pods."""
    sizes = []
    for with_pods in (False, True):
        doc = shape(nodes, 0)
        if not with_pods:
            doc["jobs"] = []
        scn = scenario_from_doc(doc, "<footprint>")
        gc.collect()
        tracemalloc.start()
        cluster = scn.snapshot()
        sizes.append(tracemalloc.get_traced_memory()[0])
        tracemalloc.stop()
    pods = sum(len(j.tasks) for j in cluster.jobs.values())
    return {"perNode": round(sizes[0] / nodes), "perRunningPod": round((sizes[1] - sizes[0]) / pods)}


def one_cycle(scn: Any, bundle: Any) -> dict[str, float | int]:
    t0 = time.perf_counter()
    with paused_gc():   # from the snapshot until the cycle is released, as the scheduler's loop keeps it
        cluster = scn.snapshot()
        snapshot = time.perf_counter() - t0
        res = run_cycle(cluster, config_from(None, actions=ALL_ACTIONS, params=Params()), bundle)
        ssn = res.session
        out: dict[str, float | int] = {"snapshot": snapshot, "open_session": snapshot + res.session_seconds}
        out.update({f"action_{a}": s for a, s in res.action_seconds.items()})
        out["e2e"] = snapshot + res.seconds
        out.update(binds=len(ssn.binds), pipelined=len(ssn.pipelines), evictions=len(ssn.evictions))
        release(res)   # read: freed as the scheduler frees a cycle, so the peak is one cycle's
    return out


def main() -> None:
    # imported here: the tests load this file by its path, without bench/ on the path
    from machine import describe as describe_machine

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--pending", type=int, default=5000)
    a = ap.parse_args()
    bundle = load(None)
    t0 = time.perf_counter()
    doc = shape(a.nodes, a.pending)
    scn = scenario_from_doc(doc, "<large>")
    load_seconds = time.perf_counter() - t0
    runs = [one_cycle(scn, bundle) for _ in range(a.repeat)]
    phases = [k for k in runs[0] if k not in ("binds", "pipelined", "evictions")]
    median_ms = {f"{k}_latency_milliseconds": round(statistics.median(float(r[k]) for r in runs) * 1000, 1)
                 for k in phases}
    running = sum(len(j["tasks"]) for j in doc["jobs"] if j["tasks"][0]["state"] == "Running")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    e2e = median_ms["e2e_latency_milliseconds"] / 1000
    print(json.dumps({"benchmark": "large", "machine": describe_machine(), "nodes": a.nodes, "runningPods": running,
                      "pendingPods": a.pending, "jobs": len(doc["jobs"]), "repeat": a.repeat,
                      "buildScenarioSeconds": round(load_seconds, 2), "median": median_ms,
                      "binds": runs[-1]["binds"], "pipelined": runs[-1]["pipelined"],
                      "evictions": runs[-1]["evictions"], "peakRssMiB": round(peak, 1),
                      "footprintBytes": footprint(),
                      "targets": TARGETS, "withinTargets": e2e <= TARGETS["e2eSeconds"]
                      and peak <= TARGETS["peakRssMiB"]}, indent=1))


if __name__ == "__main__":
    main()
