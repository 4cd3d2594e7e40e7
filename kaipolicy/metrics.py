"""Every Prometheus metric kaipolicy exports, in one registry of its own.

A leaf: any layer records here, and the server serves `REGISTRY` on `/metrics`. Metrics the
reference scheduler also has keep its names, types and labels (prefix `kai_`, docs/operations.md);
kaipolicy's own start `kaipolicy_`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

REGISTRY = CollectorRegistry()
#: the reference's buckets for its latency histograms: 5 ms doubling ten times (to 2560 ms)
LATENCY_BUCKETS = tuple(5.0 * 2**i for i in range(10))


class PlainCounter(Collector):
    """A counter exposed under exactly its name, as the reference's Go client exposes
    `kai_podgroups_scheduled_by_action` (no `_total`). prometheus_client would add `_total` to a
    counter's samples, which would break queries written for the reference, so the family is
    typed `untyped`: Prometheus stores and rates it the same way."""

    def __init__(self, name: str, documentation: str, label: str | None) -> None:
        self.name, self.documentation, self.label = name, documentation, label
        self._values: dict[str, float] = {}
        self._lock = threading.Lock()
        REGISTRY.register(self)

    def inc(self, value: str = "", amount: float = 1.0) -> None:
        with self._lock:
            self._values[value] = self._values.get(value, 0.0) + amount

    def get(self, value: str = "") -> float:
        with self._lock:
            return self._values.get(value, 0.0)

    def collect(self) -> Iterator[Metric]:
        family = Metric(self.name, self.documentation, "unknown")
        with self._lock:
            for value, amount in sorted(self._values.items()):
                family.add_sample(self.name, {self.label: value} if self.label else {}, amount)
        yield family


# ---- the reference scheduler's ------------------------------------------------------------------
E2E_LATENCY = Gauge("kai_e2e_scheduling_latency_milliseconds",
                    "Scheduling cycle latency in milliseconds (snapshot, actions, commit), as a gauge",
                    registry=REGISTRY)
OPEN_SESSION_LATENCY = Gauge("kai_open_session_latency_milliseconds",
                             "Open session latency in milliseconds (snapshot and binding the rules), as a gauge",
                             registry=REGISTRY)
CLOSE_SESSION_LATENCY = Gauge("kai_close_session_latency_milliseconds",
                              "Close session latency in milliseconds (writing the decisions), as a gauge",
                              registry=REGISTRY)
ACTION_LATENCY = Gauge("kai_action_scheduling_latency_milliseconds",
                       "Action scheduling latency in milliseconds, as a gauge", ["action"], registry=REGISTRY)
TASK_SCHEDULING_LATENCY = Histogram("kai_task_scheduling_latency_milliseconds",
                                    "Task scheduling latency in milliseconds (pod creation to its BindRequest)",
                                    buckets=LATENCY_BUCKETS, registry=REGISTRY)
TASK_BIND_LATENCY = Histogram("kai_task_bind_latency_milliseconds",
                              "Task bind latency in milliseconds (writing its BindRequest)",
                              buckets=LATENCY_BUCKETS, registry=REGISTRY)
PODGROUPS_SCHEDULED = PlainCounter("kai_podgroups_scheduled_by_action", "Count of podgroups scheduled per action",
                                   "action")
PODGROUPS_CONSIDERED = PlainCounter("kai_podgroups_acted_on_by_action", "Count of podgroups tried per action",
                                    "action")
SCENARIOS_SIMULATED = PlainCounter("kai_scenarios_simulation_by_action", "Count of scenarios simulated per action",
                                   "action")
SCENARIOS_FILTERED = PlainCounter("kai_scenarios_filtered_by_action", "Count of scenarios filtered per action",
                                  "action")
PREEMPTION_ATTEMPTS = PlainCounter("kai_total_preemption_attempts",
                                   "Total preemption attempts in the cluster till now (successful ones, as the "
                                   "reference counts them)", None)
PLUGIN_LATENCY = Gauge("kai_plugin_scheduling_latency_milliseconds",
                       "Plugin scheduling latency in milliseconds (binding its rules to the session), as a gauge",
                       ["plugin", "OnSession"], registry=REGISTRY)
POD_GROUP_EVICTED_PODS = Counter("kai_pod_group_evicted_pods", "Total number of pods evicted per pod group",
                                 ["podgroup", "namespace", "uid", "nodepool", "action"], registry=REGISTRY)
QUEUE_FAIR_SHARE_CPU = Gauge("kai_queue_fair_share_cpu_cores", "CPU Fair share of queue, as a gauge. Value is in Cores",
                             ["queue_name"], registry=REGISTRY)
QUEUE_FAIR_SHARE_MEMORY = Gauge("kai_queue_fair_share_memory_gb",
                                "Memory Fair share of queue, as a gauge. Value is in GB", ["queue_name"],
                                registry=REGISTRY)
QUEUE_FAIR_SHARE_GPU = Gauge("kai_queue_fair_share_gpu", "GPU Fair share of queue, as a gauge. Values in GPU devices",
                             ["queue_name"], registry=REGISTRY)

# ---- kaipolicy's own ------------------------------------------------------------------------------
SNAPSHOTS = Counter(
    "kaipolicy_snapshots",
    "Cycle snapshots of the live cluster by how they were built: delta (from the objects changed since the last "
    "cycle), full (whole: the first, a change the delta does not follow, a resync), fallback (whole after a delta "
    "step failed), drift (a resync found the delta's snapshot differing from the whole one).",
    ["build"], registry=REGISTRY)
MALFORMED_OBJECTS = Counter(
    "kaipolicy_malformed_objects",
    "Cluster objects left out of the snapshot because they cannot be used (each object version once).",
    ["kind"], registry=REGISTRY)
RULE_ERRORS = Counter("kaipolicy_rule_errors", "Rule evaluations that failed at run time (error outcomes)",
                      ["rule"], registry=REGISTRY)
BUNDLE_RELOADS = Counter("kaipolicy_bundle_reloads",
                         "Rule bundles compiled from the shard's ConfigMaps: success (swapped in) or failure "
                         "(refused; the last good bundle keeps running)", ["result"], registry=REGISTRY)
BUNDLE_INFO = Gauge("kaipolicy_bundle_info", "The rule bundle deciding the cycles (1 for the current one)",
                    ["hash", "source"], registry=REGISTRY)
CYCLES = Counter("kaipolicy_cycles", "Scheduling cycles: ok, skipped (not the leader's, or no usable state) or "
                 "error", ["result"], registry=REGISTRY)
API_ERRORS = Counter("kaipolicy_api_errors", "Writes to the API server that failed (each is logged)",
                     ["verb", "kind"], registry=REGISTRY)
GANG_ROLLBACKS = Counter("kaipolicy_gang_rollbacks",
                         "Jobs whose BindRequests were withdrawn because a write failed part-way through",
                         registry=REGISTRY)
EVENTS_SUPPRESSED = Counter("kaipolicy_events_suppressed",
                            "Events not sent: the same message on the same object within the window, or a full "
                            "queue", ["why"], registry=REGISTRY)
LEADER = Gauge("kaipolicy_leader", "1 while this replica holds the leader Lease and schedules", registry=REGISTRY)

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
