"""Seeded random clusters under reclaim pressure: GPU nodes filled with the running pods of
several queues (whole GPUs, fractions, GPU memory, CPU-only; single pods and gangs), and pending
jobs of a queue with fair share left to take. The general generator (`generate.py`) rarely
reaches the eviction solver's deep search; these reach it on every seed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from kaipolicy.framework.config import DEFAULT_PLUGINS


class _Node:
    """A node's spec, and the room its running pods leave."""

    def __init__(self, name: str, gpus: int, gpu_memory: int, cpu: int, memory: int) -> None:
        self.spec = {"name": name, "gpus": gpus, "gpuMemoryMiB": gpu_memory or 1000, "cpuMillis": cpu,
                     "memoryBytes": memory, "maxPods": 110}
        self.name, self.gpu_memory = name, gpu_memory
        self.whole, self.cpu, self.memory, self.pods = gpus, cpu, memory, 110
        self.groups: dict[str, int] = {}      # shared group -> MiB used

    #: how often a shared pod joins a group with room rather than opening one
    JOIN = 0.7

    def share(self, req: dict[str, Any]) -> tuple[int, int] | None:
        """What a shared pod of `req` takes of a device here, and what a device holds, in one
        unit (here MiB); None when it cannot go here."""
        return req.get("gpuMemoryMiB") or int(req["gpus"] * self.gpu_memory), self.gpu_memory

    def take(self, req: dict[str, Any], rng: random.Random) -> list[str] | None:
        """GPU groups for a pod of `req` if it fits here (taking its room), else None."""
        cpu, mem = req.get("cpuMillis", 0), req.get("memoryBytes", 0)
        if cpu > self.cpu or mem > self.memory or self.pods < 1:
            return None
        groups: list[str] = []
        if "gpuMemoryMiB" in req or 0 < req.get("gpus", 0) < 1:
            measured = self.share(req)
            if measured is None:
                return None
            amount, device = measured
            open_ = [g for g, used in self.groups.items() if used + amount <= device]
            if open_ and rng.random() < self.JOIN:
                groups = [rng.choice(open_)]
            elif self.whole >= 1:
                self.whole -= 1
                groups = [f"{self.name}-g{len(self.groups)}"]
                self.groups[groups[0]] = 0
            else:
                return None
            self.groups[groups[0]] += amount
        elif req.get("gpus", 0) >= 1:
            if req["gpus"] > self.whole:
                return None
            self.whole -= int(req["gpus"])
        self.cpu, self.memory, self.pods = self.cpu - cpu, self.memory - mem, self.pods - 1
        return groups


def _placed(r: random.Random, nodes: Sequence[_Node], req: dict[str, Any], size: int, packed: bool,
            state: Callable[[], str]) -> list[dict[str, Any]]:
    """Up to `size` pods of `req` placed on `nodes` in a random order (`packed`: each next one on
    the node the last one took first, if it fits), each with the state `state()` gives."""
    tasks: list[dict[str, Any]] = []
    last: _Node | None = None
    for _ in range(size):
        candidates = r.sample(nodes, len(nodes))
        if packed and last is not None:
            candidates = [last] + [n for n in candidates if n is not last]
        for node in candidates:
            groups = node.take(req, r)
            if groups is not None:
                tasks.append({"state": state(), "node": node.name, **({"gpuGroups": groups} if groups else {})})
                last = node
                break
    return tasks


def scenario(seed: int) -> dict[str, Any]:
    r = random.Random(seed)
    memory_per_device = r.choice((16000, 40000))
    nodes = [_Node(f"n{i}", r.choice((1, 2, 4, 8)), memory_per_device, r.choice((16000, 64000)), 256 * 2**30)
             for i in range(r.randint(2, 8))]
    cpu_nodes = [_Node(f"c{i}", 0, 0, 32000, 128 * 2**30) for i in range(r.choice((0, 0, 1, 2)))]
    gpus = sum(n.whole for n in nodes)
    names = [f"q{i}" for i in range(r.randint(2, 4))]
    departments = [f"d{i}" for i in range(r.choice((0, 1, 2)))]
    queues = []
    for i, name in enumerate(names):
        q: dict[str, Any] = {"name": name, "creationOrder": i,
                             "deserved": {"gpu": r.choice((0, 0.5, 1, 2, round(gpus / len(names), 1)))}}
        if departments:
            q["parent"] = r.choice(departments)
        queues.append(q)
    doc: dict[str, Any] = {"name": f"reclaim pressure seed {seed}", "actions": r.choice(
        (["reclaim"], ["allocate", "reclaim"], ["allocate", "consolidation", "reclaim", "preempt"])),
        "cycles": r.choice((1, 1, 2)), "queues": queues,
        "params": {"allowConsolidatingReclaim": r.random() < 0.7}}
    if departments:
        doc["departments"] = [{"name": d, "creationOrder": i} for i, d in enumerate(departments)]
    jobs = _running(r, names[1:] or names, nodes + cpu_nodes)
    reclaimer = names[0]
    for j in range(r.randint(1, 4)):
        size = r.choice((1, 1, 1, 2, 3))
        jobs.append({"name": f"want{j}", "queue": reclaimer, "priority": r.choice((50, 100)),
                     "createdMinutesAgo": r.choice((1, 2, 5)),
                     "perTask": _request(r, memory_per_device) if r.random() < 0.3 else _whole(r),
                     "minAvailable": size, "tasks": [{"state": "Pending"}] * size})
    doc["nodes"] = [n.spec for n in nodes + cpu_nodes]
    doc["jobs"] = jobs
    return doc


def _running(r: random.Random, queues: list[str], nodes: list[_Node]) -> list[dict[str, Any]]:
    jobs = []
    for j in range(r.randint(3, 14)):
        req = _request(r, nodes[0].gpu_memory)
        size = r.choice((1, 1, 1, 2, 3))
        tasks = []
        for _ in range(size):
            for node in r.sample(nodes, len(nodes)):
                groups = node.take(req, r)
                if groups is not None:
                    tasks.append({"state": "Running", "node": node.name, **({"gpuGroups": groups} if groups else {})})
                    break
        if not tasks:
            continue
        jobs.append({"name": f"run{j}", "queue": r.choice(queues), "priority": r.choice((50, 50, 100)),
                     "createdMinutesAgo": r.choice((10, 20, 30)), "perTask": req,
                     "minAvailable": r.randint(1, len(tasks)), "tasks": tasks})
    return jobs


def _whole(r: random.Random) -> dict[str, Any]:
    return {"cpuMillis": r.choice((500, 2000, 8000)), "memoryBytes": r.choice((2, 16, 64)) * 2**30,
            "gpus": r.choice((1, 1, 2))}


def _request(r: random.Random, memory_per_device: int) -> dict[str, Any]:
    req: dict[str, Any] = {"cpuMillis": r.choice((500, 2000, 8000)), "memoryBytes": r.choice((2, 16, 64)) * 2**30}
    kind = r.choice(("whole", "whole", "fraction", "fraction", "memory", "cpu"))
    if kind == "whole":
        req["gpus"] = r.choice((1, 1, 2))
    elif kind == "fraction":
        req["gpus"] = r.choice((0.25, 0.5, 0.5, 0.7))
    elif kind == "memory":
        req["gpuMemoryMiB"] = r.choice((memory_per_device // 4, memory_per_device // 2))
    return req



def whole_gpu_gangs(seed: int) -> dict[str, Any]:
    """Small nodes (one or two GPUs) filled with running one-GPU gangs of three queues in two
    departments, and pending gangs of two to four pods of a fourth queue beside one of them:
    the preemptor's placement is sure (its pods need as many nodes), and a victim gang of its
    own department placed back right after it can take that department over its share. These
    reach the refusals proven before the preemptor's placement and the next victim's."""
    r = random.Random(seed)
    nodes = [_Node(f"n{i}", r.choice((1, 1, 2)), 40000, 64000, 256 * 2**30) for i in range(r.randint(8, 16))]
    gpus = sum(n.whole for n in nodes)
    parents = {"q0": "d1", "q1": "d1", "q2": "d0", "q3": "d0"}
    queues = [{"name": name, "creationOrder": i, "parent": parent,
               "deserved": {"gpu": r.choice((0, 1, 2, round(gpus / 4, 1)))}}
              for i, (name, parent) in enumerate(parents.items())]
    departments = [{"name": d, "creationOrder": i,
                    **({"deserved": {"gpu": r.choice((gpus // 2, gpus // 3))}} if r.random() < 0.5 else {})}
                   for i, d in enumerate(("d0", "d1"))]
    one_gpu = {"cpuMillis": 500, "memoryBytes": 2 * 2**30, "gpus": 1}
    jobs: list[dict[str, Any]] = []
    for j in range(r.randint(4, 12)):
        size = r.choice((1, 1, 2, 3))
        tasks = []
        for _ in range(size):
            for node in r.sample(nodes, len(nodes)):
                if node.take(one_gpu, r) is not None:
                    tasks.append({"state": "Running", "node": node.name})
                    break
        if tasks:
            jobs.append({"name": f"run{j}", "queue": r.choice(("q1", "q2", "q3")), "priority": 50,
                         "createdMinutesAgo": r.choice((10, 20, 30)), "perTask": one_gpu,
                         "minAvailable": r.randint(1, len(tasks)), "tasks": tasks})
    for j in range(r.randint(1, 3)):
        size = r.choice((2, 3, 4))
        jobs.append({"name": f"want{j}", "queue": "q0", "priority": 50, "createdMinutesAgo": r.choice((1, 2, 5)),
                     "perTask": one_gpu, "minAvailable": size, "tasks": [{"state": "Pending"}] * size})
    return {"name": f"whole-GPU gangs seed {seed}", "actions": ["allocate", "reclaim"], "cycles": 1,
            "params": {"allowConsolidatingReclaim": True}, "departments": departments, "queues": queues,
            "nodes": [n.spec for n in nodes], "jobs": jobs}


def three_level_gangs(seed: int) -> dict[str, Any]:
    """Small clusters of bench/large.py's shape: a three-level queue tree (departments, then
    sub-departments, then leaf queues) with deserved GPUs split as in large and varied per seed
    (some queues with none, some limited, some of another priority or over-quota weight); 4 to
    12 nodes of 1, 2, 4 or 8 GPUs mostly full of the running jobs of several leaves in several
    departments: training gangs at their minimum and elastic ones above it, one-pod jobs,
    inference pods sharing GPUs (fractions or GPU memory, some not preemptible), CPU-only service
    pods; and pending gangs of 1 to 8 pods (whole GPUs mostly) in one or two leaves that also
    run jobs of a lower priority. All five actions, so allocation, consolidation, reclaim,
    preempt and stale-gang eviction all have work."""
    r = random.Random(seed)
    device = r.choice((40000, 81000))
    nodes = [_Node(f"n{i}", r.choice((1, 2, 4, 8, 8)), device, r.choice((64000, 128000)), 512 * 2**30)
             for i in range(r.randint(4, 12))]
    gpus = sum(n.whole for n in nodes)
    # the queue tree: 2-3 departments, 1-2 sub-departments each, 1-3 leaves each
    depts = [f"d{i}" for i in range(r.randint(2, 3))]
    subs = [(f"s{len(depts) * j + i}", d) for i, d in enumerate(depts) for j in range(r.randint(1, 2))]
    leaves = [(f"q{len(subs) * k + i}", s) for i, (s, _) in enumerate(subs) for k in range(r.randint(1, 3))]
    order = iter(range(1000))

    def queue(name: str, parent: str | None, share: float) -> dict[str, Any]:
        q: dict[str, Any] = {"name": name, "creationOrder": next(order),
                             "deserved": {"gpu": r.choice((share, share, share, 0, round(share / 2, 1),
                                                           round(share * 1.5, 1)))}}
        if parent is not None:
            q["parent"] = parent
        if r.random() < 0.15:
            q["limit"] = {"gpu": max(q["deserved"]["gpu"], r.choice((1, 2, round(share, 1))))}
        if r.random() < 0.15:
            q["priority"] = r.choice((50, 200))
        if r.random() < 0.15:
            q["overQuotaWeight"] = {"gpu": r.choice((0, 2, 3))}
        return q

    departments = [queue(d, None, round(gpus / len(depts), 1)) for d in depts]
    subqueues = [queue(s, d, round(gpus / len(subs), 1)) for s, d in subs]
    leafqueues = [queue(q, s, round(gpus / len(leaves), 1)) for q, s in leaves]
    names = [q for q, _ in leaves]
    wanting = r.sample(names, r.choice((1, 1, 2)))
    for q in leafqueues:
        if q["name"] in wanting and r.random() < 0.7:
            # mostly a leaf with fair share left to take
            q["deserved"]["gpu"] = max(q["deserved"]["gpu"], round(gpus / len(leaves), 1))
    running = [q for q in names if q not in wanting] or names
    # running jobs until the GPUs are (nearly) all taken
    train = {"cpuMillis": r.choice((2000, 8000)), "memoryBytes": 32 * 2**30, "gpus": 1}
    jobs: list[dict[str, Any]] = []
    fill = r.choice((0.8, 0.9, 1.0, 1.0))
    tries = 0
    while sum(n.whole for n in nodes) > gpus * (1 - fill) and tries < 60:
        tries += 1
        kind = r.choice(("gang", "gang", "elastic", "elastic", "single", "single", "infer", "infer", "cpu"))
        queue_name = r.choice(wanting if r.random() < 0.25 else running)
        if kind in ("gang", "elastic"):
            size = r.randint(2, 6)
            req = dict(train, gpus=r.choice((1, 1, 1, 2)))
            priority = r.choice((50, 50, 75))
        elif kind == "single":
            size, req, priority = 1, _whole(r), r.choice((50, 75, 100))
        elif kind == "infer":
            size = r.choice((1, 1, 2))
            req = {"cpuMillis": 2000, "memoryBytes": 8 * 2**30}
            if r.random() < 0.6:
                req["gpus"] = r.choice((0.25, 0.5))
            else:
                req["gpuMemoryMiB"] = r.choice((device // 4, device // 2))
            priority = r.choice((125, 75))
        else:
            size, req, priority = r.randint(1, 4), {"cpuMillis": 1000, "memoryBytes": 2 * 2**30}, 100
        packed = r.random() < 0.6
        tasks = _placed(r, nodes, req, size, packed, lambda: "Running")
        if not tasks:
            continue
        minimum = len(tasks) if kind != "elastic" or len(tasks) == 1 else r.randint(1, len(tasks) - 1)
        job: dict[str, Any] = {"name": f"{kind}{len(jobs)}", "queue": queue_name, "priority": priority,
                               "createdMinutesAgo": r.choice((10, 20, 30, 60)), "perTask": req,
                               "minAvailable": minimum, "tasks": tasks}
        if kind == "gang" and r.random() < 0.15:
            # a gang some of whose pods lost their place: below its minimum, stale for a while
            missing = max(1, size - len(tasks)) if len(tasks) < size else r.randint(1, 2)
            job["minAvailable"] = len(tasks) + missing
            job["tasks"] = tasks + [{"state": "Pending"}] * missing
            job["staleSeconds"] = r.choice((10, 600))
        jobs.append(job)
    # pending gangs of the wanting leaves
    for j in range(r.randint(1, 4)):
        size = r.randint(1, 8)
        req = dict(train, gpus=r.choice((1, 1, 1, 2, 2, 4))) if r.random() < 0.85 else _request(r, device)
        minimum = size if r.random() < 0.8 else r.randint(1, size)
        jobs.append({"name": f"want{j}", "queue": r.choice(wanting), "priority": r.choice((50, 75, 100, 100)),
                     "createdMinutesAgo": r.choice((1, 2, 5)), "perTask": req, "minAvailable": minimum,
                     "tasks": [{"state": "Pending"}] * size})
    return {"name": f"three-level gangs seed {seed}",
            "actions": ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"],
            "cycles": r.choice((1, 1, 2)), "staleGracePeriodSeconds": r.choice((0, 60, 300)),
            "params": {"allowConsolidatingReclaim": r.random() < 0.7},
            "departments": departments, "queues": subqueues + leafqueues,
            "nodes": [n.spec for n in nodes], "jobs": jobs}


def busy_three_levels(seed: int) -> dict[str, Any]:
    """`three_level_gangs(seed)` made busier: two to four cycles; pending jobs in any leaf (whole
    GPUs, GPU fractions and GPU memory that consolidation has to make room for, elastic gangs
    above their minimum, priorities from train to inference, so that preempt finds victims in
    the preemptor's own queue); some running pods already releasing, and now and then a node
    cordoned."""
    doc = three_level_gangs(seed)
    r = random.Random(seed * 7919 + 1)
    doc["name"] = f"busy three levels seed {seed}"
    doc["cycles"] = r.choice((2, 3, 4))
    leaves = [q["name"] for q in doc["queues"] if q["parent"] not in {d["name"] for d in doc["departments"]}]
    device = doc["nodes"][0]["gpuMemoryMiB"]
    for job in doc["jobs"]:
        for task in job["tasks"]:
            if task["state"] == "Running" and r.random() < 0.05:
                task["state"] = "Releasing"
    if r.random() < 0.2:
        r.choice(doc["nodes"])["unschedulable"] = True
    for j in range(r.randint(2, 6)):
        kind = r.choice(("whole", "fraction", "memory", "elastic"))
        if kind == "whole":
            size, req = 1, {"cpuMillis": 4000, "memoryBytes": 16 * 2**30, "gpus": r.choice((1, 2))}
        elif kind == "fraction":
            size, req = r.choice((1, 1, 2)), {"cpuMillis": 2000, "memoryBytes": 8 * 2**30,
                                              "gpus": r.choice((0.25, 0.5, 0.75))}
        elif kind == "memory":
            size, req = 1, {"cpuMillis": 2000, "memoryBytes": 8 * 2**30, "gpuMemoryMiB": device // r.choice((2, 4))}
        else:
            size, req = r.randint(2, 6), {"cpuMillis": 8000, "memoryBytes": 32 * 2**30, "gpus": 1}
        minimum = r.randint(1, size - 1) if kind == "elastic" else size
        doc["jobs"].append({"name": f"busy{j}", "queue": r.choice(leaves), "priority": r.choice((50, 75, 100, 125)),
                            "createdMinutesAgo": r.choice((1, 3, 15)), "perTask": req, "minAvailable": minimum,
                            "tasks": [{"state": "Pending"}] * size})
    return doc


def constrained_three_levels(seed: int) -> dict[str, Any]:
    """`busy_three_levels(seed)` with constraints the shortcuts must respect: nodes of two types
    in two racks (a topology), pending jobs with required node affinity, pod affinity or
    anti-affinity to labelled running pods, a pending gang of two subgroups, a job being deleted,
    and the scheduler's parameters varied (consolidation's victim cap, scheduling signatures,
    full-hierarchy fairness)."""
    doc = busy_three_levels(seed)
    r = random.Random(seed * 104729 + 7)
    doc["name"] = f"constrained three levels seed {seed}"
    for i, node in enumerate(doc["nodes"]):
        node["labels"] = {"kai.scheduler/type": r.choice(("a", "b")), "rack": f"r{i % 2}"}
    doc["topologies"] = [{"name": "racks", "levels": ["rack"]}]
    running = [j for j in doc["jobs"] if any(t["state"] == "Running" for t in j["tasks"])]
    labelled = r.sample(running, min(len(running), 3))
    for j in labelled:
        for t in j["tasks"]:
            t["labels"] = {"app": j["name"]}
    pending = [j for j in doc["jobs"] if all(t["state"] == "Pending" for t in j["tasks"])]
    for j in pending:
        roll = r.random()
        if roll < 0.2:
            j["tasks"] = [dict(t, nodeAffinity=[r.choice(("a", "b"))]) for t in j["tasks"]]
        elif roll < 0.35 and labelled:
            target = r.choice(labelled)["name"]
            key = "antiTopologyKey" if r.random() < 0.5 else "topologyKey"
            j["tasks"] = [dict(t, podAffinity={"labels": {"app": target}, key: "rack"}) for t in j["tasks"]]
    if r.random() < 0.3 and running:
        r.choice(running)["deleted"] = True
    if r.random() < 0.5:
        leaves = sorted({j["queue"] for j in doc["jobs"]})
        doc["jobs"].append({
            "name": "split", "queue": r.choice(leaves), "priority": r.choice((50, 100)), "createdMinutesAgo": 2,
            "perTask": {"cpuMillis": 4000, "memoryBytes": 16 * 2**30, "gpus": 1},
            "subGroups": [{"name": "workers", "minAvailable": 2}, {"name": "chief", "minAvailable": 1}],
            "tasks": [{"state": "Pending", "subGroup": "workers"}] * r.randint(2, 3)
            + [{"state": "Pending", "subGroup": "chief"}]})
    doc["params"] = dict(doc["params"], maxConsolidationPreemptees=r.choice((0, 2, 4, 16)),
                         useSchedulingSignatures=r.random() < 0.7, fullHierarchyFairness=r.random() < 0.8)
    return doc


def protected_three_levels(seed: int) -> dict[str, Any]:
    """`busy_three_levels(seed)` under the minruntime plugin: default reclaim and preempt
    min-runtimes and jobs started from one minute to an hour ago, so that victim filters turn
    recently started victims away and the elastic-keeps-minimum validators run after the
    proportion validator."""
    doc = busy_three_levels(seed)
    r = random.Random(seed * 15485863 + 3)
    doc["name"] = f"protected three levels seed {seed}"
    arguments = {"defaultReclaimMinRuntime": r.choice(("0s", "5m", "20m")),
                 "defaultPreemptMinRuntime": r.choice(("0s", "3m", "20m")),
                 "reclaimResolveMethod": r.choice(("lca", "queue"))}
    doc["config"] = {"tiers": [{"plugins": [{"name": name, "arguments": dict(arguments) if name == "minruntime"
                                             else dict(args)} for name, args in DEFAULT_PLUGINS]}]}
    for job in doc["jobs"]:
        if any(t["state"] == "Running" for t in job["tasks"]) and r.random() < 0.8:
            job["lastStartMinutesAgo"] = r.choice((1, 4, 10, 30, 60))
    return doc


def topology_three_levels(seed: int) -> dict[str, Any]:
    """`busy_three_levels(seed)` on nodes in zones and racks: pending gangs that must (or would
    rather) land in one rack or one zone, queue limits that bind (a limit at what a queue holds),
    and multi-device fractions."""
    doc = busy_three_levels(seed)
    r = random.Random(seed * 32452843 + 11)
    doc["name"] = f"topology three levels seed {seed}"
    for i, node in enumerate(doc["nodes"]):
        node["labels"] = {"zone": f"z{i % 2}", "rack": f"z{i % 2}-r{(i // 2) % 2}"}
    doc["topologies"] = [{"name": "dc", "levels": ["zone", "rack"]}]
    for job in doc["jobs"]:
        if all(t["state"] == "Pending" for t in job["tasks"]) and len(job["tasks"]) > 1 and r.random() < 0.6:
            level = r.choice(("zone", "rack"))
            job["topologyConstraint"] = ({"topology": "dc", "requiredLevel": level} if r.random() < 0.5
                                         else {"topology": "dc", "preferredLevel": level})
    for q in doc["queues"]:
        if r.random() < 0.15:
            q["limit"] = {"gpu": max(q["deserved"]["gpu"], 1)}
    if r.random() < 0.4:
        leaves = sorted({j["queue"] for j in doc["jobs"]})
        doc["jobs"].append({"name": "multi", "queue": r.choice(leaves), "priority": r.choice((75, 125)),
                            "createdMinutesAgo": 2, "minAvailable": 1,
                            "perTask": {"cpuMillis": 2000, "memoryBytes": 8 * 2**30, "gpus": 0.5, "gpuDevices": 2},
                            "tasks": [{"state": "Pending"}]})
    return doc


def openb_sample(seed: int) -> dict[str, Any]:
    """A small cut of the openb trace as `bench/openb.py` maps the whole of it: 6 to 30 of its GPU
    nodes (now and then a CPU-only one too) and its pods drawn at random until their GPU demand is
    1.2 to 2.5 times the nodes' GPUs, all pending one-pod jobs in the four QoS queues, created in
    the trace's order; all five actions over one or two cycles. Reclaim then walks the victims of
    one-pod jobs, whole GPUs and fractions mixed on a node, as it does over the whole trace."""
    from bench import openb  # the trace's mapping, kept in one place

    r = random.Random(seed)
    nodes, pods = _openb_rows()
    gpu_nodes = [n for n in nodes if int(n["gpu"])]
    picked = r.sample(gpu_nodes, r.randint(6, 30))
    picked += r.sample([n for n in nodes if not int(n["gpu"])], r.choice((0, 0, 0, 1)))
    wanted = sum(int(n["gpu"]) for n in picked) * r.uniform(1.2, 2.5)
    chosen: list[dict[str, str]] = []
    demand = 0.0
    while demand < wanted:
        pod = pods[r.randrange(len(pods))]
        if pod not in chosen:
            chosen.append(pod)
            demand += openb.gpu_demand(openb.pod_request(pod)) or 0.05
    chosen.sort(key=lambda p: (int(p["creation_time"]), p["name"]))
    doc = openb.scenario_doc(picked, chosen, list(openb.ALL_ACTIONS))
    doc["name"] = f"openb sample seed {seed}"
    doc["cycles"] = r.choice((1, 1, 2))
    del doc["expect"]
    return doc


_OPENB: tuple[list[dict[str, str]], list[dict[str, str]]] | None = None


def _openb_rows() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    global _OPENB
    if _OPENB is None:
        from bench import openb
        _OPENB = openb.read_csv("openb_node_list_all_node.csv"), openb.read_csv("openb_pod_list_default.csv")
    return _OPENB


_HOST = "kubernetes.io/hostname"


def _holders(doc: dict[str, Any]) -> dict[str, int]:
    """How many pods hold each node (the states that take a pod slot)."""
    held = {n["name"]: 0 for n in doc["nodes"]}
    for job in doc["jobs"]:
        for task in job["tasks"]:
            if task.get("node") and task["state"] in ("Running", "Releasing", "Pipelined", "Binding", "Bound",
                                                      "Allocated"):
                held[task["node"]] += 1
    return held


def namespaced_affinity(seed: int) -> dict[str, Any]:
    """`busy_three_levels(seed)` with its jobs in two or three namespaces and pod affinity on both
    sides: nodes labelled with hostname, rack and zone (now and then one without rack and zone);
    running pods labelled from a small vocabulary (app, and sometimes tier), some of them carrying
    required affinity or anti-affinity themselves (placed pods that repel incoming pods of their
    namespace, and victims or consolidation's moved pods whose own terms hold when placed back);
    pending jobs whose required affinity, anti-affinity or both (one selector, keys of hostname,
    rack or zone) match running pods of their own namespace and of others, gangs that attract or
    spread themselves, and pending pods that only carry labels a placed pod's anti-affinity
    selects. Terms name no namespaces, so each selects pods of its own pod's namespace only."""
    doc = busy_three_levels(seed)
    r = random.Random(seed * 49979687 + 13)
    doc["name"] = f"namespaced affinity seed {seed}"
    zones = r.choice((1, 2, 2, 3))
    for i, node in enumerate(doc["nodes"]):
        zone = f"z{i % zones}"
        node["labels"] = {_HOST: node["name"], "zone": zone, "rack": f"{zone}-r{(i // zones) % 2}"}
    if r.random() < 0.2:
        node = r.choice(doc["nodes"])
        node["labels"] = {_HOST: node["name"]}
    namespaces = ["default", "team-a", "team-b"][:r.choice((2, 3))]
    home = {q["name"]: r.choice(namespaces) for q in doc["queues"]}
    for job in doc["jobs"]:
        ns = home[job["queue"]] if r.random() < 0.6 else r.choice(namespaces)
        if ns != "default" or r.random() < 0.5:
            job["namespace"] = ns
    apps, tiers = ("web", "db", "cache"), ("front", "back")
    keys = (_HOST, _HOST, "rack", "rack", "zone")

    def labels() -> dict[str, str]:
        out = {"app": r.choice(apps)}
        if r.random() < 0.3:
            out["tier"] = r.choice(tiers)
        return out

    def selector(own: dict[str, str]) -> dict[str, str]:
        roll = r.random()
        if roll < 0.25:
            return dict(own)                                  # its own gang's pods (or itself)
        out = {"app": r.choice(apps)}
        if roll > 0.85:
            out["tier"] = r.choice(tiers)
        return out

    def terms(own: dict[str, str], anti_bias: float) -> dict[str, Any]:
        aff: dict[str, Any] = {"labels": selector(own)}
        roll = r.random()
        if roll < anti_bias:
            aff["antiTopologyKey"] = r.choice(keys)
        elif roll < 0.8:
            aff["topologyKey"] = r.choice(keys)
        else:
            # attract in a wide domain, spread in a narrow one (the same selector)
            aff["topologyKey"] = r.choice(("rack", "zone"))
            aff["antiTopologyKey"] = _HOST
        return aff

    for job in doc["jobs"]:
        placed = any(t["state"] != "Pending" for t in job["tasks"])
        if placed and r.random() < 0.7:
            same = labels()
            tasks = []
            for t in job["tasks"]:
                t = dict(t, labels=same if r.random() < 0.8 else labels())
                if r.random() < 0.15:
                    t["podAffinity"] = terms(t["labels"], 0.6)
                tasks.append(t)
            job["tasks"] = tasks
        elif not placed:
            roll = r.random()
            own = {"app": f"{job['name']}"} if r.random() < 0.3 else labels()
            if roll < 0.6:
                aff = terms(own, 0.45)
                job["tasks"] = [dict(t, labels=dict(own), podAffinity=aff) for t in job["tasks"]]
            elif roll < 0.85:
                job["tasks"] = [dict(t, labels=dict(own)) for t in job["tasks"]]
    if r.random() < 0.3:
        doc["topologies"] = [{"name": "dc", "levels": ["zone", "rack"]}]
        for job in doc["jobs"]:
            if all(t["state"] == "Pending" for t in job["tasks"]) and len(job["tasks"]) > 1 and r.random() < 0.5:
                level = r.choice(("zone", "rack"))
                job["topologyConstraint"] = {"topology": "dc",
                                             ("requiredLevel" if r.random() < 0.5 else "preferredLevel"): level}
    return doc


def slots_in_domains(seed: int) -> dict[str, Any]:
    """`topology_three_levels(seed)` with few pod slots: each node's maxPods is 0, 1, 2, 3 or 5
    (or what its running pods hold, and up to two more, when they hold more; now and then a third of
    the running GPU jobs gone), so that nodes inside a rack or zone
    have GPUs free but no free slot; running CPU-only pods (preemptible or not, of any leaf) that
    take slots, so that victims free slots rather than GPUs; pending CPU-only jobs that take slots
    before the gangs; and pending gangs of whole GPUs or fractions (a new shared GPU takes two
    slots) that must or would rather land in one zone, rack or (with a hostname level) node."""
    doc = topology_three_levels(seed)
    r = random.Random(seed * 67867967 + 17)
    doc["name"] = f"slots in domains seed {seed}"
    leaves = sorted({j["queue"] for j in doc["jobs"]})
    hostname_level = r.random() < 0.3
    if hostname_level:
        doc["topologies"] = [{"name": "dc", "levels": ["zone", "rack", _HOST]}]
        for node in doc["nodes"]:
            node["labels"][_HOST] = node["name"]
    if r.random() < 0.5:
        # leave GPUs free: a third of the running GPU jobs gone
        gpu_jobs = [j for j in doc["jobs"] if any(t["state"] != "Pending" for t in j["tasks"])
                    and (j["perTask"].get("gpus") or j["perTask"].get("gpuMemoryMiB"))]
        gone = {j["name"] for j in r.sample(gpu_jobs, len(gpu_jobs) // 3)}
        doc["jobs"] = [j for j in doc["jobs"] if j["name"] not in gone]
    held = _holders(doc)
    small = {"cpuMillis": 100, "memoryBytes": 2**28}
    fillers: dict[str, list[str]] = {}
    for node in doc["nodes"]:
        cap = r.choice((0, 1, 2, 3, 5))
        if held[node["name"]] > cap:
            node["maxPods"] = held[node["name"]] + r.choice((0, 0, 1, 2))
        else:
            node["maxPods"] = cap
        room = node["maxPods"] - held[node["name"]]
        for _ in range(room):
            if r.random() < 0.4:
                fillers.setdefault(node["name"], []).append(node["name"])
    placed = [n for names in fillers.values() for n in names]
    r.shuffle(placed)
    j = 0
    while placed:
        size = min(len(placed), r.choice((1, 1, 2, 3)))
        tasks = [{"state": "Running", "node": n} for n in placed[:size]]
        placed = placed[size:]
        doc["jobs"].append({"name": f"slot{j}", "queue": r.choice(leaves), "priority": r.choice((50, 75, 100, 125)),
                            "createdMinutesAgo": r.choice((10, 30)), "perTask": dict(small),
                            "minAvailable": r.randint(1, size), "tasks": tasks})
        j += 1
    for j in range(r.choice((0, 1, 2, 3))):
        size = r.randint(1, 4)
        doc["jobs"].append({"name": f"eat{j}", "queue": r.choice(leaves), "priority": r.choice((75, 100, 125)),
                            "createdMinutesAgo": r.choice((1, 2, 5)), "perTask": dict(small),
                            "minAvailable": r.randint(1, size), "tasks": [{"state": "Pending"}] * size})
    device = doc["nodes"][0]["gpuMemoryMiB"]
    for j in range(r.randint(1, 3)):
        size = r.randint(2, 4)
        req: dict[str, Any] = {"cpuMillis": 2000, "memoryBytes": 8 * 2**30}
        kind = r.choice(("whole", "whole", "fraction", "memory"))
        if kind == "whole":
            req["gpus"] = r.choice((1, 1, 2))
        elif kind == "fraction":
            req["gpus"] = r.choice((0.25, 0.5))
        else:
            req["gpuMemoryMiB"] = device // 2
        level = r.choice(("zone", "rack", _HOST) if hostname_level else ("zone", "rack"))
        doc["jobs"].append({"name": f"dom{j}", "queue": r.choice(leaves), "priority": r.choice((50, 75, 100, 125)),
                            "createdMinutesAgo": r.choice((1, 2, 5)), "perTask": req,
                            "minAvailable": size if r.random() < 0.8 else r.randint(1, size),
                            "topologyConstraint": {"topology": "dc",
                                                   ("requiredLevel" if r.random() < 0.6 else "preferredLevel"): level},
                            "tasks": [{"state": "Pending"}] * size})
    return doc


_ODD = (0.07, 0.14, 0.28, 0.55, 0.56, 0.29, 0.71, 0.72, 0.44, 0.45)
#: what the running and the pending pods of `odd_fractions` ask, drawn alike
_ODD_KINDS = ("fraction", "fraction", "fraction", "memory", "memory", "whole", "cpu")


class _OddNode(_Node):
    """A node whose shared GPU groups are filled in hundredths of a device, as the reference counts
    them: a fraction its hundredths, GPU memory its quotient rounded up to hundredths."""

    JOIN = 0.8

    def share(self, req: dict[str, Any]) -> tuple[int, int] | None:
        if req.get("gpuMemoryMiB", 0) > self.gpu_memory or not self.gpu_memory:
            return None
        if req.get("gpuMemoryMiB"):
            return math.ceil(req["gpuMemoryMiB"] / self.gpu_memory * 100), 100
        return round(req["gpus"] * 100), 100


def _odd_request(r: random.Random, devices: list[int], kinds: tuple[str, ...]) -> dict[str, Any]:
    req: dict[str, Any] = {"cpuMillis": r.choice((250, 500, 1000, 2000, 4000)),
                           "memoryBytes": r.choice((1, 2, 4, 8, 16)) * 2**30}
    kind = r.choice(kinds)
    if kind == "fraction":
        req["gpus"] = r.choice(_ODD) if r.random() < 0.5 else r.randint(1, 99) / 100
    elif kind == "memory":
        device = r.choice(devices)
        roll = r.random()
        if roll < 0.4:
            # an odd fraction of a device turned into MiB (the portion comes back a hundredth higher)
            req["gpuMemoryMiB"] = max(1, int(r.choice(_ODD) * device))
        elif roll < 0.9:
            req["gpuMemoryMiB"] = max(1, int(device * r.randint(1, 99) / 100) + r.randint(-50, 50)) | 1
        else:
            req["gpuMemoryMiB"] = r.randint(1, max(devices) - 1)
    elif kind == "whole":
        req["gpus"] = r.choice((1, 1, 2))
    return req


def odd_fractions(seed: int) -> dict[str, Any]:
    """GPU nodes of one device size each (16,000 to 80,000 MiB, varying across nodes) shared by
    running pods that ask odd fractions (any hundredth, mostly 0.07, 0.14, 0.28, 0.29, 0.44, 0.45,
    0.55, 0.56, 0.71, 0.72) or odd GPU memory (any MiB, or such a fraction of a device in MiB),
    groups filled to the hundredth as the reference counts them; some whole-GPU and CPU-only pods;
    gangs of 1 to 4 in several queues (some in departments); and pending jobs of the same kinds,
    most in one or two queues under their fair share, over one to three cycles of allocation,
    consolidation, reclaim and preempt. Rounding a portion to memory and back, and sums of
    hundredths at a full device, decide here where placements fit."""
    r = random.Random(seed)
    sizes = (16000, 24000, 32000, 40000, 80000)
    nodes = [_OddNode(f"n{i}", r.choice((1, 2, 2, 4, 8)), r.choice(sizes), r.choice((32000, 64000, 128000)),
                      512 * 2**30) for i in range(r.randint(3, 9))]
    cpu_nodes = [_OddNode(f"c{i}", 0, 0, 32000, 128 * 2**30) for i in range(r.choice((0, 0, 0, 1)))]
    devices = sorted({n.gpu_memory for n in nodes})
    gpus = sum(n.whole for n in nodes)
    names = [f"q{i}" for i in range(r.randint(3, 5))]
    departments = [f"d{i}" for i in range(r.choice((0, 1, 2)))]
    wanting = r.sample(names, r.choice((1, 1, 2)))
    queues = []
    for i, name in enumerate(names):
        share = round(gpus / len(names), 1)
        deserved = r.choice((0, 0.5, 1, share, share))
        if name in wanting and r.random() < 0.8:
            deserved = max(deserved, share, 1)
        q: dict[str, Any] = {"name": name, "creationOrder": i, "deserved": {"gpu": deserved}}
        if departments:
            q["parent"] = r.choice(departments)
        queues.append(q)
    doc: dict[str, Any] = {
        "name": f"odd fractions seed {seed}",
        "actions": r.choice((["allocate", "reclaim"], ["allocate", "consolidation", "reclaim", "preempt"],
                             ["allocate", "consolidation", "reclaim", "preempt"], ["reclaim"])),
        "cycles": r.choice((1, 1, 2, 3)), "queues": queues,
        "params": {"allowConsolidatingReclaim": r.random() < 0.7, "maxConsolidationPreemptees": 0}}
    if departments:
        doc["departments"] = [{"name": d, "creationOrder": i} for i, d in enumerate(departments)]
    running = [q for q in names if q not in wanting]
    all_nodes = nodes + cpu_nodes
    jobs: list[dict[str, Any]] = []
    fill = r.choice((0.7, 0.85, 1.0, 1.0))
    j = 0
    while sum(n.whole for n in nodes) > gpus * (1 - fill) and j < 40:
        j += 1
        req = _odd_request(r, devices, _ODD_KINDS)
        size = r.choice((1, 1, 1, 2, 3, 4))
        packed = r.random() < 0.5
        tasks = _placed(r, all_nodes, req, size, packed, lambda: "Releasing" if r.random() < 0.04 else "Running")
        if not tasks:
            continue
        queue = r.choice(wanting if r.random() < 0.15 or not running else running)
        jobs.append({"name": f"run{j}", "queue": queue, "priority": r.choice((50, 50, 75, 100, 125)),
                     "createdMinutesAgo": r.choice((10, 20, 30, 60)), "perTask": req,
                     "minAvailable": r.randint(1, len(tasks)), "tasks": tasks})
    for j in range(r.randint(2, 6)):
        req = _odd_request(r, devices, _ODD_KINDS)
        size = r.choice((1, 1, 2, 3, 4))
        queue = r.choice(wanting) if r.random() < 0.75 else r.choice(names)
        jobs.append({"name": f"want{j}", "queue": queue, "priority": r.choice((50, 75, 100, 100, 125)),
                     "createdMinutesAgo": r.choice((1, 2, 5)), "perTask": req,
                     "minAvailable": size if r.random() < 0.8 else r.randint(1, size),
                     "tasks": [{"state": "Pending"}] * size})
    doc["nodes"] = [n.spec for n in all_nodes]
    doc["jobs"] = jobs
    return doc
