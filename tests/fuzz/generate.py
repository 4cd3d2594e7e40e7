"""Seeded random scenarios that pass the scenario schema, and the runner for long fuzz runs.

`scenario(seed)` builds one document: nodes of every GPU kind, a queue tree, jobs whose tasks
are in every state, and a configuration. Tasks that hold a node are put where a capacity model
says they fit, so the starting cluster is one a real scheduler could have produced; one seed
in ten is "chaotic" and places them anywhere. Run `python -m tests.fuzz.generate --seeds 0-5000`
for a long run; it prints one line per failure class and can save and minimise repros.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
STATES = ("Pending", "Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated", "Succeeded",
          "Failed", "Gated")
HELD = ("Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated")
MIG_PROFILES = ("nvidia.com/mig-1g.5gb", "nvidia.com/mig-2g.10gb", "nvidia.com/mig-3g.20gb",
                "nvidia.com/mig-1g.10gb")
TOPOLOGY_KEYS = ("topology.kubernetes.io/zone", "k8s.io/rack", "kubernetes.io/hostname")
DEFAULT_PLUGINS = ("predicates", "proportion", "priority", "elastic", "kubeflow", "ray", "nodeavailability",
                   "gpusharingorder", "gpupack", "resourcetype", "subgrouporder", "taskorder", "nominatednode",
                   "dynamicresources", "nodeplacement", "minruntime", "topology", "snapshot")

#: How many documents the generator threw away because the schema refused them (kept honest).
STATS: Counter[str] = Counter()


# ---- the capacity model used to place node-holding tasks ----------------------------------------
@dataclass
class _Room:
    name: str
    kind: str                 # gpu, cpu, single, mixed
    gpus: int                 # idle whole devices
    gpu_memory: int
    synced: bool
    cpu: int
    memory: int
    pods: int
    mig: dict[str, int] = field(default_factory=dict)
    groups: dict[str, int] = field(default_factory=dict)    # shared group -> MiB used
    releasing: list[int] = field(default_factory=lambda: [0, 0, 0])   # whole GPUs, cpu, memory freed

    def place(self, req: dict[str, Any], pipelined: bool, rng: random.Random) -> list[str] | None:
        """GPU groups for the task if it fits (and take its room), else None."""
        cpu, mem = int(req.get("cpuMillis", 0)), int(req.get("memoryBytes", 0))
        kind, count, share = _kind(req)
        if pipelined:
            # a pipelined pod waits for what releasing pods free: whole GPUs and CPU only
            gpus_, cpu_, mem_ = self.releasing
            if kind not in ("cpu", "whole") or count > gpus_ or cpu > cpu_ or mem > mem_:
                return None
            self.releasing = [gpus_ - count, cpu_ - cpu, mem_ - mem]
            return []
        if cpu > self.cpu or mem > self.memory or self.pods < 1:
            return None
        groups: list[str] = []
        if kind == "whole":
            if self.kind not in ("gpu", "single") or count > self.gpus:
                return None
            self.gpus -= count
        elif kind == "mig":
            if any(self.mig.get(k, 0) < v for k, v in req["mig"].items() if v):
                return None
            for k, v in req["mig"].items():
                self.mig[k] = self.mig.get(k, 0) - v
        elif kind == "shared":
            taken = self._share(share, count, rng)
            if taken is None:
                return None
            groups = taken
        self.cpu -= cpu
        self.memory -= mem
        self.pods -= 1
        return groups

    def _share(self, share: float, count: int, rng: random.Random) -> list[str] | None:
        if self.kind not in ("gpu", "single") or (isinstance(share, int) and not self.synced):
            return None
        mib = share if isinstance(share, int) else int(share * self.gpu_memory)
        if mib > self.gpu_memory:
            return None
        chosen: list[str] = []
        for g, used in self.groups.items():
            if len(chosen) < count and used + mib <= self.gpu_memory and rng.random() < 0.7:
                chosen.append(g)
        new = count - len(chosen)
        if new > self.gpus:
            return None
        self.gpus -= new
        for _ in range(new):
            chosen.append(f"{self.name}-g{len(self.groups)}")
            self.groups[chosen[-1]] = 0
        for g in chosen:
            self.groups[g] += mib
        return chosen


def _kind(req: dict[str, Any]) -> tuple[str, int, float | int]:
    """What the engine makes of a request (mirrors Request.build): kind, devices, share per device."""
    devices = req.get("gpuDevices")
    if any(v for v in (req.get("mig") or {}).values()):
        return "mig", 0, 0
    if req.get("gpuMemoryMiB", 0) > 0:
        return "shared", devices or 1, int(req["gpuMemoryMiB"])
    gpus = req.get("gpus", 0)
    if gpus >= 1 and devices is None:
        return "whole", int(gpus), 1.0
    if gpus > 0:
        return "shared", devices or 1, float(gpus)
    return "cpu", 0, 0


# ---- the generator ------------------------------------------------------------------------------
class _Generator:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)
        self.seed = seed
        self.chaos = self.r.random() < 0.1
        self.rooms: dict[str, _Room] = {}

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, options: Any) -> Any:
        return self.r.choice(list(options))

    def document(self) -> dict[str, Any]:
        r = self.r
        doc: dict[str, Any] = {"name": f"fuzz seed {self.seed}" + (" (chaos)" if self.chaos else "")}
        chosen = [a for a in ACTIONS if r.random() < 0.6] or [self.pick(ACTIONS)]
        doc["actions"] = chosen
        doc["cycles"] = r.choice((1, 1, 2, 3))
        if self.chance(0.3):
            doc["staleGracePeriodSeconds"] = self.pick((0, 0, 30, 120, -1))
        if self.chance(0.7):
            doc["params"] = self.params()
        if self.chance(0.3):
            doc["config"] = self.config()
        topologies = self.topologies()
        if topologies:
            doc["topologies"] = topologies
        self.queues(doc)
        doc["nodes"] = [self.node(i, topologies) for i in range(r.randint(1, 6))]
        doc["jobs"] = self.jobs(doc, topologies)
        return doc

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {}
        if self.chance(0.5):
            p["maxConsolidationPreemptees"] = self.pick((0, 0, 1, 2, 16))
        for key in ("allowConsolidatingReclaim", "useSchedulingSignatures", "fullHierarchyFairness",
                    "detailedFitErrors"):
            if self.chance(0.5):
                p[key] = self.chance(0.5)
        return p

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.chance(0.8):
            plugins: list[dict[str, Any]] = []
            spread = self.chance(0.5)
            for name in DEFAULT_PLUGINS:
                if name == "predicates" and self.chance(0.3):
                    continue
                entry: dict[str, Any] = {"name": name}
                if name == "gpupack" and spread and self.chance(0.7):
                    entry = {"name": "gpuspread"}
                elif name == "nodeplacement":
                    entry["arguments"] = {"gpu": "spread" if spread else "binpack",
                                          "cpu": self.pick(("spread", "binpack"))}
                elif name == "minruntime" and self.chance(0.4):
                    entry["arguments"] = {"defaultPreemptMinRuntime": self.pick(("0s", "30s", "10m")),
                                          "defaultReclaimMinRuntime": self.pick(("0s", "90s", "1h")),
                                          "reclaimResolveMethod": self.pick(("lca", "queue"))}
                elif name == "proportion" and self.chance(0.3):
                    entry["arguments"] = {"kValue": self.pick((0.0, 0.5, 1.0, 2.0))}
                plugins.append(entry)
            if self.chance(0.5):
                plugins.append({"name": "podaffinity"})
            config["tiers"] = [{"plugins": plugins}]
        if self.chance(0.3):
            config["queueDepthPerAction"] = {self.pick(ACTIONS): self.pick((0, 1, 2, 5))}
        return config

    def topologies(self) -> list[dict[str, Any]]:
        out = []
        for i in range(self.pick((0, 0, 1, 1, 2))):
            levels = [k for k in TOPOLOGY_KEYS if self.chance(0.6)] or [self.pick(TOPOLOGY_KEYS)]
            out.append({"name": f"topo{i}", "levels": levels})
        return out

    def resources(self, with_limits: bool) -> dict[str, Any]:
        res: dict[str, Any] = {}
        if self.chance(0.8):
            res["gpu"] = self.pick((-1, 0, 0, 0.5, 1, 2, 3, 6, 0.3) if not with_limits else (-1, -1, 0, 1, 2, 4, 0.5))
        if self.chance(0.5):
            res["cpu"] = self.pick((-1, 0, 2000, 10000, 100000))
        if self.chance(0.4):
            res["memory"] = self.pick((-1, 0, 2_000_000_000, 50_000_000_000))
        return res

    def queue(self, name: str, parent: str | None, order: int) -> dict[str, Any]:
        q: dict[str, Any] = {"name": name}
        if parent is not None:
            q["parent"] = parent
        if self.chance(0.6):
            q["priority"] = self.pick((50, 100, 100, 150))
        if self.chance(0.8):
            q["deserved"] = self.resources(False)
        if self.chance(0.4):
            q["limit"] = self.resources(True)
        if self.chance(0.4):
            q["overQuotaWeight"] = {"gpu": self.pick((-1, 0, 1, 2, 3))}
        if self.chance(0.7):
            q["creationOrder"] = order
        return q

    def queues(self, doc: dict[str, Any]) -> None:
        mode = self.pick(("implicit", "departments", "departments", "flat"))
        departments: list[str] = []
        if mode == "departments":
            n = self.r.randint(1, 2)
            departments = [f"dept{i}" for i in range(n)]
            doc["departments"] = [self.queue(d, None, i) for i, d in enumerate(departments)]
            if self.chance(0.5):
                doc["defaultDepartment"] = False
        elif mode == "flat":
            doc["defaultDepartment"] = False
        queues = []
        for i in range(self.r.randint(1, 4)):
            parent = self.pick(departments) if departments else None
            if i > 0 and self.chance(0.1):
                parent = queues[self.r.randrange(i)]["name"]   # a queue under a queue
            queues.append(self.queue(f"queue{i}", parent, i))
        doc["queues"] = queues

    def node(self, i: int, topologies: list[dict[str, Any]]) -> dict[str, Any]:
        name = f"node{i}"
        kind = self.pick(("gpu", "gpu", "gpu", "cpu", "single", "mixed"))
        gpus = 0 if kind in ("cpu", "mixed") else self.pick((1, 2, 4, 8))
        gpu_memory = self.pick((100, 1000, 40000))
        node: dict[str, Any] = {"name": name, "gpus": gpus, "gpuMemoryMiB": gpu_memory,
                                "cpuMillis": self.pick((4000, 16000, 64000)),
                                "memoryBytes": self.pick((8_000_000_000, 64_000_000_000)),
                                "maxPods": self.pick((110, 110, 110, 3, 5, 1, 0))}
        synced = not self.chance(0.1)
        if not synced:
            node["gpuMemorySynced"] = False
        labels = {"kai.scheduler/type": name, "nvidia.com/gpu.count": str(gpus),
                  "nvidia.com/gpu.memory": str(gpu_memory)}
        if kind in ("single", "mixed"):
            node["migStrategy"] = kind
            labels["node-role.kubernetes.io/mig-enabled"] = "true"
            labels["nvidia.com/mig.strategy"] = kind
        keys = {k for t in topologies for k in t["levels"]}
        for key in sorted(keys):
            if self.chance(0.9):
                labels[key] = name if key == "kubernetes.io/hostname" else f"{key.split('/')[-1]}{self.r.randint(0, 1)}"
        if self.chance(0.2):
            labels["pool"] = self.pick(("a", "b"))
        node["labels"] = labels
        mig: dict[str, int] = {}
        if kind == "mixed" or (kind == "single" and self.chance(0.3)):
            mig = {p: self.r.randint(1, 4) for p in MIG_PROFILES if self.chance(0.5)} or {MIG_PROFILES[0]: 2}
            node["mig"] = mig
        if self.chance(0.1):
            node["unschedulable"] = True
        self.rooms[name] = _Room(name, kind, gpus, gpu_memory, synced, node["cpuMillis"], node["memoryBytes"],
                                 node["maxPods"], dict(mig) if kind == "mixed" else {})
        return node

    def request(self) -> dict[str, Any]:
        kind = self.pick(("whole", "whole", "fraction", "memory", "mig", "cpu"))
        req: dict[str, Any] = {"cpuMillis": self.pick((0, 500, 1000, 4000)),
                               "memoryBytes": self.pick((0, 1_000_000_000, 4_000_000_000))}
        if kind == "whole":
            req["gpus"] = self.pick((0, 1, 1, 1, 2, 3))
        elif kind == "fraction":
            req["gpus"] = self.pick((0.1, 0.2, 0.3, 0.5, 0.5, 0.7, 0.9))
            if self.chance(0.3):
                req["gpuDevices"] = self.r.randint(1, 3)
        elif kind == "memory":
            req["gpus"] = 0
            req["gpuMemoryMiB"] = self.pick((50, 100, 500, 20000))
            if self.chance(0.2):
                req["gpuDevices"] = self.r.randint(1, 2)
        elif kind == "mig":
            req["gpus"] = 0
            req["mig"] = {self.pick(MIG_PROFILES): self.r.randint(1, 2)}
        if self.chance(0.05):   # odd corners the scenario rules allow (docs/scenarios.md)
            req = {"cpuMillis": req["cpuMillis"], "memoryBytes": req["memoryBytes"]}
            req.update(self.pick(({"gpus": 8}, {"gpus": 1, "gpuDevices": 2}, {"gpus": 0.5, "gpuDevices": 4},
                                  {"gpuMemoryMiB": 100000}, {"gpus": 0.01}, {"mig": {"nvidia.com/mig-odd": 1}},
                                  {"gpus": 0.99}, {"cpuMillis": 10**9})))
        return req

    def constraint(self, topologies: list[dict[str, Any]]) -> dict[str, Any]:
        topo = self.pick(topologies)
        tc: dict[str, Any] = {"topology": topo["name"]}
        if self.chance(0.6):
            tc["requiredLevel"] = self.pick(topo["levels"])
        if self.chance(0.5):
            tc["preferredLevel"] = self.pick(topo["levels"])
        return tc

    def sub_groups(self, job: dict[str, Any], topologies: list[dict[str, Any]]) -> list[str]:
        """Give the job subGroups; returns the names that may hold tasks."""
        leaves = [f"sg{i}" for i in range(self.r.randint(1, 3))]
        groups: list[dict[str, Any]] = []
        parent = None
        if self.chance(0.4):
            parent = {"name": "grp"}
            if topologies and self.chance(0.5):
                parent["topology"] = self.constraint(topologies)
            groups.append(parent)
        for leaf in leaves:
            g: dict[str, Any] = {"name": leaf, "minAvailable": self.pick((0, 1, 1, 2, 4))}
            if parent is not None and self.chance(0.7):
                g["parent"] = "grp"
            if topologies and self.chance(0.2):
                g["topology"] = self.constraint(topologies)
            groups.append(g)
        job["subGroups"] = groups
        return leaves

    def task(self, job: dict[str, Any], index: int, nodes: list[str], leaves: list[str]) -> dict[str, Any]:
        state = self.pick(("Pending",) * 5 + ("Running",) * 4 + STATES)
        task: dict[str, Any] = {"name": f"{job['name']}-{index}", "state": state}
        if state in HELD or (state not in HELD and self.chance(0.1)):
            task["node"] = self.pick(nodes)     # placed properly later
        if leaves:
            task["subGroup"] = self.pick(leaves)
        if self.chance(0.15):
            task["priority"] = self.r.randint(-1, 3)
        if self.chance(0.3):
            task["labels"] = {"app": self.pick(("a", "b"))}
        if self.chance(0.1):
            task["nodeAffinity"] = [self.pick(nodes + ["nowhere"]) for _ in range(self.r.randint(1, 2))]
        if self.chance(0.1):
            aff: dict[str, Any] = {"labels": {"app": self.pick(("a", "b"))}}
            keys = TOPOLOGY_KEYS + ("kai.scheduler/type",)
            if self.chance(0.7):
                aff["topologyKey"] = self.pick(keys)
            if self.chance(0.5):
                aff["antiTopologyKey"] = self.pick(keys)
            task["podAffinity"] = aff
        if self.chance(0.1) and "gpuDevices" not in job["perTask"]:
            # the task's resources go over the job's perTask key by key: name every GPU key so
            # that the two never mix into a request of two kinds (which the rules refuse)
            task["resources"] = {"gpus": 0, "gpuMemoryMiB": 0, "mig": {}, **self.request()}
        if self.chance(0.05):
            task["legacyMig"] = True
        return task

    def jobs(self, doc: dict[str, Any], topologies: list[dict[str, Any]]) -> list[dict[str, Any]]:
        queue_names = [q["name"] for q in doc["queues"]]
        if self.chance(0.05):
            queue_names += [d["name"] for d in doc.get("departments", [])]
        nodes = [n["name"] for n in doc["nodes"]]
        jobs = []
        for j in range(self.r.randint(1, 7)):
            job: dict[str, Any] = {"name": f"job{j}", "queue": self.pick(queue_names)}
            if self.chance(0.2):
                job["namespace"] = self.pick(("default", "team-a"))
            if self.chance(0.8):
                job["priority"] = self.pick((50, 75, 100, 125, 10, 200))
            if self.chance(0.3):
                job["preemptible"] = self.chance(0.5)
            if self.chance(0.8):
                job["createdMinutesAgo"] = self.pick((0, 1, 2, 5, 30))
            if self.chance(0.3):
                job["lastStartMinutesAgo"] = self.pick((0, 0.5, 1, 10))
            if self.chance(0.15):
                job["staleSeconds"] = self.pick((0, 10, 100))
            if self.chance(0.08):
                job["deleted"] = True
            job["perTask"] = self.request()
            leaves = self.sub_groups(job, topologies) if self.chance(0.2) else []
            if topologies and self.chance(0.25):
                job["topologyConstraint"] = self.constraint(topologies)
            n = self.r.randint(1, 5)
            if not leaves and self.chance(0.6):
                job["minAvailable"] = self.pick((0, 1, n, n, n + 1) if n > 1 else (0, 1, 1, 2))
            job["tasks"] = [self.task(job, i, nodes, leaves) for i in range(n)]
            jobs.append(job)
        self.place(jobs)
        return jobs

    def place(self, jobs: list[dict[str, Any]]) -> None:
        """Put node-holding tasks where they fit (Pipelined last, on what Releasing pods free)."""
        tasks = [(job, t) for job in jobs for t in job["tasks"] if t.get("node") is not None]
        tasks.sort(key=lambda jt: jt[1]["state"] == "Pipelined")
        for job, task in tasks:
            req = dict(job["perTask"])
            req.update(task.get("resources") or {})
            state = task["state"]
            if state not in HELD:
                continue   # a node named, nothing held
            if self.chaos and self.chance(0.5):
                # the chaos seeds keep the random node, whatever it holds, with made-up groups
                kind, count, _ = _kind(req)
                if kind == "shared":
                    task["gpuGroups"] = [self.pick(("0", "1", "x")) for _ in range(count)]
                continue
            if self._place_task(task, req, state):
                continue
            task.pop("node")
            task.pop("gpuGroups", None)
            task["state"] = self.pick(("Pending", "Pending", "Succeeded", "Failed", "Gated"))

    def _place_task(self, task: dict[str, Any], req: dict[str, Any], state: str) -> bool:
        names = list(self.rooms)
        self.r.shuffle(names)
        names.sort(key=lambda n: n != task["node"])
        for name in names:
            room = self.rooms[name]
            groups = room.place(req, state == "Pipelined", self.r)
            if groups is None:
                continue
            task["node"] = name
            if groups:
                task["gpuGroups"] = groups
            if state == "Releasing":
                kind, count, _ = _kind(req)
                room.releasing[0] += count if kind == "whole" else 0
                room.releasing[1] += int(req.get("cpuMillis", 0))
                room.releasing[2] += int(req.get("memoryBytes", 0))
            return True
        return False


def scenario(seed: int) -> dict[str, Any]:
    """A schema-valid scenario for `seed` (the same one every time)."""
    from kaipolicy.cache.scenario_schema import validate_scenario
    from kaipolicy.errors import ScenarioError

    for attempt in range(20):
        doc = _Generator(seed * 1000 + attempt).document()
        STATS["generated"] += 1
        try:
            validate_scenario(doc, f"seed-{seed}")
        except ScenarioError as e:
            STATS["rejected"] += 1
            STATS[f"rejected: {e.path}: {str(e).split(': ')[-1][:60]}"] += 1
            continue
        return doc
    raise RuntimeError(f"seed {seed}: 20 documents in a row failed the schema")


# ---- the long-run command -----------------------------------------------------------------------
def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi) + 1) if hi else [int(lo)])
    return out


def _check_one(seed: int) -> tuple[int, list[tuple[str, str]]]:
    from tests.fuzz.properties import check

    return seed, [(f.kind, f.detail) for f in check(scenario(seed))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz.generate", description=__doc__)
    ap.add_argument("--seeds", default="0-999", help="e.g. 0-5000 or 1,5,9-12")
    ap.add_argument("--jobs", "-j", type=int, default=1, help="worker processes")
    ap.add_argument("--save", metavar="DIR", help="write the first failing scenario of each class here")
    ap.add_argument("--minimise", action="store_true", help="minimise each saved scenario first")
    ap.add_argument("--dump", type=int, metavar="SEED", help="print one seed's scenario as YAML and exit")
    args = ap.parse_args(argv)
    import yaml

    if args.dump is not None:
        print(yaml.safe_dump(scenario(args.dump), sort_keys=False, width=120))
        return 0
    seeds = _seeds(args.seeds)
    start = time.time()
    classes: dict[str, list[int]] = {}
    details: dict[str, str] = {}
    if args.jobs > 1:
        from multiprocessing import Pool

        with Pool(args.jobs) as pool:
            results = list(pool.imap_unordered(_check_one, seeds, chunksize=8))
    else:
        results = [_check_one(s) for s in seeds]
    for seed, failures in sorted(results):
        for kind, detail in dict(failures).items():
            classes.setdefault(kind, []).append(seed)
            details.setdefault(kind, detail)
    print(f"{len(seeds)} seeds in {time.time() - start:.1f}s; {len(classes)} failure class(es)")
    for kind, failing in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(failing):5d}  {kind}\n       seeds {failing[:12]}\n       {details[kind][:300]}")
    if args.save:
        _save(args.save, classes, args.minimise)
    return 1 if classes else 0


def _save(folder: str, classes: dict[str, list[int]], minimise: bool) -> None:
    import yaml

    from tests.fuzz.minimise import minimise as shrink

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for n, (kind, failing) in enumerate(sorted(classes.items()), start=1):
        doc = scenario(failing[0])
        if minimise:
            doc = shrink(copy.deepcopy(doc), kind)
        path = out / f"repro-{n}.yaml"
        path.write_text(f"# {kind}\n# seed {failing[0]} (of {len(failing)} failing)\n"
                        + yaml.safe_dump(doc, sort_keys=False, width=120))
        print(f"saved {path}")


if __name__ == "__main__":
    sys.exit(main())
