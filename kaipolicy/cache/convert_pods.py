"""Pods and PodGroups -> scenario-format task and job specs (see `convert.py` for the other kinds).

A pod's request is what kube-scheduler counts (containers summed, the largest init container,
overhead), its GPU share comes from the reference's annotations (`gpu-fraction`, `gpu-memory`,
`gpu-fraction-num-devices`, legacy `nvidia.com/mig-*`), and its node constraints are kept whole:
nodeSelector, required node affinity, tolerations, and the simple form of required pod affinity.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from kaipolicy.cache import kubeapi
from kaipolicy.cache.convert import (
    GPU_FRACTION,
    GPU_FRACTION_DEVICES,
    GPU_GROUP_LABEL,
    GPU_MEMORY,
    GPU_RESOURCE,
    LAST_START_ANNOTATION,
    MIG_PREFIX,
    POD_GROUP_ANNOTATION,
    PREEMPTIBILITY_LABEL,
    QUEUE_LABEL,
    STALE_SINCE_ANNOTATION,
    SUB_GROUP_LABEL,
    TASK_PRIORITY_LABEL,
    Meta,
    PodGroupView,
    PodView,
    amount,
    meta,
    timestamp,
    whole_number,
)
from kaipolicy.cache.kubeapi import Obj

PHASES = ("Pending", "Running", "Succeeded", "Failed")
PREEMPTIBILITIES = ("", "preemptible", "non-preemptible")


def pod(obj: Obj) -> PodView:
    m = meta(kubeapi.POD, obj)
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    phase = str(status.get("phase") or "Pending")
    resources, usage = _resources(m, spec, annotations)
    task: dict[str, Any] = {"name": m.name, "resources": resources}
    labels = {k: v for k, v in m.labels.items() if not k.startswith(GPU_GROUP_LABEL)}
    if labels:
        task["labels"] = labels
    if TASK_PRIORITY_LABEL in m.labels:
        task["priority"] = whole_number(m, f"label {TASK_PRIORITY_LABEL}", m.labels[TASK_PRIORITY_LABEL], -(2**31))
    groups = _gpu_groups(m.labels)
    if groups:
        task["gpuGroups"] = groups
    if m.labels.get(SUB_GROUP_LABEL):
        task["subGroup"] = m.labels[SUB_GROUP_LABEL]
    task.update(_node_constraints(spec))
    task.update(_pod_affinity(m, spec))
    preemptibility = m.labels.get(PREEMPTIBILITY_LABEL, "")
    if preemptibility not in PREEMPTIBILITIES:
        raise m.problem(f"label {PREEMPTIBILITY_LABEL}: {preemptibility!r} is not preemptible or non-preemptible")
    return PodView(
        m, scheduler=str(spec.get("schedulerName") or "default-scheduler"),
        # a pod in phase Unknown (its node lost) holds nothing and is not alive: as Failed
        phase=phase if phase in PHASES else "Failed", node=str(spec.get("nodeName") or ""),
        deleting=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
        gated=bool(spec.get("schedulingGates")), group=str(annotations.get(POD_GROUP_ANNOTATION) or ""),
        queue=m.labels.get(QUEUE_LABEL, ""), priority_class=str(spec.get("priorityClassName") or ""),
        preemptibility=preemptibility, task=task, usage=usage)


# ---- what a pod asks for ------------------------------------------------------------------------
def _resources(m: Meta, spec: Obj, annotations: dict[str, str]) -> tuple[dict[str, Any], dict[str, float]]:
    total = _pod_request(m, spec)
    gpus = total.pop(GPU_RESOURCE, Decimal(0))
    if gpus != int(gpus):
        raise m.problem(f"{GPU_RESOURCE}: {gpus} is not a whole number of devices")
    out: dict[str, Any] = {"cpuMillis": math.ceil(total.pop("cpu", Decimal(0)) * 1000),
                           "memoryBytes": math.ceil(total.pop("memory", Decimal(0)))}
    mig = {k: int(v) for k, v in total.items() if k.startswith(MIG_PREFIX) and v > 0}
    legacy = {k: whole_number(m, f"annotation {k}", v, 1) for k, v in annotations.items() if k.startswith(MIG_PREFIX)}
    if legacy:
        out["legacyMig"] = True
        mig.update(legacy)
    if mig:
        out["mig"] = mig
    shared = _shared_gpu(m, annotations)
    if shared and gpus:
        raise m.problem(f"asks for {GPU_RESOURCE} and for a shared GPU ({GPU_FRACTION}/{GPU_MEMORY}) at once")
    if shared:
        out.update(shared)
    elif gpus:
        out["gpus"] = int(gpus)
    usage = {"cpuMillis": float(out["cpuMillis"]), "memoryBytes": float(out["memoryBytes"]),
             "gpus": float(out.get("gpus", 0)) * (out.get("gpuDevices", 1) if shared else 1)}
    return out, usage


def _pod_request(m: Meta, spec: Obj) -> dict[str, Decimal]:
    """Per resource: containers summed, raised to the largest init container, plus overhead
    (a resource given only as a limit is requested at the limit, as the API defaults it)."""
    total: dict[str, Decimal] = {}
    for i, c in enumerate(spec.get("containers") or []):
        for name, q in _container_request(m, f"spec.containers[{i}]", c).items():
            total[name] = total.get(name, Decimal(0)) + q
    for i, c in enumerate(spec.get("initContainers") or []):
        for name, q in _container_request(m, f"spec.initContainers[{i}]", c).items():
            total[name] = max(total.get(name, Decimal(0)), q)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + amount(m, f"spec.overhead[{name}]", value)
    return total


def _container_request(m: Meta, where: str, container: Obj) -> dict[str, Decimal]:
    res = container.get("resources") or {}
    given = {**(res.get("limits") or {}), **(res.get("requests") or {})}
    return {str(k): amount(m, f"{where}.resources[{k}]", v) for k, v in given.items()}


def _shared_gpu(m: Meta, annotations: dict[str, str]) -> dict[str, Any]:
    fraction, memory = annotations.get(GPU_FRACTION), annotations.get(GPU_MEMORY)
    if fraction is None and memory is None:
        return {}
    if fraction is not None and memory is not None:
        raise m.problem(f"annotations {GPU_FRACTION} and {GPU_MEMORY} together: give one")
    devices = whole_number(m, f"annotation {GPU_FRACTION_DEVICES}", annotations.get(GPU_FRACTION_DEVICES, "1"), 1)
    if memory is not None:
        return {"gpuMemoryMiB": whole_number(m, f"annotation {GPU_MEMORY}", memory, 1), "gpuDevices": devices}
    try:
        portion = float(str(fraction))
    except ValueError:
        portion = math.nan
    # portions are counted in hundredths, as the reference does
    if not 0.01 <= portion <= 1:
        raise m.problem(f"annotation {GPU_FRACTION}: {fraction!r} is not a fraction in [0.01, 1]")
    return {"gpus": portion, "gpuDevices": devices}


def _gpu_groups(labels: dict[str, str]) -> list[str]:
    if GPU_GROUP_LABEL not in labels:
        return []
    extra = sorted((k, v) for k, v in labels.items() if k.startswith(GPU_GROUP_LABEL + "/"))
    return [labels[GPU_GROUP_LABEL]] + [v for _, v in extra]


# ---- where a pod may go -----------------------------------------------------------------------
def _node_constraints(spec: Obj) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.get("nodeSelector"):
        out["nodeSelector"] = {str(k): str(v) for k, v in spec["nodeSelector"].items()}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    if required.get("nodeSelectorTerms"):
        out["requiredNodeAffinity"] = [
            {key: [_requirement(r) for r in term.get(key) or []]
             for key in ("matchExpressions", "matchFields") if term.get(key)}
            for term in required["nodeSelectorTerms"]]
    tolerations = [{k: str(t[k]) for k in ("key", "operator", "value", "effect") if t.get(k)}
                   for t in spec.get("tolerations") or []]
    if tolerations:
        out["tolerations"] = tolerations
    return out


def _requirement(r: Obj) -> dict[str, Any]:
    out: dict[str, Any] = {"key": str(r.get("key", "")), "operator": str(r.get("operator", ""))}
    if r.get("values"):
        out["values"] = [str(v) for v in r["values"]]
    return out


def _pod_affinity(m: Meta, spec: Obj) -> dict[str, Any]:
    """Required pod affinity and anti-affinity in the model's form: one term each, selecting by
    matchLabels (the same labels for both). Anything richer is refused rather than ignored."""
    affinity = spec.get("affinity") or {}
    out: dict[str, Any] = {}
    labels: dict[str, str] | None = None
    for kind, key in (("podAffinity", "topologyKey"), ("podAntiAffinity", "antiTopologyKey")):
        terms = (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        if not terms:
            continue
        term = terms[0]
        selector = term.get("labelSelector") or {}
        if (len(terms) > 1 or selector.get("matchExpressions") or term.get("namespaces")
                or term.get("namespaceSelector") or term.get("matchLabelKeys") or term.get("mismatchLabelKeys")):
            raise m.problem(f"spec.affinity.{kind}: only one required term selecting by matchLabels is supported")
        term_labels = {str(k): str(v) for k, v in (selector.get("matchLabels") or {}).items()}
        if labels is not None and term_labels != labels:
            raise m.problem("spec.affinity: pod affinity and anti-affinity must select the same labels")
        labels = term_labels
        out[key] = str(term.get("topologyKey", ""))
    if labels is None:
        return {}
    return {"podAffinity": {"labels": labels, **out}}


# ---- pod groups ---------------------------------------------------------------------------------
def pod_group(obj: Obj) -> PodGroupView:
    m = meta(kubeapi.POD_GROUP, obj)
    spec = obj.get("spec") or {}
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    queue = str(spec.get("queue") or "")
    if not queue:
        raise m.problem("spec.queue is empty: a pod group needs a queue")
    job: dict[str, Any] = {}
    constraint = _topology_constraint(spec.get("topologyConstraint"))
    if constraint:
        job["topologyConstraint"] = constraint
    sub_groups, leaves = _sub_groups(m, spec.get("subGroups") or [])
    if sub_groups:
        job["subGroups"] = sub_groups
    else:
        job["minAvailable"] = max(int(spec.get("minMember") or 0), 1)
    for key, annotation in (("lastStart", LAST_START_ANNOTATION), ("staleSince", STALE_SINCE_ANNOTATION)):
        try:
            when = timestamp(annotations.get(annotation))
        except ValueError as e:
            raise m.problem(f"annotation {annotation}: {annotations[annotation]!r} is not an RFC 3339 time") from e
        if when is not None:
            job[key] = when
    preemptibility = str(spec.get("preemptibility") or m.labels.get(PREEMPTIBILITY_LABEL, ""))
    if preemptibility not in PREEMPTIBILITIES:
        raise m.problem(f"preemptibility {preemptibility!r} is not preemptible or non-preemptible")
    return PodGroupView(m, queue, str(spec.get("priorityClassName") or ""), preemptibility, frozenset(leaves), job)


def _topology_constraint(spec: Obj | None) -> dict[str, str]:
    if not spec or not spec.get("topology"):
        return {}
    out = {"topology": str(spec["topology"])}
    for crd_key, key in (("requiredTopologyLevel", "requiredLevel"), ("preferredTopologyLevel", "preferredLevel")):
        if spec.get(crd_key):
            out[key] = str(spec[crd_key])
    return out


def _sub_groups(m: Meta, groups: list[Obj]) -> tuple[list[dict[str, Any]], list[str]]:
    """The sub-group tree in scenario form; the leaves (groups no other names as parent) hold pods."""
    names = [str(g.get("name") or "") for g in groups]
    if len(set(names)) != len(names) or not all(names):
        raise m.problem("spec.subGroups: names must be present and unique")
    parents = {str(g["parent"]) for g in groups if g.get("parent")}
    if not parents <= set(names):
        raise m.problem(f"spec.subGroups: unknown parent {min(parents - set(names))!r}")
    by_name = {str(g["name"]): g for g in groups}
    for name in names:  # walk up from each: a cycle never reaches the top
        seen, at = set(), name
        while at:
            if at in seen:
                raise m.problem(f"spec.subGroups: {name!r} is its own ancestor")
            seen.add(at)
            at = str(by_name[at].get("parent") or "")
    out = []
    for g in groups:
        entry: dict[str, Any] = {"name": str(g["name"])}
        if g.get("parent"):
            entry["parent"] = str(g["parent"])
        if g["name"] not in parents:
            entry["minAvailable"] = max(int(g.get("minMember") or 0), 1)
        constraint = _topology_constraint(g.get("topologyConstraint"))
        if constraint:
            entry["topology"] = constraint
        out.append(entry)
    return out, [n for n in names if n not in parents]
