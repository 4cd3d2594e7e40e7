"""A SchedulingShard -> the scheduler configuration it stands for, rendered the way the reference's
operator renders a shard: default plugins and actions with priorities, the placement strategy's
choices, the shard's overrides, then everything enabled in descending priority.

Also the shard's partition (which nodes, queues and pod groups it serves) and `ruleBundle`, the
ConfigMaps holding its rule files (a kaipolicy addition; none = the bundled rules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaipolicy.cache import kubeapi
from kaipolicy.cache.convert import Meta, go_duration, meta
from kaipolicy.cache.kubeapi import Obj

PLUGIN_PRIORITIES = {
    "predicates": 1900, "proportion": 1800, "priority": 1700, "nodeavailability": 1600, "resourcetype": 1500,
    "podaffinity": 1400, "elastic": 1300, "kubeflow": 1200, "ray": 1100, "subgrouporder": 1000, "taskorder": 900,
    "nominatednode": 800, "dynamicresources": 700, "minruntime": 600, "topology": 500, "snapshot": 400,
    "gpupack": 300, "gpuspread": 300, "nodeplacement": 200, "gpusharingorder": 100,
}
ACTION_PRIORITIES = {"allocate": 500, "consolidation": 400, "reclaim": 300, "preempt": 200, "stalegangeviction": 100}
STRATEGIES = ("binpack", "spread")

#: scheduler flags (a shard's `args`) that are scenario params: flag -> (param, parse)
FLAG_PARAMS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "max-consolidation-preemptees": ("maxConsolidationPreemptees", lambda v: _count(int(v))),
    "allow-consolidating-reclaim": ("allowConsolidatingReclaim", lambda v: v.lower() == "true"),
    "use-scheduling-signatures": ("useSchedulingSignatures", lambda v: v.lower() == "true"),
    "full-hierarchy-fairness": ("fullHierarchyFairness", lambda v: v.lower() == "true"),
    "detailed-fit-errors": ("detailedFitErrors", lambda v: v.lower() == "true"),
}


@dataclass(frozen=True)
class ShardView:
    meta: Meta
    partition: str
    actions: list[str] = field(hash=False)
    config: dict[str, Any] = field(hash=False)        # scenario `config`: tiers, queueDepthPerAction
    params: dict[str, Any] = field(hash=False)
    stale_grace_seconds: float | None
    bundle: tuple[tuple[str, str], ...]               # (namespace, name) of the rule ConfigMaps


def shard(obj: Obj) -> ShardView:
    m = meta(kubeapi.SCHEDULING_SHARD, obj)
    spec = obj.get("spec") or {}
    placement = spec.get("placementStrategy") or {}
    gpu, cpu = placement.get("gpu") or "binpack", placement.get("cpu") or "binpack"
    if gpu not in STRATEGIES or cpu not in STRATEGIES:
        raise m.problem(f"spec.placementStrategy: {gpu!r}/{cpu!r}: each must be binpack or spread")
    depth = {str(k): int(v) for k, v in (spec.get("queueDepthPerAction") or {}).items()}
    actions = _actions(spec, gpu, cpu)
    for name in sorted(set(actions) | set(depth)):
        if name not in ACTION_PRIORITIES:
            raise m.problem(f"unknown action {name!r} (kaipolicy runs {', '.join(ACTION_PRIORITIES)})")
    if any(v < 0 for v in depth.values()):
        raise m.problem("spec.queueDepthPerAction: a depth cannot be negative")
    config: dict[str, Any] = {"tiers": [{"plugins": _plugins(m, spec, gpu, cpu)}]}
    if depth:
        config["queueDepthPerAction"] = depth
    params, grace = _params(m, spec.get("args") or {})
    bundle = tuple((str(c.get("namespace", "")), str(c.get("name", "")))
                   for c in (spec.get("ruleBundle") or {}).get("configMaps") or [])
    return ShardView(m, str(spec.get("partitionLabelValue") or ""), actions, config, params, grace, bundle)


def _plugins(m: Meta, spec: Obj, gpu: str, cpu: str) -> list[dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {n: {"enabled": True, "priority": p, "arguments": {}}
                                        for n, p in PLUGIN_PRIORITIES.items()}
    table["gpusharingorder"]["enabled"] = table["gpupack"]["enabled"] = gpu == "binpack"
    table["gpuspread"]["enabled"] = gpu == "spread"
    table["nodeplacement"]["arguments"] = {"gpu": gpu, "cpu": cpu}
    if spec.get("kValue") is not None:
        table["proportion"]["arguments"]["kValue"] = str(spec["kValue"])
    runtime = spec.get("minRuntime") or {}
    for key, arg in (("preemptMinRuntime", "defaultPreemptMinRuntime"), ("reclaimMinRuntime", "defaultReclaimMinRuntime")):
        if runtime.get(key):
            table["minruntime"]["arguments"][arg] = str(runtime[key])
    for name, override in (spec.get("plugins") or {}).items():
        _override(table, str(name), override or {}, with_arguments=True)
    return [{"name": n, "arguments": dict(c["arguments"])} for n, c in _ordered(table)]


def _actions(spec: Obj, gpu: str, cpu: str) -> list[str]:
    table: dict[str, dict[str, Any]] = {n: {"enabled": True, "priority": p} for n, p in ACTION_PRIORITIES.items()}
    # consolidation packs nodes: the operator turns it off when either strategy spreads
    table["consolidation"]["enabled"] = gpu != "spread" and cpu != "spread"
    for name, override in (spec.get("actions") or {}).items():
        _override(table, str(name), override or {}, with_arguments=False)
    return [n for n, _ in _ordered(table)]


def _override(table: dict[str, dict[str, Any]], name: str, override: Obj, with_arguments: bool) -> None:
    entry = table.setdefault(name, {"enabled": True, "priority": 0, "arguments": {}})
    if override.get("enabled") is not None:
        entry["enabled"] = bool(override["enabled"])
    if override.get("priority") is not None:
        entry["priority"] = int(override["priority"])
    if with_arguments and override.get("arguments") is not None:
        entry["arguments"] = {str(k): str(v) for k, v in override["arguments"].items()}


def _ordered(table: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(((n, c) for n, c in table.items() if c["enabled"]), key=lambda nc: (-nc[1]["priority"], nc[0]))


def _count(n: int) -> int:
    if n < 0:
        raise ValueError("cannot be negative")
    return n


def _params(m: Meta, args: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    params: dict[str, Any] = {}
    grace = None
    for flag, value in args.items():
        text = str(value)
        try:
            if flag in FLAG_PARAMS:
                name, parse = FLAG_PARAMS[flag]
                params[name] = parse(text)
            elif flag == "default-staleness-grace-period":
                grace = go_duration(text)
        except ValueError as e:
            raise m.problem(f"spec.args[{flag}]: {text!r}: {e}") from e
    return params, grace

