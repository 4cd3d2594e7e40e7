"""Every Prometheus metric kaipolicy exports, in one registry of its own.

A leaf: any layer records here, and the server (phase 2 of issue 6) serves `REGISTRY`. Metrics the
reference scheduler also has keep its names (prefix `kai_`); kaipolicy's own start `kaipolicy_`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

REGISTRY = CollectorRegistry()

MALFORMED_OBJECTS = Counter(
    "kaipolicy_malformed_objects",
    "Cluster objects left out of the snapshot because they cannot be used (each object version once).",
    ["kind"], registry=REGISTRY)
