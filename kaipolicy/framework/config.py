"""Scheduler configuration: actions, plugin tiers with arguments, queue depth, parameters.

Defaults are the reference scheduler's built-in configuration. Unknown action names and
malformed sections are errors here; unknown plugins and arguments are checked against the
rule bundle when the session's plugins are instantiated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kaipolicy.errors import ConfigError

ACTIONS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")
DEFAULT_PLUGINS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("predicates", {}), ("proportion", {}), ("priority", {}), ("elastic", {}), ("kubeflow", {}),
    ("ray", {}), ("nodeavailability", {}), ("gpusharingorder", {}), ("gpupack", {}), ("resourcetype", {}),
    ("subgrouporder", {}), ("taskorder", {}), ("nominatednode", {}), ("dynamicresources", {}),
    ("nodeplacement", {"gpu": "binpack", "cpu": "binpack"}), ("minruntime", {}), ("topology", {}),
    ("snapshot", {}),
)


@dataclass(frozen=True)
class PluginOption:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Params:
    max_consolidation_preemptees: int = 16
    allow_consolidating_reclaim: bool = True
    use_scheduling_signatures: bool = True
    full_hierarchy_fairness: bool = True
    detailed_fit_errors: bool = False
    stale_grace_seconds: float = 60.0

    @staticmethod
    def from_scenario(params: dict[str, Any], stale_grace_seconds: float) -> Params:
        return Params(
            max_consolidation_preemptees=int(params.get("maxConsolidationPreemptees", 16)),
            allow_consolidating_reclaim=bool(params.get("allowConsolidatingReclaim", True)),
            use_scheduling_signatures=bool(params.get("useSchedulingSignatures", True)),
            full_hierarchy_fairness=bool(params.get("fullHierarchyFairness", True)),
            detailed_fit_errors=bool(params.get("detailedFitErrors", False)),
            stale_grace_seconds=stale_grace_seconds,
        )


@dataclass(frozen=True)
class SchedulerConfig:
    actions: tuple[str, ...] = ACTIONS
    tiers: tuple[tuple[PluginOption, ...], ...] = (tuple(PluginOption(n, dict(a)) for n, a in DEFAULT_PLUGINS),)
    queue_depth: dict[str, int] = field(default_factory=dict)
    params: Params = Params()

    def plugins(self) -> list[PluginOption]:
        return [p for tier in self.tiers for p in tier]

    def depth(self, action: str) -> int | None:
        return self.queue_depth.get(action)


def config_from(doc: dict[str, Any] | None, actions: list[str] | None = None,
                params: Params | None = None, where: str = "config") -> SchedulerConfig:
    """Build a configuration from a scheduler-config mapping (scenario `config` or a shard's)."""
    doc = doc or {}
    chosen = tuple(actions) if actions is not None else _actions(doc.get("actions"), where)
    for a in chosen:
        if a not in ACTIONS:
            raise ConfigError(f"{where}: unknown action {a!r} (known: {', '.join(ACTIONS)})")
    tiers = SchedulerConfig().tiers
    if doc.get("tiers") is not None:
        tiers = tuple(_tier(t, i, where) for i, t in enumerate(doc["tiers"]))
    depth = {}
    for k, v in (doc.get("queueDepthPerAction") or {}).items():
        if k not in ACTIONS:
            raise ConfigError(f"{where}.queueDepthPerAction: unknown action {k!r}")
        depth[k] = int(v)
    return SchedulerConfig(chosen, tiers, depth, params or Params())


def _actions(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ACTIONS
    if isinstance(value, str):
        return tuple(a.strip() for a in value.split(",") if a.strip())
    if isinstance(value, list):
        return tuple(str(a) for a in value)
    raise ConfigError(f"{where}.actions: expected a comma-separated string or a list")


def _tier(tier: Any, index: int, where: str) -> tuple[PluginOption, ...]:
    if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
        raise ConfigError(f"{where}.tiers[{index}]: expected a mapping with a 'plugins' list")
    out = []
    for p in tier["plugins"]:
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise ConfigError(f"{where}.tiers[{index}].plugins: every plugin needs a 'name'")
        out.append(PluginOption(p["name"], dict(p.get("arguments") or {})))
    return tuple(out)
