"""The openb GPU trace (Alibaba, ATC'23) as one cluster: allocate and full-cycle timings; prints JSON.

Mapping (also in bench/README.md): every node of `openb_node_list_all_node.csv` becomes a node
(`sn` the name, `cpu_milli` millicores, `memory_mib` MiB, `gpu` whole devices, `model` the label
`nvidia.com/gpu.product`, GPU memory per model from GPU_MEMORY_MIB); every pod of the pod list
becomes a pending one-pod job (`num_gpu` whole GPUs, or `gpu_milli`/1000 of one GPU when below
1000, CPU-only when 0) in the queue of its `qos` class (LS, BE, Burstable, Guaranteed: four queues
under one department, each deserving its class's share of the trace's GPU demand), created in
the trace's `creation_time` order. Phases are timed separately: building the scenario (from the
specs, as a cache would), the snapshot, the session, each action.

usage: python bench/openb.py [--repeat 3] [--prefixes 25,50,100] [--full PERCENT] [--quality]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from kaipolicy.builtins import fragmentation
from kaipolicy.cache.scenario_source import Scenario, scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import release, run_cycle
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.config import Params, config_from

ROOT = Path(__file__).resolve().parent.parent
TRACE = Path(os.environ.get("KAIPOLICY_OPENB", ROOT.parent / "shared" / "data" / "openb"))
ALL_ACTIONS = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
QOS_QUEUES = ("LS", "BE", "Burstable", "Guaranteed")
#: MiB of one device per GPU model, rounded down to 100 MiB (the trace names models, not sizes;
#: G2 and G3 are Alibaba's own names, taken here as 32 GB devices).
GPU_MEMORY_MIB = {"T4": 15000, "P100": 16000, "V100M16": 16000, "V100M32": 32000, "A10": 22700,
                  "G2": 32000, "G3": 32000}
MiB = 2**20


def read_csv(name: str) -> list[dict[str, str]]:
    with open(TRACE / name, newline="") as fh:
        return list(csv.DictReader(fh))


def node_specs(rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        gpus = int(r["gpu"])
        labels = {"nvidia.com/gpu.count": str(gpus)}
        spec: dict[str, Any] = {"name": r["sn"], "gpus": gpus, "cpuMillis": int(r["cpu_milli"]),
                                "memoryBytes": int(r["memory_mib"]) * MiB, "maxPods": 110, "labels": labels}
        if gpus:
            labels["nvidia.com/gpu.product"] = r["model"]
            spec["gpuMemoryMiB"] = GPU_MEMORY_MIB[r["model"]]
        out.append(spec)
    return out


def pod_request(r: dict[str, str]) -> dict[str, Any]:
    req: dict[str, Any] = {"cpuMillis": int(r["cpu_milli"]), "memoryBytes": int(r["memory_mib"]) * MiB}
    n, milli = int(r["num_gpu"]), int(r["gpu_milli"])
    if n >= 1 and milli < 1000:
        req["gpus"] = milli / 1000
    elif n:
        req["gpus"] = n
    return req


def gpu_demand(req: dict[str, Any]) -> float:
    return float(req.get("gpus", 0))


def scenario_doc(nodes: list[dict[str, str]], pods: list[dict[str, str]], actions: list[str],
                 config: dict[str, Any] | None = None) -> dict[str, Any]:
    latest = max(int(p["creation_time"]) for p in pods)
    demand: Counter[str] = Counter()
    jobs = []
    for p in pods:
        req = pod_request(p)
        demand[p["qos"]] += gpu_demand(req)
        jobs.append({"name": p["name"], "queue": p["qos"], "priority": 50,
                     "createdMinutesAgo": (latest - int(p["creation_time"])) / 60.0,
                     "perTask": req, "tasks": [{"state": "Pending"}]})
    total = sum(demand.values()) or 1.0
    specs = node_specs(nodes)
    capacity = sum(n["gpus"] for n in specs)
    queues = [{"name": q, "deserved": {"gpu": round(capacity * demand[q] / total, 2)}, "creationOrder": i}
              for i, q in enumerate(QOS_QUEUES)]
    doc: dict[str, Any] = {"name": f"openb {len(pods)} pods", "actions": actions, "queues": queues,
                           "nodes": specs, "jobs": jobs, "expect": {}}
    if config:
        doc["config"] = config
    return doc


def numpy_floor(scn: Scenario) -> float:
    """One vectorised feasibility pass (CPU, memory, GPUs) over every (pod, node) pair."""
    doc = scn.doc
    free = np.array([[n["cpuMillis"], n["memoryBytes"], n["gpus"]] for n in doc["nodes"]], dtype=float)
    need = np.array([[j["perTask"].get("cpuMillis", 0), j["perTask"].get("memoryBytes", 0),
                      j["perTask"].get("gpus", 0)] for j in scn.jobs], dtype=float)
    t0 = time.perf_counter()
    ok = ((need[:, None, 0] <= free[None, :, 0]) & (need[:, None, 1] <= free[None, :, 1])
          & (need[:, None, 2] <= free[None, :, 2]))
    ok.any(axis=1).sum()
    return time.perf_counter() - t0


def one_cycle(doc: dict[str, Any], bundle: Any, audit: Audit | None = None, keep: bool = False) -> dict[str, Any]:
    """Build the scenario, then snapshot, session and actions, each timed. The collector stays
    paused from the snapshot until the cycle is released, as the scheduler's loop keeps it;
    with `keep` the session is returned instead (`session_obj`), unreleased."""
    t0 = time.perf_counter()
    scn = scenario_from_doc(doc, "<openb>")
    t1 = time.perf_counter()
    with paused_gc():
        cluster = scn.snapshot()
        t2 = time.perf_counter()
        config = config_from(doc.get("config"), actions=doc["actions"], params=Params())
        res = run_cycle(cluster, config, bundle, audit)
        ssn = res.session
        out = {"load": t1 - t0, "snapshot": t2 - t1, "session": res.session_seconds, **res.action_seconds,
               "cycle": res.seconds, "binds": len(ssn.binds), "pipelined": len(ssn.pipelines),
               "evictions": len(ssn.evictions), "scenario": scn}
        if keep:
            out["session_obj"] = ssn
        else:
            release(res)
    return out


def measure(nodes: list[dict[str, str]], pods: list[dict[str, str]], actions: list[str], bundle: Any,
            repeat: int) -> dict[str, Any]:
    doc = scenario_doc(nodes, pods, actions)
    runs = [one_cycle(doc, bundle) for _ in range(repeat)]
    last = runs[-1]
    phases = ["load", "snapshot", "session", *actions, "cycle"]
    median = {p: round(statistics.median(r[p] for r in runs), 4) for p in phases}
    placed = last["binds"] + last["pipelined"]
    floor = statistics.median(numpy_floor(last["scenario"]) for _ in range(3))
    return {"pods": len(pods), "nodes": len(nodes), "actions": "+".join(actions), "repeat": repeat,
            "medianSeconds": median, "minCycleSeconds": round(min(r["cycle"] for r in runs), 4),
            "binds": last["binds"], "pipelined": last["pipelined"], "evictions": last["evictions"],
            "podsPlacedPerSecond": round(placed / median["allocate"]) if median["allocate"] else None,
            "numpyFloorSeconds": round(floor, 4),
            "cycleToFloor": round(median["cycle"] / floor, 1) if floor else None}


def peak_memory(nodes: list[dict[str, str]], pods: list[dict[str, str]], actions: list[str],
                bundle: Any) -> dict[str, float]:
    doc = scenario_doc(nodes, pods, actions)
    tracemalloc.start()
    one_cycle(doc, bundle)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"tracedPeakMiB": round(peak / MiB, 1),
            "maxRssMiB": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


# ---- placement quality ------------------------------------------------------------------------------
PLUGINS = ["predicates", "proportion", "priority", "elastic", "kubeflow", "ray", "nodeavailability",
           "gpusharingorder", "gpupack", "resourcetype", "subgrouporder", "taskorder", "nominatednode",
           "dynamicresources", "nodeplacement", "minruntime", "topology", "snapshot"]
FRAGMENTATION_AWARE = ROOT / "examples" / "policies" / "fragmentation-aware"


def policy_config(name: str) -> dict[str, Any] | None:
    """The scenario `config` of each compared policy: the default bundle's bin-packing, spread,
    and the fragmentation-aware rule file added to the default plugins."""
    if name == "binpack":
        return None
    plugins: list[dict[str, Any]] = [{"name": p} for p in PLUGINS]
    if name == "spread":
        plugins[PLUGINS.index("nodeplacement")]["arguments"] = {"gpu": "spread", "cpu": "spread"}
    else:
        plugins.append({"name": "fragmentationaware"})
    return {"tiers": [{"plugins": plugins}]}


def gpu_classes(bundle: Any) -> list[tuple[float, float, float]]:
    """(GPUs, CPU millicores, share) of the kinds of GPU pods, from the fragmentation-aware rule
    file's defaults (the openb trace's mix)."""
    args = bundle.plugins["fragmentationaware"].arguments
    kinds = ("small", "half", "large", "one", "few", "eight")
    return [(float(args[f"{k}Gpus"].default), float(args[f"{k}CpuMillis"].default),
             float(args[f"{k}Share"].default)) for k in kinds]


def quality(session: Any, classes: list[tuple[float, float, float]]) -> dict[str, Any]:
    """What the cycle left: GPU demand placed, GPUs free, free GPU no pending pod can use
    (stranded), and the paper's expected fragmentation over the trace's kinds of GPU pods."""
    tasks = [t for j in session.cluster.jobs.values() for t in j.tasks.values()]
    placed = [t for t in tasks if t.node]
    pending = [t.request for t in tasks if not t.node and t.request.gpus > 0]
    demand = sum(t.request.gpus for t in tasks)
    nodes = session.node_list
    width = max(n.gpu_count for n in nodes)
    free = np.array([fragmentation.devices(n, width) for n in nodes])
    cpu = np.array([n.idle.cpu for n in nodes])
    memory = np.array([n.idle.memory for n in nodes])
    usable = np.zeros(free.shape, dtype=bool)
    for req in set(pending):
        room = (cpu >= req.cpu) & (memory >= req.memory)
        if req.gpus < 1:
            usable |= room[:, None] & (free >= req.gpus)
        else:
            whole = free >= 1.0
            usable |= (room & (whole.sum(axis=1) >= req.gpus))[:, None] & whole
    expected = sum(share * fragmentation.fragments(free, cpu, gpus, millis).sum() for gpus, millis, share in classes)
    return {"podsPlaced": len(placed), "gpuPodsPlaced": sum(1 for t in placed if t.request.gpus > 0),
            "gpuDemandPlacedPercent": round(100 * sum(t.request.gpus for t in placed) / demand, 2),
            "gpuDemandBeforeFirstFailurePercent": round(100 * _before_first_failure(session) / demand, 2),
            "freeGpus": round(float(free.sum()), 2), "strandedGpus": round(float(free[~usable].sum()), 2),
            "expectedFragmentedGpus": round(float(expected), 2)}


def _before_first_failure(session: Any) -> float:
    """GPUs of the pods placed, in the order allocate tried them, before the first GPU pod that
    found no node (the paper's 'demand served before requests start failing'), read from the
    audit log: a task record per pod placed, a job record when a job fails."""
    jobs = session.cluster.jobs
    served = 0.0
    for rec in session.audit.records:
        if rec.get("action") != "allocate":
            continue
        if rec["kind"] == "task" and rec["outcome"] in ("allocated", "pipelined"):
            served += next(t.request.gpus for t in jobs[rec["job"]].tasks.values() if t.name == rec["task"])
        elif rec["kind"] == "job" and rec["outcome"] == "pending" \
                and any(t.request.gpus > 0 for t in jobs[rec["job"]].tasks.values()):
            break
    return served


def compare_policies(nodes: list[dict[str, str]], pods: list[dict[str, str]]) -> list[dict[str, Any]]:
    bundle = load([str(ROOT / "policies"), str(FRAGMENTATION_AWARE)])
    classes = gpu_classes(bundle)
    rows = []
    for name in ("binpack", "spread", "fragmentation-aware"):
        # the audit log gives the order allocate tried the jobs in (the demand served before the first failure)
        run = one_cycle(scenario_doc(nodes, pods, ["allocate"], policy_config(name)), bundle, Audit(enabled=True),
                        keep=True)
        rows.append({"policy": name, "allocateSeconds": round(run["allocate"], 3),
                     **quality(run["session_obj"], classes)})
    return rows


def prefix(pods: list[dict[str, str]], percent: int) -> list[dict[str, str]]:
    return pods[: max(1, len(pods) * percent // 100)]


def main() -> None:
    # imported here: the tests load this file by its path, without bench/ on the path
    from machine import describe as describe_machine

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prefixes", default="25,50,100", help="percentages of the pods, in creation order")
    ap.add_argument("--full", type=int, metavar="PERCENT",
                    help="also time the full cycle (all five actions) over this prefix; slow, see bench/README.md")
    ap.add_argument("--quality", action="store_true", help="also compare placement quality per policy")
    a = ap.parse_args()
    bundle = load(None)
    nodes = read_csv("openb_node_list_all_node.csv")
    pods = sorted(read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))
    out: dict[str, Any] = {"benchmark": "openb", "machine": describe_machine(), "allocate": []}
    for pct in (int(p) for p in a.prefixes.split(",") if p):
        out["allocate"].append({"prefixPercent": pct, **measure(nodes, prefix(pods, pct), ["allocate"], bundle,
                                                                  a.repeat)})
    if a.full:
        out["fullCycle"] = {"prefixPercent": a.full, **measure(nodes, prefix(pods, a.full), ALL_ACTIONS, bundle,
                                                                 a.repeat)}
    out["memory"] = peak_memory(nodes, pods, ["allocate"], bundle)
    if a.quality:
        out["quality"] = compare_policies(nodes, pods)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
