"""Every Prometheus metric kaipolicy exports, in one registry of its own.

A leaf: any layer records here, and the server (phase 2 of issue 6) serves `REGISTRY`. Metrics the
reference scheduler also has keep its names (prefix `kai_`); kaipolicy's own start `kaipolicy_`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()

MALFORMED_OBJECTS = Counter(
    "kaipolicy_malformed_objects",
    "Cluster objects left out of the snapshot because they cannot be used (each object version once).",
    ["kind"], registry=REGISTRY)

# ---- the binder (`kaipolicy binder`) --------------------------------------------------------------
BIND_ATTEMPTS = Counter(
    "kaipolicy_binder_bind_attempts",
    "BindRequest attempts by result: succeeded, already_bound, retrying (failed, will retry), failed "
    "(failed for good), interrupted (binder stopping), uncertain (answer lost, looked at again).",
    ["result"], registry=REGISTRY)
BIND_LATENCY = Histogram(
    "kaipolicy_binder_bind_latency_seconds",
    "Duration of one BindRequest attempt, from picking it up to the pod bound or the attempt failed "
    "(a GPU-sharing reservation's wait included).",
    ["result"], buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60),
    registry=REGISTRY)
RESERVATIONS = Counter(
    "kaipolicy_binder_reservations",
    "GPU-sharing reservation pods created and deleted by the binder.", ["action"], registry=REGISTRY)
BIND_QUEUE = Gauge(
    "kaipolicy_binder_queue_depth", "Pods waiting for a binder worker (retries in backoff not counted).",
    registry=REGISTRY)
BINDER_LEADER = Gauge(
    "kaipolicy_binder_leader", "1 while this binder process holds the leader Lease and binds.", registry=REGISTRY)
