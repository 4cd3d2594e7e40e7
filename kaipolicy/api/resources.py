"""Resource quantities: what a node has (`Resources`) and what a task asks for (`Request`).

GPUs are floats; a fractional request is `portion` of each of `count` devices. GPU memory is
in MiB, CPU in millicores, memory in bytes. MIG slices are named counts (`nvidia.com/mig-1g.5gb`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

MIN_GPU_DIFF = 0.01
_MIG_NAME = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def mig_gpu_portion(name: str) -> tuple[int, int]:
    """(GPU slices, memory GB) of a MIG resource name; (0, 0) when the name is not one."""
    m = _MIG_NAME.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def extended_gpus(portion: float, count: int) -> float:
    """portion x count in hundredths, as the reference does to keep fractions exact."""
    return round(portion * 100) * count / 100


class RequestType(str, Enum):
    CPU_ONLY = "cpu-only"
    REGULAR = "regular"        # whole GPUs
    FRACTION = "fraction"      # a portion of one or more devices
    GPU_MEMORY = "gpu-memory"  # MiB of one or more devices
    MIG = "mig"                # MIG slices


@dataclass(frozen=True, slots=True)
class Request:
    """What one task asks for."""

    cpu: float = 0.0
    memory: float = 0.0
    count: int = 0            # GPU devices
    portion: float = 0.0      # of each device (1.0 for whole GPUs)
    gpu_memory: int = 0       # MiB per device
    mig: tuple[tuple[str, int], ...] = ()
    kind: RequestType = RequestType.CPU_ONLY
    # derived once: read on every fit check
    gpus: float = field(init=False, repr=False, compare=False, default=0.0)
    gpus_quota: float = field(init=False, repr=False, compare=False, default=0.0)
    is_shared: bool = field(init=False, repr=False, compare=False, default=False)
    needs_gpu: bool = field(init=False, repr=False, compare=False, default=False)
    is_empty: bool = field(init=False, repr=False, compare=False, default=False)
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        gpus = extended_gpus(self.portion, self.count)
        object.__setattr__(self, "gpus", gpus)
        object.__setattr__(self, "gpus_quota", gpus + float(sum(mig_gpu_portion(n)[0] * c for n, c in self.mig)))
        object.__setattr__(self, "is_shared", self.kind in (RequestType.FRACTION, RequestType.GPU_MEMORY))
        object.__setattr__(self, "needs_gpu", gpus > 0 or self.kind in (RequestType.GPU_MEMORY, RequestType.MIG))
        object.__setattr__(self, "is_empty",
                           self.cpu == 0 and self.memory == 0 and gpus <= MIN_GPU_DIFF and not self.mig)
        # requests key the fit masks and memos of every placement: hashed once
        object.__setattr__(self, "_hash", hash((self.cpu, self.memory, self.count, self.portion, self.gpu_memory,
                                                self.mig, self.kind)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Request], tuple[Any, ...]]:
        # built again on unpickling or copying: the kept hash holds string hashes, which differ
        # from process to process
        return (Request, (self.cpu, self.memory, self.count, self.portion, self.gpu_memory, self.mig, self.kind))

    @staticmethod
    def build(cpu: float, memory: float, gpus: float = 0.0, gpu_memory: int = 0, devices: int | None = None,
              mig: dict[str, int] | None = None) -> Request:
        """The request, one object for equal requests (see _interned)."""
        migs = tuple(sorted((k, int(v)) for k, v in (mig or {}).items() if v))
        if migs:
            return _interned(Request(cpu, memory, 0, 0.0, 0, migs, RequestType.MIG))
        if gpu_memory > 0:
            return _interned(Request(cpu, memory, devices or 1, 0.0, gpu_memory, (), RequestType.GPU_MEMORY))
        if gpus >= 1 and devices is None:
            return _interned(Request(cpu, memory, int(gpus), 1.0, 0, (), RequestType.REGULAR))
        if gpus > 0:
            return _interned(Request(cpu, memory, devices or 1, gpus, 0, (), RequestType.FRACTION))
        return _interned(Request(cpu, memory))

    # `gpus`: devices x portion (a GPU-memory request counts 0 here); `gpus_quota`: what queue
    # quota counts, whole or fractional devices plus MIG slices.

    @property
    def mig_gpus(self) -> float:
        return self.gpus_quota - self.gpus

    def with_portion(self, portion: float, gpu_memory: int) -> Request:
        """The request as granted on a node: a fraction resolved against its devices' memory
        (one object per grant: requests never change, and every shared placement asks)."""
        key = (self, portion, gpu_memory)
        made = _GRANTS.get(key)
        if made is None:
            if len(_GRANTS) >= GRANTS_KEPT:
                _GRANTS.clear()
            made = _GRANTS[key] = Request(self.cpu, self.memory, self.count, portion, gpu_memory, self.mig,
                                          self.kind)
        return made


#: Grants (a request resolved on a node) remembered at once.
GRANTS_KEPT = 4096
_GRANTS: dict[tuple[Request, float, int], Request] = {}

#: Requests built so far, one object per request: pods asking alike share it, so the dictionaries
#: and tuples that requests key (fit masks, memos, grants) find it by identity instead of comparing
#: every field. Kept by the fields' types too, so that a request never stands in for one whose
#: numbers print otherwise (1000 and 1000.0 are equal). Cleared past REQUESTS_KEPT.
REQUESTS_KEPT = 65536
_REQUESTS: dict[tuple[Any, ...], Request] = {}


def _interned(req: Request) -> Request:
    if _negative_zero(req.cpu) or _negative_zero(req.memory) or _negative_zero(req.portion):
        return req   # equal to the request with 0.0 there, but not the same numbers
    key = (req, type(req.cpu), type(req.memory), type(req.count), type(req.portion), type(req.gpu_memory))
    kept = _REQUESTS.get(key)
    if kept is None:
        if len(_REQUESTS) >= REQUESTS_KEPT:
            _REQUESTS.clear()
        kept = _REQUESTS[key] = req
    return kept


@dataclass(slots=True)
class Resources:
    """A node's (or a queue's) amounts; mutable, updated as tasks come and go."""

    cpu: float = 0.0
    memory: float = 0.0
    gpus: float = 0.0
    pods: float = 0.0
    mig: dict[str, float] = field(default_factory=dict)

    def clone(self) -> Resources:
        return Resources(self.cpu, self.memory, self.gpus, self.pods, dict(self.mig))

    def add(self, other: Resources, sign: float = 1.0) -> None:
        self.add_amounts(other.cpu, other.memory, other.gpus, other.pods, other.mig.items(), sign)

    def add_amounts(self, cpu: float, memory: float, gpus: float, pods: float,
                    mig: Collection[tuple[str, float]], sign: float) -> None:
        """add() of the amounts as they stand, without a Resources to hold them."""
        self.cpu += sign * cpu
        self.memory += sign * memory
        self.gpus += sign * gpus
        self.pods += sign * pods
        if mig:
            for k, v in mig:
                self.mig[k] = self.mig.get(k, 0.0) + sign * float(v)

    def sub(self, other: Resources) -> None:
        self.add(other, -1.0)

    def plus(self, other: Resources) -> Resources:
        out = self.clone()
        out.add(other)
        return out

    @property
    def mig_gpus(self) -> float:
        if not self.mig:
            return 0.0
        return float(sum(mig_gpu_portion(n)[0] * c for n, c in self.mig.items()))

    def covers(self, req: Request) -> bool:
        """Whether `req` fits in these amounts (the reference's LessEqualResource; every pod
        also takes one pod slot)."""
        if not covers_amounts(req, self.cpu, self.memory, self.gpus, self.pods):
            return False
        for name, n in req.mig:
            if self.mig.get(name, 0) < n:
                return False
        return True


def covers_amounts(req: Request, cpu: float, memory: float, gpus: float, pods: float) -> bool:
    """Resources.covers but for MIG slices, on amounts given one by one."""
    return not (req.cpu > cpu or req.memory > memory or pods < 1 or req.gpus > gpus + 1e-9)


def _negative_zero(value: float) -> bool:
    return value == 0 and math.copysign(1.0, value) < 0
