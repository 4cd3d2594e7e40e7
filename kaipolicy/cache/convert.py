"""Kubernetes objects (the API's JSON) -> what the scheduler reads of each, in scenario-format terms.

One function per kind reads one object alone and raises `ObjectError` naming it when it cannot be
used (a bad annotation, a negative quantity); joining objects (pods into jobs, BindRequests onto
pods, partitions) is `assemble.py`'s work. Annotations and labels are read as the reference does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import Kind, Obj
from kaipolicy.errors import ObjectError

POD_GROUP_ANNOTATION = "pod-group-name"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_FRACTION_DEVICES = "gpu-fraction-num-devices"
QUEUE_LABEL = "kai.scheduler/queue"
SUB_GROUP_LABEL = "kai.scheduler/subgroup-name"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
TASK_PRIORITY_LABEL = "kai.scheduler/task-priority"
GPU_GROUP_LABEL = "runai-gpu-group"
LAST_START_ANNOTATION = "kai.scheduler/last-start-timestamp"
STALE_SINCE_ANNOTATION = "kai.scheduler/stale-podgroup-timestamp"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
MIG_PREFIX = "nvidia.com/mig-"
NODE_CONDITIONS = {"Ready": "NotReady", "MemoryPressure": "MemoryPressure", "DiskPressure": "DiskPressure",
                   "PIDPressure": "PIDPressure", "NetworkUnavailable": "NetworkUnavailable"}
_MIB = 1024 * 1024


@dataclass(frozen=True)
class Meta:
    kind: str
    namespace: str
    name: str
    uid: str
    created: float                  # seconds since the epoch
    labels: dict[str, str] = field(hash=False)

    @property
    def partition(self) -> str | None:
        """The node-pool label's value; None when the object does not carry the label."""
        return self.labels.get(NODE_POOL_LABEL)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def problem(self, message: str) -> ObjectError:
        return ObjectError(self.kind, self.namespace, self.name, message)


@dataclass(frozen=True)
class PodView:
    meta: Meta
    scheduler: str
    phase: str                      # Pending, Running, Succeeded or Failed
    node: str                       # spec.nodeName
    deleting: bool
    gated: bool
    group: str                      # the pod-group-name annotation, '' when none
    queue: str                      # the queue label, '' when none
    priority_class: str
    preemptibility: str
    task: dict[str, Any] = field(hash=False)      # scenario task spec, without state and node
    usage: dict[str, float] = field(hash=False)   # cpuMillis, memoryBytes, gpus it holds on a node


@dataclass(frozen=True)
class PodGroupView:
    meta: Meta
    queue: str
    priority_class: str
    preemptibility: str
    sub_groups: frozenset[str]      # leaf sub-groups: the names pods may carry
    job: dict[str, Any] = field(hash=False)       # scenario job spec, without name, queue, priority, tasks


@dataclass(frozen=True)
class BindRequestView:
    meta: Meta
    pod: str
    node: str
    gpu_groups: tuple[str, ...]
    failed: bool                    # failed for good: the pod is free to be placed again
    pod_uid: str = ""               # the pod its owner reference names ('' when it names none)


@dataclass(frozen=True)
class QueueView:
    meta: Meta
    parent: str
    queue: dict[str, Any] = field(hash=False)     # scenario queue spec, without creationOrder


@dataclass(frozen=True)
class NodeView:
    meta: Meta
    node: dict[str, Any] = field(hash=False)      # scenario node spec, without otherPods


@dataclass(frozen=True)
class TopologyView:
    meta: Meta
    levels: tuple[str, ...]


@dataclass(frozen=True)
class PriorityClassView:
    meta: Meta
    value: int
    global_default: bool


View = PodView | PodGroupView | BindRequestView | QueueView | NodeView | TopologyView | PriorityClassView
V = TypeVar("V")


def safely(read: Callable[[Obj], V], kind: str, obj: Obj) -> V:
    """`read(obj)`, with any failure an ObjectError naming the object: an object of a shape the
    readers did not expect is left out like a malformed one, never the end of a snapshot."""
    try:
        return read(obj)
    except ObjectError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError) as e:
        m = obj.get("metadata") if isinstance(obj, dict) else None
        m = m if isinstance(m, dict) else {}
        raise ObjectError(kind, str(m.get("namespace") or ""), str(m.get("name") or "?"),
                          f"cannot be read: {type(e).__name__}: {e}") from e


# ---- shared readers ---------------------------------------------------------------------------
def meta(kind: Kind, obj: Obj) -> Meta:
    m = obj.get("metadata") or {}
    return Meta(kind.kind, str(m.get("namespace") or ""), str(m.get("name") or ""), str(m.get("uid") or ""),
                timestamp(m.get("creationTimestamp")) or 0.0,
                {str(k): str(v) for k, v in (m.get("labels") or {}).items()})


def timestamp(value: Any) -> float | None:
    """An RFC 3339 time as seconds since the epoch; None when absent. ValueError when malformed."""
    if not value:
        return None
    return datetime.fromisoformat(str(value)).timestamp()


def amount(m: Meta, where: str, value: Any) -> Decimal:
    try:
        q = kubeapi.quantity(value)
    except ValueError as e:
        raise m.problem(f"{where}: {e}") from e
    if q < 0:
        raise m.problem(f"{where}: negative quantity {value!r}")
    return q


def whole_number(m: Meta, where: str, value: Any, minimum: int = 0) -> int:
    try:
        n = int(str(value).strip())
    except ValueError as e:
        raise m.problem(f"{where}: {value!r} is not an integer") from e
    if n < minimum:
        raise m.problem(f"{where}: {value!r} is below {minimum}")
    return n


# ---- nodes ------------------------------------------------------------------------------------
def node(obj: Obj) -> NodeView:
    m = meta(kubeapi.NODE, obj)
    alloc = (obj.get("status") or {}).get("allocatable") or {}
    amounts = {k: amount(m, f"status.allocatable[{k}]", v) for k, v in alloc.items()}
    spec: dict[str, Any] = {"name": m.name, "labels": dict(m.labels),
                            "cpuMillis": int(amounts.get("cpu", Decimal(0)) * 1000),
                            "memoryBytes": int(amounts.get("memory", Decimal(0))),
                            "maxPods": int(amounts.get("pods", Decimal(0))),
                            "gpus": int(amounts.get(GPU_RESOURCE, Decimal(0)))}
    mig = {k: int(v) for k, v in amounts.items() if k.startswith(MIG_PREFIX) and v > 0}
    if mig:
        spec["mig"] = mig
    if m.labels.get(MIG_STRATEGY_LABEL) in ("single", "mixed"):
        spec["migStrategy"] = m.labels[MIG_STRATEGY_LABEL]
    memory = _gpu_memory(m.labels.get(GPU_MEMORY_LABEL))
    if memory is None:
        spec["gpuMemorySynced"] = False
    else:
        spec["gpuMemoryMiB"] = memory
    node_spec = obj.get("spec") or {}
    if node_spec.get("unschedulable"):
        spec["unschedulable"] = True
    taints = [{"key": t["key"], "value": str(t.get("value", "")), "effect": t["effect"]}
              for t in node_spec.get("taints") or [] if t.get("key") and t.get("effect")]
    if taints:
        spec["taints"] = taints
    conditions = _bad_conditions((obj.get("status") or {}).get("conditions") or [])
    if conditions:
        spec["conditions"] = conditions
    return NodeView(m, spec)


def _gpu_memory(label: str | None) -> int | None:
    """MiB of one GPU from the GPU-feature-discovery label, floored to 100 as the reference does
    (some versions wrote bytes: a value of a TiB or more is read as bytes)."""
    try:
        value = int(label) if label is not None else None
    except ValueError:
        return None
    if value is None or value <= 0:
        return None
    if value >= _MIB:
        value //= _MIB
    return value - value % 100


def _bad_conditions(conditions: list[Obj]) -> list[str]:
    bad = []
    for c in conditions:
        name = NODE_CONDITIONS.get(str(c.get("type")))
        healthy = "True" if c.get("type") == "Ready" else "False"
        if name and c.get("status") != healthy:
            bad.append(name)
    return bad


# ---- queues, topologies, priority classes -------------------------------------------------------
_QUEUE_KEYS = (("quota", "deserved"), ("limit", "limit"), ("overQuotaWeight", "overQuotaWeight"))


def queue(obj: Obj) -> QueueView:
    m = meta(kubeapi.QUEUE, obj)
    spec = obj.get("spec") or {}
    resources = spec.get("resources") or {}
    out: dict[str, Any] = {"name": m.name, "priority": int(spec.get("priority", 100))}
    for crd_key, scenario_key in _QUEUE_KEYS:
        # an absent amount is 0, as in the reference (Go zero values): limit 0 admits nothing
        out[scenario_key] = {r: _queue_amount(m, r, crd_key, (resources.get(r) or {}).get(crd_key, 0))
                             for r in ("gpu", "cpu", "memory")}
    for crd_key, scenario_key in (("preemptMinRuntime", "preemptMinRuntimeSeconds"),
                                  ("reclaimMinRuntime", "reclaimMinRuntimeSeconds")):
        if spec.get(crd_key):
            out[scenario_key] = _duration(m, f"spec.{crd_key}", spec[crd_key])
            if out[scenario_key] < 0:
                raise m.problem(f"spec.{crd_key}: {spec[crd_key]!r} is negative")
    parent = str(spec.get("parentQueue") or "")
    if parent:
        out["parent"] = parent
    return QueueView(m, parent, out)


def _queue_amount(m: Meta, resource: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise m.problem(f"spec.resources.{resource}.{key}: {value!r} is not a number")
    amount = float(value)
    if key == "overQuotaWeight" and amount < 0 or key != "overQuotaWeight" and amount < 0 and amount != -1:
        raise m.problem(f"spec.resources.{resource}.{key}: {value!r} is negative")
    # memory quota and limit are in megabytes (10^6 bytes) in the Queue, bytes in the model
    return amount * 1e6 if resource == "memory" and key != "overQuotaWeight" and amount > 0 else amount


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float:
    """A Go duration ("1h30m", "90s", "-1s") in seconds; ValueError when it is not one."""
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text)
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)", body)
    if body == "0":
        return 0.0
    if not parts or "".join(n + u for n, u in parts) != body:
        raise ValueError("not a duration like 30m or 1h30m")
    return sign * sum(float(n) * _UNITS[u] for n, u in parts)


def _duration(m: Meta, where: str, text: Any) -> float:
    try:
        return go_duration(str(text))
    except ValueError as e:
        raise m.problem(f"{where}: {text!r} is {e}") from e


def topology(obj: Obj) -> TopologyView:
    m = meta(kubeapi.TOPOLOGY, obj)
    levels = tuple(str(level.get("nodeLabel", "")) for level in (obj.get("spec") or {}).get("levels") or [])
    if not levels or not all(levels):
        raise m.problem("spec.levels: every level needs a nodeLabel")
    return TopologyView(m, levels)


def priority_class(obj: Obj) -> PriorityClassView:
    m = meta(kubeapi.PRIORITY_CLASS, obj)
    return PriorityClassView(m, int(obj.get("value", 0)), bool(obj.get("globalDefault", False)))


def bind_request(obj: Obj) -> BindRequestView:
    m = meta(kubeapi.BIND_REQUEST, obj)
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    limit = spec.get("backoffLimit")
    # failed for good: the binder gave up (no limit, or the attempts reached it)
    failed = status.get("phase") == "Failed" and (limit is None or int(status.get("failedAttempts", 0)) >= int(limit))
    owner = next((str(o.get("uid") or "") for o in (obj.get("metadata") or {}).get("ownerReferences") or []
                  if o.get("kind") == "Pod"), "")
    return BindRequestView(m, str(spec.get("podName") or ""), str(spec.get("selectedNode") or ""),
                           tuple(str(g) for g in spec.get("selectedGPUGroups") or ()), failed, owner)
