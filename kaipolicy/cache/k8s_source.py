"""The live cluster as a source of snapshots: informers over every kind the scheduler reads, each
object converted once per change, and `cycle()` building the ClusterInfo that the scenario file
of the same state builds (both go through the scenario source's builder, so they cannot disagree),
from the objects changed since the last cycle (`delta.py`) or whole.

A malformed object is reported once per version (log line, Event on it, metric
`kaipolicy_malformed_objects_total{kind}`) and left out; it never stops a snapshot.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from kaipolicy import metrics
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.cache import convert, convert_pods, kubeapi, shard
from kaipolicy.cache.assemble import Assembly, Scope, Views, assemble, partition_matches
from kaipolicy.cache.delta import DeltaSnapshot
from kaipolicy.cache.informer import Backoff, Informer
from kaipolicy.cache.kubeapi import Kind, KubeApi, Obj
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.errors import ClusterError, ObjectError

log = logging.getLogger("kaipolicy.cache")

#: what the source watches, the converter of each kind and where its views go in `Views`
KINDS: dict[str, tuple[Kind, Callable[[Obj], Any], str]] = {
    "Pod": (kubeapi.POD, convert_pods.pod, "pods"),
    "PodGroup": (kubeapi.POD_GROUP, convert_pods.pod_group, "pod_groups"),
    "BindRequest": (kubeapi.BIND_REQUEST, convert.bind_request, "bind_requests"),
    "Queue": (kubeapi.QUEUE, convert.queue, "queues"),
    "Node": (kubeapi.NODE, convert.node, "nodes"),
    "Topology": (kubeapi.TOPOLOGY, convert.topology, "topologies"),
    "PriorityClass": (kubeapi.PRIORITY_CLASS, convert.priority_class, "priority_classes"),
}
#: a scheduler without a shard: the reference's built-in actions and its default grace period for
#: stale gangs (the scenario format's own default is 0)
DEFAULT_HEAD: dict[str, Any] = {"actions": ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"],
                                "staleGracePeriodSeconds": 60.0}


class K8sSource:
    """Start it, then call `snapshot()` (or `scenario()`) once per cycle; stop it at the end."""

    def __init__(self, api: KubeApi, scheduler_name: str = "kai-scheduler", shard_name: str | None = None,
                 backoff: Callable[[], Backoff] = Backoff, delta: bool = True) -> None:
        """`delta=False` builds every cycle's snapshot whole (the reference path) instead of from
        the objects changed since the last cycle."""
        self.api, self.scheduler_name, self.shard_name = api, scheduler_name, shard_name
        self.delta = DeltaSnapshot(f"cluster {api.host}") if delta else None
        self._changed: dict[str, set[str]] = {}     # keys converted since the delta last ran
        self.informers: dict[str, Informer] = {}
        self.bundle_informers: dict[tuple[str, str], Informer] = {}   # the shard's rule ConfigMaps
        self._backoff = backoff
        self._lock = threading.Lock()
        self._dirty: dict[str, set[str]] = {k: set() for k in KINDS}
        self._views = Views()
        self._reported: dict[tuple[str, str], tuple[str, str]] = {}    # (kind, key) -> (version, problem)
        self._unusable: dict[tuple[str, str], tuple[ObjectError, Obj]] = {}   # objects that failed to convert
        self._events: queue.Queue[tuple[Kind, Obj, str] | None] = queue.Queue()
        self._event_thread = threading.Thread(target=self._send_events, name="object-events", daemon=True)

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> None:
        """Start every informer and wait until each has listed once."""
        for name, (kind, _, _) in KINDS.items():
            self.informers[name] = Informer(self.api, kind, self._marker(name), backoff=self._backoff())
        if self.shard_name:
            self.informers["SchedulingShard"] = Informer(
                self.api, kubeapi.SCHEDULING_SHARD, lambda key: None,
                field_selector=f"metadata.name={self.shard_name}", backoff=self._backoff())
        self._event_thread.start()
        for informer in self.informers.values():
            informer.start()
        deadline = time.monotonic() + timeout
        for name, informer in self.informers.items():
            if not informer.synced.wait(max(deadline - time.monotonic(), 0.0)):
                self.stop()
                why = f": {informer.last_error}" if informer.last_error else ""
                raise ClusterError(f"no list of {name} objects within {timeout:.0f}s{why}")

    def stop(self) -> None:
        for informer in [*self.informers.values(), *self.bundle_informers.values()]:
            informer.stop()
        if self._event_thread.is_alive():
            self._events.put(None)
            self._event_thread.join(timeout=10)

    def _marker(self, kind: str) -> Callable[[str], None]:
        def mark(key: str) -> None:
            with self._lock:
                self._dirty[kind].add(key)
        return mark

    # ---- the shard ------------------------------------------------------------------------------
    def shard(self) -> shard.ShardView | None:
        """The shard this source serves, converted; None when it runs without one. Raises
        ObjectError when the named shard is missing or malformed: scheduling with the wrong
        partition would take other shards' nodes."""
        if not self.shard_name:
            return None
        obj = self.informers["SchedulingShard"].get(self.shard_name)
        if obj is None:
            raise ObjectError("SchedulingShard", "", self.shard_name, "not found")
        return shard.shard(obj)

    def rule_bundle(self) -> dict[tuple[str, str], dict[str, str] | None] | None:
        """The shard's rule ConfigMaps, (namespace, name) -> their data (file name -> rule file
        text), None for one not listed yet or missing; None when the shard names none and the
        bundled rules apply. Each is watched from the first call that names it."""
        view = self.shard()
        wanted = set(view.bundle) if view else set()
        for key in set(self.bundle_informers) - wanted:
            self.bundle_informers.pop(key).stop()
        for namespace, name in sorted(wanted - set(self.bundle_informers)):
            informer = Informer(self.api, kubeapi.CONFIG_MAP, lambda key: None, namespace=namespace,
                                field_selector=f"metadata.name={name}", backoff=self._backoff())
            self.bundle_informers[(namespace, name)] = informer
            informer.start()
        if not wanted:
            return None
        out: dict[tuple[str, str], dict[str, str] | None] = {}
        for (namespace, name), informer in sorted(self.bundle_informers.items()):
            obj = informer.get(f"{namespace}/{name}") if informer.synced.is_set() else None
            out[(namespace, name)] = None if obj is None else {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
        return out

    # ---- snapshots -------------------------------------------------------------------------------
    def scenario(self, now: float | None = None) -> Assembly:
        """The current state as a scenario document (with where each job and task came from),
        assembled whole."""
        scope, head = self._catch_up()
        out = assemble(self._views, scope, time.time() if now is None else now, head)
        return self._report_all(out, scope)

    def cycle(self, now: float | None = None) -> tuple[Assembly, ClusterInfo]:
        """This cycle's document and ClusterInfo: built from the objects changed since the last
        cycle, or whole when the source runs without the delta. The document is not
        schema-checked: the converters write only valid specs (unit tests check every assembled
        document against the schema, and `kaipolicy snapshot` checks what it writes)."""
        scope, head = self._catch_up()
        now = time.time() if now is None else now
        if self.delta is None:
            out = assemble(self._views, scope, now, head)
            cluster = scenario_from_doc(out.doc, f"cluster {self.api.host}", validate=False).snapshot()
        else:
            changed, self._changed = self._changed, {}
            out, cluster = self.delta.snapshot(self._views, changed, scope, now, head)
        return self._report_all(out, scope), cluster

    def snapshot(self) -> ClusterInfo:
        """This cycle's ClusterInfo (see `cycle`)."""
        return self.cycle()[1]

    def _catch_up(self) -> tuple[Scope, dict[str, Any]]:
        """Convert the objects changed since the last call; this cycle's scope and document head."""
        view = self.shard()
        head = dict(DEFAULT_HEAD)
        if view is not None:
            head |= {"actions": view.actions, "config": view.config}
            if view.params:
                head["params"] = view.params
            if view.stale_grace_seconds is not None:
                head["staleGracePeriodSeconds"] = view.stale_grace_seconds
        scope = Scope(self.scheduler_name, view.partition if view else "")
        with self._lock:
            dirty = {k: v for k, v in self._dirty.items() if v}
            self._dirty = {k: set() for k in KINDS}
        for kind, keys in dirty.items():
            self._convert(kind, keys)
            if self.delta is not None:
                self._changed.setdefault(kind, set()).update(keys)
        return scope, head

    def _report_all(self, out: Assembly, scope: Scope) -> Assembly:
        """Report the objects left out (once per version), and list the unconvertible ones first."""
        unusable = [(e, obj) for k, (e, obj) in sorted(self._unusable.items()) if _in_scope(k[0], obj, scope)]
        for problem, obj in unusable:
            self._report(problem, obj)
        for problem in out.problems:
            self._report(problem)
        out.problems[:0] = [e for e, _ in unusable]
        return out

    def _convert(self, kind: str, keys: set[str]) -> None:
        informer = self.informers[kind]
        _, converter, attr = KINDS[kind]
        views: dict[str, Any] = getattr(self._views, attr)
        for key in keys:
            obj = informer.get(key)
            views.pop(key, None)
            self._unusable.pop((kind, key), None)
            if obj is None:
                self._reported.pop((kind, key), None)
                continue
            try:
                views[key] = convert.safely(converter, kind, obj)
            except ObjectError as e:
                self._unusable[(kind, key)] = (e, obj)

    # ---- reporting -------------------------------------------------------------------------------
    # A problem is reported by the scheduler whose object it is: another shard's or another
    # scheduler's pods are not ours to flag.
    def _report(self, problem: ObjectError, obj: Obj | None = None) -> None:
        """Log, count and send an Event, once per object version and problem."""
        key = f"{problem.namespace}/{problem.name}" if problem.namespace else problem.name
        if obj is None and problem.kind in self.informers:
            obj = self.informers[problem.kind].get(key)
        version = str(((obj or {}).get("metadata") or {}).get("resourceVersion", ""))
        if self._reported.get((problem.kind, key)) == (version, problem.problem):
            return
        self._reported[(problem.kind, key)] = (version, problem.problem)
        log.warning("left out of the snapshot: %s", problem)
        metrics.MALFORMED_OBJECTS.labels(kind=problem.kind).inc()
        if obj is not None:
            kind = KINDS[problem.kind][0] if problem.kind in KINDS else kubeapi.SCHEDULING_SHARD
            self._events.put((kind, obj, problem.problem))

    def _send_events(self) -> None:
        while (item := self._events.get()) is not None:
            kind, obj, message = item
            try:
                self.api.create_event(kind, obj, "NotSchedulable", f"kaipolicy cannot use this object: {message}")
            except ClusterError as e:
                log.warning("could not record an Event: %s", e)
            except Exception:    # the thread outlives a bug: later Events still go
                log.exception("could not record an Event")


def _in_scope(kind: str, obj: Obj, scope: Scope) -> bool:
    meta = obj.get("metadata") or {}
    label = (meta.get("labels") or {}).get(convert.NODE_POOL_LABEL)
    ours = partition_matches(None if label is None else str(label), scope.partition)
    if kind == "Pod":
        spec = obj.get("spec") or {}
        grouped = bool((meta.get("annotations") or {}).get(convert.POD_GROUP_ANNOTATION))
        return bool(spec.get("schedulerName") == scope.scheduler_name and (grouped or ours))
    if kind in ("PodGroup", "Queue", "Node"):
        return ours
    return True
