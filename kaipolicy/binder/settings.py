"""What a binder process is told (flags of `kaipolicy binder`), as frozen values, and the names of
the GPU-sharing protocol it shares with KAI Scheduler (labels, annotations, namespace)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaipolicy.cache.lease import LeaseTimings

GPU_GROUP_LABEL = "runai-gpu-group"                   # a pod's shared GPU group (one device)
MULTI_GROUP_PREFIX = GPU_GROUP_LABEL + "/"            # one label per group for a multi-device share
RECEIVED_TYPE_ANNOTATION = "received-resource-type"   # Regular | Fraction | MigInstance, set before binding
DEVICE_ANNOTATION = "run.ai/reserve_for_gpu_index"    # the reservation pod writes its GPU's UUID here
POD_BOUND = "PodBound"                                # the pod condition the binder sets
SHARED = "Fraction"                                   # receivedResourceType of a GPU-sharing placement


@dataclass(frozen=True)
class ReservationSettings:
    """The reservation pods: one per shared GPU group, holding the whole device on its node."""

    namespace: str = "kai-resource-reservation"
    image: str = "ghcr.io/nvidia/kai-scheduler/resourcereservation:v0.20.1"
    service_account: str = "kai-resource-reservation"
    app_label: str = "kai-resource-reservation"
    runtime_class: str = ""
    timeout: float = 40.0            # seconds for a new reservation pod to report its GPU


@dataclass(frozen=True)
class BinderSettings:
    scheduler_name: str = "kai-scheduler"
    workers: int = 10
    retry_base: float = 1.0          # seconds before the first retry; doubled after each failure
    retry_limit: float = 60.0        # the longest wait between attempts
    resync: float = 60.0             # seconds between sweeps for unused reservations
    reservations: ReservationSettings = field(default_factory=ReservationSettings)
    leader_election: bool = True
    lease_namespace: str = "default"
    lease_name: str = "kaipolicy-binder"
    lease: LeaseTimings = field(default_factory=LeaseTimings)

    def retry_delay(self, failed_attempts: int) -> float:
        """Seconds before the next attempt after `failed_attempts` failures (1, 2, 4... times the base)."""
        return float(min(self.retry_base * 2 ** max(failed_attempts - 1, 0), self.retry_limit))
