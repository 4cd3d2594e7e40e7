"""Queues: the tree of departments and leaf queues with quota, limit, weight and priority."""

from __future__ import annotations

from dataclasses import dataclass, field

UNLIMITED = -1.0
RESOURCES = ("cpu", "memory", "gpu")


@dataclass(frozen=True, slots=True)
class Quantities:
    """cpu (millicores), memory (bytes), gpu (devices); -1 means unlimited where allowed."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0

    def get(self, name: str) -> float:
        return float(getattr(self, name))


@dataclass(slots=True, eq=False)
class Queue:
    uid: str
    name: str
    parent: str | None
    priority: int
    deserved: Quantities
    limit: Quantities
    over_quota_weight: Quantities
    created: int                       # creation order: lower is older
    children: list[str] = field(default_factory=list)
    preempt_min_runtime: float | None = None   # seconds
    reclaim_min_runtime: float | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def __repr__(self) -> str:
        return f"Queue({self.name})"
