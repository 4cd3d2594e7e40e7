"""Values the framework stamps: outcomes with closed codes, bind and eviction records."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Code(str, Enum):
    OK = "ok"
    DENY = "deny"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one hook decided, and which rule decided it (plugin/rule at file:line)."""

    code: Code
    rule: str = ""
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.OK


OK = Outcome(Code.OK)


@dataclass(slots=True)
class BindRecord:
    job: str
    task: str
    namespace: str
    node: str
    gpu_groups: list[str]
    gpus: float
    action: str
    annotations: dict[str, str] = field(default_factory=dict)   # from bindRequestMutate rules


@dataclass(slots=True)
class EvictionRecord:
    job: str
    task: str
    namespace: str
    node: str
    action: str
    message: str
    reason: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class PipelineRecord:
    job: str
    task: str
    node: str
    action: str
    message: str
