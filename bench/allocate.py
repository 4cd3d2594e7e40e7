"""Allocate benchmark on the reference's shapes; prints JSON.

Shapes: N nodes x 8 GPUs, J pending one-GPU jobs spread over 4 queues under 2 departments,
each queue deserving a quarter of the GPUs (the reference's BenchmarkAllocateAction_*, as its
test helpers build them: 20,000 CPU cores and 20 GB per node, job i created J - i minutes ago;
every placement is then the reference's).
Per shape: median seconds of snapshot + session + allocate (the reference times session build
too), peak traced memory, and in the same run a numpy lower bound (one feasibility pass over
all task x node pairs) so the ratio is comparable across noisy machines.

usage: python bench/allocate.py [--repeat 7] [--shapes 10x50,50x200,100x500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tracemalloc
from typing import Any

import numpy as np

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.cycle import run_cycle
from kaipolicy.framework.config import Params, config_from

REFERENCE_MS = {(100, 500): 183.0}
#: The reference's Go, allocate alone on the same shapes, on the development machine
#: (bench/README.md, "reference shapes vs Go").
REFERENCE_GO_ACTION_MS = {(10, 50): 8.2, (50, 200): 51.5, (100, 500): 167.4}


def shape(nodes: int, jobs: int, running: bool = False) -> dict[str, Any]:
    total = nodes * 8
    queues = [{"name": f"queue-{i}", "parent": "dept-a" if i < 2 else "dept-b", "deserved": {"gpu": total / 4},
               "overQuotaWeight": {"gpu": 1}, "creationOrder": i} for i in range(4)]
    depts = [{"name": d, "deserved": {"gpu": total / 2}, "creationOrder": i} for i, d in enumerate(("dept-a", "dept-b"))]
    node_specs = [{"name": f"node-{i}", "gpus": 8, "gpuMemoryMiB": 40000, "cpuMillis": 20_000_000,
                   "memoryBytes": 20 * 10**9, "maxPods": 110,
                   "labels": {"nvidia.com/gpu.count": "8", "kai.scheduler/type": f"node-{i}"}} for i in range(nodes)]
    job_specs = []
    for i in range(jobs):
        task: dict[str, Any] = {"state": "Pending"}
        if running and i % 2 == 0:
            task = {"state": "Running", "node": f"node-{i % nodes}"}
        job_specs.append({"name": f"job-{i}", "queue": f"queue-{i % 4}", "priority": 50, "createdMinutesAgo": jobs - i,
                          "perTask": {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 10**9}, "tasks": [task]})
    return {"name": f"allocate {nodes}x{jobs}", "actions": ["allocate"], "defaultDepartment": False,
            "departments": depts, "queues": queues, "nodes": node_specs, "jobs": job_specs, "expect": {}}


def numpy_lower_bound(nodes: int, jobs: int) -> float:
    """One vectorised feasibility pass over every (task, node) pair: a floor no engine beats."""
    rng = np.random.default_rng(0)
    free = rng.integers(0, 9, size=(1, nodes)).astype(float)
    need = np.ones((jobs, 1))
    t0 = time.perf_counter()
    feasible = need <= free
    _ = feasible.any(axis=1).sum()
    return time.perf_counter() - t0


def measure(bundle: Any, nodes: int, jobs: int, repeat: int) -> dict[str, Any]:
    doc = shape(nodes, jobs)
    times = []
    action_times = []
    binds = 0
    for _ in range(repeat):
        scn = scenario_from_doc(doc, f"<bench {nodes}x{jobs}>")
        config = config_from(None, actions=["allocate"], params=Params())
        t0 = time.perf_counter()
        cluster = scn.snapshot()
        res = run_cycle(cluster, config, bundle)
        times.append(time.perf_counter() - t0)
        action_times.append(res.action_seconds["allocate"])
        binds = len(res.session.binds)
    tracemalloc.start()
    scn = scenario_from_doc(doc, "<bench>")
    run_cycle(scn.snapshot(), config_from(None, actions=["allocate"], params=Params()), bundle)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    floor = statistics.median(numpy_lower_bound(nodes, jobs) for _ in range(repeat))
    median = statistics.median(times)
    out = {"shape": f"{nodes}x{jobs}", "nodes": nodes, "jobs": jobs, "binds": binds,
           "median_ms": round(median * 1000, 2), "min_ms": round(min(times) * 1000, 2),
           "peak_mib": round(peak / 2**20, 2), "numpy_floor_ms": round(floor * 1000, 4),
           "ratio_to_floor": round(median / floor, 1) if floor else None}
    out["allocate_median_ms"] = round(statistics.median(action_times) * 1000, 2)
    go = REFERENCE_GO_ACTION_MS.get((nodes, jobs))
    if go:
        # the reference's Go times its action alone (its session is built with the timer off)
        out["reference_go_action_ms"] = go
        out["allocate_vs_go"] = round(out["allocate_median_ms"] / go, 2)
    ref = REFERENCE_MS.get((nodes, jobs))
    if ref:
        out["reference_go_ms"] = ref
        out["within_reference"] = median * 1000 <= ref
    return out


def main() -> None:
    # imported here: the tests load this file by its path, without bench/ on the path
    from machine import describe as describe_machine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--shapes", default="10x50,50x200,100x500")
    a = ap.parse_args()
    bundle = load(None)
    results = []
    for s in a.shapes.split(","):
        n, j = (int(x) for x in s.split("x"))
        results.append(measure(bundle, n, j, a.repeat))
    print(json.dumps({"benchmark": "allocate", "machine": describe_machine(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
