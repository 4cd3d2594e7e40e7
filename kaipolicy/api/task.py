"""Tasks (pods) and their statuses, with the reference's status groups."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from kaipolicy.api.resources import Request, RequestType


class Status(str, Enum):
    PENDING = "Pending"
    GATED = "Gated"
    ALLOCATED = "Allocated"
    PIPELINED = "Pipelined"
    BINDING = "Binding"
    BOUND = "Bound"
    RUNNING = "Running"
    RELEASING = "Releasing"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


S = Status
ACTIVE_USED = frozenset({S.ALLOCATED, S.PIPELINED, S.BINDING, S.BOUND, S.RUNNING, S.RELEASING})
ACTIVE_ALLOCATED = frozenset({S.ALLOCATED, S.PIPELINED, S.BINDING, S.BOUND, S.RUNNING})
ALIVE = frozenset({S.ALLOCATED, S.PIPELINED, S.BINDING, S.BOUND, S.RUNNING, S.PENDING, S.GATED})
ALLOCATED = frozenset({S.ALLOCATED, S.BOUND, S.BINDING, S.RUNNING})
HOLDS_NODE = frozenset({S.ALLOCATED, S.PIPELINED, S.BINDING, S.BOUND, S.RUNNING, S.RELEASING})

DEFAULT_SUB_GROUP = "default"
WHOLE_GPU = "-2"  # marks "a whole idle device" among the GPUs a shared task may take


def qualified(namespace: str, name: str) -> str:
    """namespace/name, as messages name a pod or a job. A live cluster's snapshot already names its
    tasks and jobs `namespace/name` (they must be unique across namespaces): those are not prefixed
    a second time."""
    return name if name.startswith(f"{namespace}/") else f"{namespace}/{name}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node-selector requirement: `key` `operator` `values` (In, NotIn, Exists, DoesNotExist,
    Gt, Lt), as in a pod's required node affinity."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A node-selector term: every expression (on labels) and field (`metadata.name`) holds."""

    expressions: tuple[Requirement, ...] = ()
    fields: tuple[Requirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Toleration:
    """Tolerates taints with this key (any key when empty and `Exists`), value and effect
    (every effect when empty)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class PodAffinity:
    labels: tuple[tuple[str, str], ...]
    topology_key: str | None = None
    anti_topology_key: str | None = None


@dataclass(slots=True, eq=False)
class Task:
    """One pod. Mutable: the statement changes status, node and GPU groups (never its name or
    namespace)."""

    uid: str
    name: str
    namespace: str
    job: str                     # uid of its job
    request: Request
    status: Status
    node: str = ""
    gpu_groups: list[str] = field(default_factory=list)
    sub_group: str = DEFAULT_SUB_GROUP
    priority: int | None = None  # order inside the job; None = no label
    labels: dict[str, str] = field(default_factory=dict)
    node_affinity: tuple[str, ...] = ()   # values of the node label kai.scheduler/type (scenario shorthand)
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity_terms: tuple[AffinityTerm, ...] = ()   # required node affinity: one term must hold
    tolerations: tuple[Toleration, ...] = ()
    pod_affinity: PodAffinity | None = None
    legacy_mig: bool = False
    created: float = 0.0         # seconds since the epoch of the scenario
    order: int = 0               # position in the input, the last tie-break
    # the request as granted on its node (fractions resolved against that node's GPU memory)
    accepted: Request | None = None
    is_virtual: bool = False
    #: a pipeline left in effect (committed, or left applied by an eviction action, see
    #: Statement.note_moved) moved it off a node that still lists it (Releasing there): placing it
    #: on that node again cancels its latest eviction wherever that was, and takes no room on the
    #: node it is placed on, as the reference's Pipeline does
    listed_elsewhere: bool = False
    #: namespace/name (see `qualified`), made once: a task's name and namespace never change, and
    #: nodes and statements look tasks up by it on every placement and eviction
    key: str = field(init=False, repr=False, default="")

    def __post_init__(self) -> None:
        self.key = qualified(self.namespace, self.name)

    @property
    def is_shared_allocation(self) -> bool:
        return self.accepted is not None and self.accepted.is_shared

    @property
    def has_node_affinity(self) -> bool:
        """The pod restricts its nodes by label (selector or required node affinity)."""
        return bool(self.node_affinity or self.node_selector or self.affinity_terms)

    @property
    def cpu_only(self) -> bool:
        return not self.request.needs_gpu

    # ---- read-only names the rules see ------------------------------------------------------
    @property
    def gpus(self) -> float:
        return self.request.gpus

    @property
    def gpu_memory_mib(self) -> int:
        return self.request.gpu_memory

    @property
    def gpu_devices(self) -> int:
        return self.request.count

    @property
    def cpu_millis(self) -> float:
        return self.request.cpu

    @property
    def memory_bytes(self) -> float:
        return self.request.memory

    @property
    def shared_gpu(self) -> bool:
        return self.request.is_shared

    @property
    def mig_request(self) -> bool:
        return self.request.kind == RequestType.MIG

    @property
    def state(self) -> str:
        return self.status.value

    def should_allocate(self, real: bool) -> bool:
        return self.status == Status.PENDING or (not real and self.status == Status.RELEASING and self.is_virtual)

    def __repr__(self) -> str:
        return f"Task({self.name}, {self.status.value}, {self.node or '-'})"
