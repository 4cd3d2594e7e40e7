#!/usr/bin/env python3
"""Convert a kaipolicy scenario (YAML path or dict) into the JSON read by the Go harness
(/tmp/goref/kai/pkg/scheduler/actions/zzharness/harness_test.go).

Refuses (raises Unsupported) any scenario feature it does not map.

usage: to_go.py SCENARIO.yaml [OUT.json]
"""
from __future__ import annotations

import copy
import json
import sys
from typing import Any

import yaml

PARAM_DEFAULTS = {  # kaipolicy's production defaults (scenario-format.md)
    "maxConsolidationPreemptees": 16,
    "allowConsolidatingReclaim": True,
    "useSchedulingSignatures": True,
    "fullHierarchyFairness": True,
    "detailedFitErrors": False,
}
ACTIONS = {"allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"}
STATES = {"Pending", "Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated", "Succeeded",
          "Failed", "Gated"}


#: fullHierarchyFairness=false flattens the tree in the reference's cache (cluster_info.snapshotQueues),
#: but the reference's tests (whose values the shared scenarios write out) build their queues directly,
#: and kaipolicy takes the tree as written: off by default, so the tree is taken as written.
PROJECT_LEVEL_FAIRNESS = False


class Unsupported(Exception):
    pass


def _check_keys(where: str, d: dict[str, Any], allowed: set[str]) -> None:
    extra = set(d) - allowed
    if extra:
        raise Unsupported(f"{where}: unmapped keys {sorted(extra)}")


def _num(x: Any) -> float:
    return float(x)


def _quant(spec: dict[str, Any] | None, default: float, gpu_default: float | None, where: str) -> dict[str, float]:
    spec = spec or {}
    _check_keys(where, spec, {"gpu", "cpu", "memory"})
    gpu = _num(spec.get("gpu", default if gpu_default is None else gpu_default))
    cpu = _num(spec.get("cpu", default))
    mem = _num(spec.get("memory", default))
    # the Queue CRD holds memory in MB (proportion multiplies by 1000*1000); scenarios hold bytes
    if mem > 0:
        mem = mem / 1e6
    return {"gpu": gpu, "cpu": cpu, "memory": mem}


def _queue(q: dict[str, Any], parent: str | None) -> dict[str, Any]:
    where = f"queue {q.get('name')}"
    _check_keys(where, q, {"name", "parent", "priority", "deserved", "limit", "overQuotaWeight", "creationOrder",
                           "preemptMinRuntimeSeconds", "reclaimMinRuntimeSeconds"})
    out = {
        "name": q["name"], "parent": parent or "",
        "priority": int(q.get("priority", 100)),
        "deserved": _quant(q.get("deserved"), -1.0, 0.0, where + ".deserved"),
        "limit": _quant(q.get("limit"), -1.0, None, where + ".limit"),
        "overQuotaWeight": _quant(q.get("overQuotaWeight"), 1.0, None, where + ".overQuotaWeight"),
        "creationOrder": int(q.get("creationOrder", 0)),
    }
    # the overQuotaWeight's memory is not a quantity: undo the MB conversion
    ow = q.get("overQuotaWeight") or {}
    out["overQuotaWeight"]["memory"] = _num(ow.get("memory", 1.0))
    for k in ("preemptMinRuntimeSeconds", "reclaimMinRuntimeSeconds"):
        if q.get(k) is not None:
            out[k] = float(q[k])
    return out


def _queues(doc: dict[str, Any], full_hierarchy: bool) -> list[dict[str, Any]]:
    departments = doc.get("departments")
    default_parent = None
    if departments is None and doc.get("defaultDepartment", True):
        departments = [{"name": "default", "deserved": {"gpu": -1, "cpu": -1, "memory": -1}}]
        default_parent = "default"
    out = [_queue(d, d.get("parent")) for d in departments or []]
    out += [_queue(q, q.get("parent", default_parent)) for q in doc.get("queues") or []]
    names = [q["name"] for q in out]
    if len(set(names)) != len(names):
        raise Unsupported("duplicate queue names")
    if not full_hierarchy and PROJECT_LEVEL_FAIRNESS:
        # the reference's cache with fullHierarchyFairness=false (cluster_info.snapshotQueues):
        # every queue that has a parent is put under one "default" queue; the others are dropped
        kept = [dict(q, parent="default") for q in out if q["parent"]]
        if any(q["name"] == "default" for q in kept):
            raise Unsupported("fullHierarchyFairness=false with a child queue named default")
        out = [{"name": "default", "parent": "", "priority": 100,
                "deserved": {"gpu": -1, "cpu": -1, "memory": -1}, "limit": {"gpu": -1, "cpu": -1, "memory": -1},
                "overQuotaWeight": {"gpu": 1, "cpu": 1, "memory": 1}, "creationOrder": -100000}] + kept
    return out


def _node(n: dict[str, Any]) -> dict[str, Any]:
    where = f"node {n.get('name')}"
    _check_keys(where, n, {"name", "gpus", "gpuMemoryMiB", "gpuMemorySynced", "cpuMillis", "memoryBytes", "maxPods",
                           "labels", "migStrategy", "mig", "unschedulable"})
    if not n.get("cpuMillis") or not n.get("memoryBytes"):
        raise Unsupported(f"{where}: cpuMillis/memoryBytes must be given and > 0 (Go's builder defaults 0)")
    strategy = n.get("migStrategy", "none")
    if strategy not in ("none", "single", "mixed"):
        raise Unsupported(f"{where}: migStrategy {strategy}")
    labels = {str(k): str(v) for k, v in (n.get("labels") or {}).items()}
    out = {
        "name": n["name"], "gpus": int(n.get("gpus", 0)),
        "gpuMemoryMiB": int(n.get("gpuMemoryMiB", 100)),
        # Go's TestNodeBasic.CPUMillis is parsed as a quantity string: cores
        "cpuMillis": _num(n["cpuMillis"]) / 1000.0,
        "memoryBytes": _num(n["memoryBytes"]),
        "maxPods": int(n.get("maxPods", 110)),
        "labels": labels,
        "migStrategy": "" if strategy == "none" else strategy,
        "mig": {str(k): int(v) for k, v in (n.get("mig") or {}).items()},
        "unschedulable": bool(n.get("unschedulable", False)),
    }
    if float(n.get("gpus", 0)) != int(n.get("gpus", 0)):
        raise Unsupported(f"{where}: fractional gpus")
    if "gpuMemorySynced" in n:
        out["gpuMemorySynced"] = bool(n["gpuMemorySynced"])
    return out


def _constraint(tc: dict[str, Any] | None, where: str, topologies: dict[str, list[str]]) -> dict[str, str] | None:
    """A job's topologyConstraint or a subgroup's topology, as the PodGroup's (and its SubGroup's)
    TopologyConstraint fields. kaipolicy reads a constraint without a topology name as none; so does
    the reference's PodGroup factory for the job's, but not for a subgroup's (it keeps an empty one,
    which the plugin then also ignores): both are refused rather than guessed."""
    if tc is None:
        return None
    _check_keys(where, tc, {"topology", "requiredLevel", "preferredLevel"})
    name = tc.get("topology")
    if not name:
        raise Unsupported(f"{where}: constraint without a topology name")
    if name not in topologies:
        raise Unsupported(f"{where}: unknown topology {name}")
    req = tc.get("requiredLevel") or ""
    pref = tc.get("preferredLevel") or ""
    for lvl in (req, pref):
        if lvl and lvl not in topologies[name]:
            raise Unsupported(f"{where}: level {lvl} not in topology {name}")
    # neither level: mapped as written (the reference's plugin then errs in calculateRelevantDomainLevels)
    return {"topology": str(name), "requiredLevel": str(req), "preferredLevel": str(pref)}


def _topologies(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for t in doc.get("topologies") or []:
        _check_keys("topologies[]", t, {"name", "levels"})
        levels = [str(x) for x in t.get("levels") or []]
        if not t.get("name") or not levels:
            raise Unsupported(f"topology {t.get('name')}: no name or no levels")
        if len(set(levels)) != len(levels):
            raise Unsupported(f"topology {t['name']}: repeated level")
        out.append({"name": str(t["name"]), "levels": levels})
    if len({t["name"] for t in out}) != len(out):
        raise Unsupported("duplicate topology names")
    return out


HOLDS_NODE = {"Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated"}


def _shared(r: dict[str, Any]) -> tuple[bool, int]:
    g = _num(r.get("gpus", 0))
    shared = (0 < g < 1) or bool(r.get("gpuMemoryMiB"))
    return shared, int(r.get("gpuDevices") or 1) if shared else 0


def _pod_request(merged: dict[str, Any], per: dict[str, Any], t: dict[str, Any], tw: str) -> dict[str, Any]:
    """The task's exact request, for the harness to write onto its pod (podRequest)."""
    g = _num(merged.get("gpus", 0))
    mem = int(merged.get("gpuMemoryMiB", 0) or 0)
    dev = merged.get("gpuDevices")
    if g > 1 and g != int(g) or g < 0:
        raise Unsupported(f"{tw}: gpus {g}")
    if g and mem:
        raise Unsupported(f"{tw}: both gpus and gpuMemoryMiB")
    if dev is not None and not (0 < g < 1 or mem):
        raise Unsupported(f"{tw}: gpuDevices without a fraction or GPU memory")
    if dev is not None and int(dev) < 1:
        raise Unsupported(f"{tw}: gpuDevices {dev}")
    if t.get("state") in HOLDS_NODE and t.get("node"):
        # a placed task's GPU groups: the fake job builder pads a fractional job's placed pods to the
        # job's number of devices; anything else takes the groups as written
        shared, ndev = _shared(merged)
        jshared, jdev = _shared(per)
        job_fraction = 0 < _num(per.get("gpus", 0)) < 1
        groups = len(t.get("gpuGroups") or [])
        if job_fraction and not (shared and ndev == jdev and groups <= ndev):
            raise Unsupported(f"{tw}: a placed task's request differs from its fractional job's")
        if not job_fraction and shared and groups != ndev:
            raise Unsupported(f"{tw}: a placed shared-GPU task needs {ndev} gpuGroups")
    return {"cpu": _num(merged.get("cpuMillis", 0)) / 1000.0, "memory": _num(merged.get("memoryBytes", 0)),
            "gpus": g, "gpuMemoryMiB": mem, "gpuDevices": int(dev) if dev is not None else 0}


def _job(j: dict[str, Any], idx: int, topologies: dict[str, list[str]]) -> dict[str, Any]:
    where = f"job {j.get('name')}"
    _check_keys(where, j, {"name", "namespace", "queue", "priority", "preemptible", "minAvailable", "createdMinutesAgo",
                           "staleSeconds", "lastStartMinutesAgo", "deleted", "perTask", "subGroups", "tasks",
                           "topologyConstraint"})
    per = dict(j.get("perTask") or {})
    _check_keys(where + ".perTask", per, {"gpus", "gpuMemoryMiB", "gpuDevices", "cpuMillis", "memoryBytes", "mig"})
    gpus = _num(per.get("gpus", 0))
    devices = per.get("gpuDevices")
    if gpus > 1 and gpus != int(gpus):
        raise Unsupported(f"{where}: gpus {gpus} (above 1, not whole)")
    if per.get("gpuMemoryMiB") and gpus:
        raise Unsupported(f"{where}: both gpus and gpuMemoryMiB")
    if devices is not None and not (0 < gpus < 1 or per.get("gpuMemoryMiB")):
        raise Unsupported(f"{where}: gpuDevices without a fraction or GPU memory")
    # The reference's fake jobs ask 1 CPU and 1G where these are 0 (generate.scenario seed 195), and
    # never write a multi-device fraction's number of devices onto the pod (its pods ask one device):
    # such jobs' pods get their exact request written onto the pod by the harness (podRequest).
    job_pod_request = bool(devices) or not per.get("cpuMillis") or not per.get("memoryBytes")
    tasks_in = j.get("tasks") or []
    out: dict[str, Any] = {
        "name": j["name"], "namespace": j.get("namespace", "default"), "queue": j["queue"],
        "priority": int(j.get("priority", 50)),
        "minAvailable": int(j.get("minAvailable", len(tasks_in))),
        "createdMinutesAgo": _num(j.get("createdMinutesAgo", 0)),
        "deleted": bool(j.get("deleted", False)),
        "gpus": gpus, "gpuMemoryMiB": int(per.get("gpuMemoryMiB", 0)),
        # Go's RequiredCPUsPerTask is parsed as a quantity string: cores
        "cpuMillis": _num(per.get("cpuMillis", 0)) / 1000.0,
        "memoryBytes": _num(per.get("memoryBytes", 0)),
        "tasks": [],
    }
    if out["minAvailable"] < 0:
        raise Unsupported(f"{where}: minAvailable < 0")
    if devices is not None:
        out["gpuDevices"] = int(devices)
    if j.get("preemptible") is not None:
        out["preemptible"] = bool(j["preemptible"])
    if j.get("staleSeconds") is not None:
        out["staleSeconds"] = _num(j["staleSeconds"])
    if j.get("lastStartMinutesAgo") is not None:
        out["lastStartMinutesAgo"] = _num(j["lastStartMinutesAgo"])
    tc = _constraint(j.get("topologyConstraint"), where + ".topologyConstraint", topologies)
    if tc is not None:
        out["topologyConstraint"] = tc
    if j.get("subGroups"):
        sgs = []
        for g in j["subGroups"]:
            _check_keys(where + ".subGroups", g, {"name", "minAvailable", "parent", "topology"})
            sg = {"name": g["name"], "parent": g.get("parent") or ""}
            tc = _constraint(g.get("topology"), f"{where}.subGroups[{g['name']}].topology", topologies)
            if tc is not None:
                sg["topologyConstraint"] = tc
            if g.get("minAvailable") is not None:
                sg["minAvailable"] = max(int(g["minAvailable"]), 1)
            sgs.append(sg)
        parents = {g["parent"] for g in sgs if g["parent"]}
        for g in sgs:
            if g["name"] in parents and "minAvailable" in g:
                raise Unsupported(f"{where}: subgroup {g['name']} both holds pods and has children")
            if g["name"] not in parents and "minAvailable" not in g:
                g["minAvailable"] = 1   # kaipolicy: max(int(g.get('minAvailable', 1)), 1)
        out["subGroups"] = sgs
    per_mig = per.get("mig")
    for i, t in enumerate(tasks_in):
        tw = f"{where}.tasks[{i}]"
        _check_keys(tw, t, {"name", "state", "node", "gpuGroups", "subGroup", "priority", "nodeAffinity", "labels",
                            "podAffinity", "legacyMig", "resources"})
        name = t.get("name") or f"{j['name']}-{i}"
        if name != f"{j['name']}-{i}":
            raise Unsupported(f"{tw}: task name {name} is not <job>-<index> (Go names pods so)")
        if t["state"] not in STATES:
            raise Unsupported(f"{tw}: state {t['state']}")
        to: dict[str, Any] = {"name": name, "state": t["state"], "node": t.get("node") or ""}
        if t.get("gpuGroups"):
            to["gpuGroups"] = [str(g) for g in t["gpuGroups"]]
        if t.get("subGroup"):
            if not j.get("subGroups"):
                raise Unsupported(f"{tw}: subGroup without job subGroups")
            to["subGroup"] = t["subGroup"]
        elif j.get("subGroups"):
            raise Unsupported(f"{tw}: job has subGroups but task names none")
        if t.get("priority") is not None:
            to["priority"] = int(t["priority"])
        if t.get("nodeAffinity"):
            to["nodeAffinity"] = [str(v) for v in t["nodeAffinity"]]
        labels = {str(k): str(v) for k, v in (t.get("labels") or {}).items()}
        aff = t.get("podAffinity")
        if aff:
            _check_keys(tw + ".podAffinity", aff, {"labels", "topologyKey", "antiTopologyKey"})
            al = {str(k): str(v) for k, v in (aff.get("labels") or {}).items()}
            # Go's TestTaskBasic has one label map: the pod's labels and the affinity's selector; the
            # harness then writes the pod's own labels (ownLabels) over the ones the builder gave it
            to["podLabels"] = al
            if labels != al:
                to["ownLabels"] = labels
            if aff.get("topologyKey"):
                to["podAffinityTopologyKey"] = aff["topologyKey"]
            if aff.get("antiTopologyKey"):
                to["podAntiAffinityTopologyKey"] = aff["antiTopologyKey"]
        elif labels:
            to["podLabels"] = labels
        if t.get("legacyMig"):
            to["legacyMig"] = True
        mig = per_mig
        res = t.get("resources") or {}
        _check_keys(tw + ".resources", res, {"gpus", "mig", "gpuMemoryMiB", "gpuDevices", "cpuMillis", "memoryBytes"})
        if "mig" in res:
            mig = res["mig"]
        merged = dict(per)
        merged.update(res)
        old_path = set(res) <= {"gpus", "mig"} and (
            "gpus" not in res or (_num(res["gpus"]) == int(_num(res["gpus"])) and gpus == int(gpus)
                                  and not per.get("gpuMemoryMiB") and not devices))
        if res and old_path and "gpus" in res:
            to["requiredGPUs"] = int(_num(res["gpus"]))   # the reference tests' own form
        if job_pod_request or not old_path:
            to["podRequest"] = _pod_request(merged, per, t, tw)
        if mig and (_num(merged.get("gpus", 0)) != int(_num(merged.get("gpus", 0))) or merged.get("gpuMemoryMiB")):
            raise Unsupported(f"{tw}: mig with a shared GPU request")
        if mig:
            to["mig"] = {str(k): int(v) for k, v in mig.items()}
        out["tasks"].append(to)
    return out


def convert(doc: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(doc, str):
        with open(doc) as f:
            doc = yaml.safe_load(f)
    doc = copy.deepcopy(doc)
    _check_keys("scenario", doc, {"name", "source", "features", "actions", "cycles", "config", "departments",
                                  "defaultDepartment", "queues", "nodes", "jobs", "params",
                                  "staleGracePeriodSeconds", "expect", "topologies"})
    for a in doc["actions"]:
        if a not in ACTIONS:
            raise Unsupported(f"action {a}")
    params = dict(PARAM_DEFAULTS)
    params.update(doc.get("params") or {})
    _check_keys("params", params, set(PARAM_DEFAULTS))
    mcp = int(params["maxConsolidationPreemptees"])
    out: dict[str, Any] = {
        "actions": list(doc["actions"]),
        "cycles": int(doc.get("cycles", 1)),
        "params": {
            # scenario 0 = unlimited; Go -1 = unlimited, 0 = consolidation disabled
            "maxConsolidationPreemptees": -1 if mcp == 0 else mcp,
            "allowConsolidatingReclaim": bool(params["allowConsolidatingReclaim"]),
            "useSchedulingSignatures": bool(params["useSchedulingSignatures"]),
            "detailedFitErrors": bool(params["detailedFitErrors"]),
            "staleGracePeriodSeconds": _num(doc.get("staleGracePeriodSeconds", 0)),
        },
        "queues": _queues(doc, bool(params["fullHierarchyFairness"])),
        "nodes": [_node(n) for n in doc.get("nodes") or []],
        "topologies": _topologies(doc),
    }
    topo_levels = {t["name"]: t["levels"] for t in out["topologies"]}
    out["jobs"] = [_job(j, i, topo_levels) for i, j in enumerate(doc.get("jobs") or [])]
    cfg = doc.get("config")
    if cfg:
        _check_keys("config", cfg, {"tiers", "queueDepthPerAction"})
        if cfg.get("tiers") is not None:
            tiers = []
            for t in cfg["tiers"]:
                _check_keys("config.tiers[]", t, {"plugins"})
                plugins = []
                for p in t["plugins"]:
                    _check_keys("config.tiers[].plugins[]", p, {"name", "arguments"})
                    po = {"name": p["name"]}
                    if p.get("arguments"):
                        po["arguments"] = {str(k): str(v) for k, v in p["arguments"].items()}
                    plugins.append(po)
                tiers.append({"plugins": plugins})
            out["tiers"] = tiers
        if cfg.get("queueDepthPerAction"):
            out["queueDepthPerAction"] = {str(k): int(v) for k, v in cfg["queueDepthPerAction"].items()}
    # sanity: nodes named by tasks exist; queues named by jobs exist and are leaves
    node_names = {n["name"] for n in out["nodes"]}
    queue_names = {q["name"] for q in out["queues"]}
    for j in out["jobs"]:
        if j["queue"] not in queue_names:
            raise Unsupported(f"job {j['name']}: unknown queue {j['queue']}")
        for t in j["tasks"]:
            if t["node"] and t["node"] not in node_names:
                raise Unsupported(f"task {t['name']}: unknown node {t['node']}")
    return out


if __name__ == "__main__":
    res = convert(sys.argv[1])
    text = json.dumps(res, indent=1)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text)
    else:
        print(text)
