"""A live snapshot built from what changed since the last cycle: the informers say which objects
changed, and only the jobs and nodes those touch are assembled and built again. The pieces are
kept pristine (no session ever sees them); each cycle gets copies (`api/copies.py`).

The full rebuild (`assemble` then the scenario builder) stays the reference: every piece here is
made by the same functions, a change this does not follow piece by piece (a node or queue tree
that comes or goes, priority classes, topologies, another partition) rebuilds everything, and
any failure of a step logs why and rebuilds everything too. tests/unit/cache/test_delta.py
drives random informer events and compares every cycle with the full rebuild.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kaipolicy import metrics
from kaipolicy.api.copies import copy_job, copy_node
from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import HOLDS_NODE
from kaipolicy.cache.assemble import (
    Assembly,
    JobBuilder,
    JobPiece,
    Scope,
    Views,
    _bind_requests,
    _queues,
    document,
    other_pods_on,
    retime,
)
from kaipolicy.cache.convert import BindRequestView
from kaipolicy.cache.scenario_source import job_model, node_model, queues_model, spec_clock, topologies_model
from kaipolicy.errors import ObjectError, ScenarioError

log = logging.getLogger("kaipolicy.cache")

#: a job of the document: ("PodGroup", its key) or ("Pod", the key of a pod that names no group)
Unit = tuple[str, str]
#: kinds whose change this does not follow object by object
_GLOBAL = ("PriorityClass", "Topology")


class Rebuild(Exception):
    """A change the delta does not follow piece by piece: rebuild everything (not a failure)."""


@dataclass
class _Piece:
    piece: JobPiece
    model: Job | None                       # pristine: no session sees it
    nodes: set[str] = field(default_factory=set)   # where its tasks hold resources


@dataclass
class Stats:
    full: int = 0            # cycles built from scratch (the first, global changes, failures)
    delta: int = 0           # cycles built from their changes
    failures: int = 0        # delta steps that failed (each followed by a full rebuild)
    drifts: int = 0          # resyncs that found the delta's snapshot differing from the whole one
    jobs: int = 0            # jobs assembled and built again in the last cycle
    nodes: int = 0           # nodes built again in the last cycle


class DeltaSnapshot:
    """Call `snapshot()` once per cycle with the views and the keys (by kind) changed since the
    last call; None as the changes rebuilds everything. Every `resync_every`-th cycle is built
    both ways and the whole one used: a delta that drifted is logged as an error and lasts at
    most that many cycles."""

    def __init__(self, file: str = "<cluster>", resync_every: int = 300) -> None:
        self.file = file                   # names the source in a ScenarioError, as the full build's
        self.resync_every = resync_every
        self.cycles = 0
        self.stats = Stats()
        self._primed = False
        self._reset(Scope())

    def _reset(self, scope: Scope) -> None:
        self.scope = scope
        self.node_names: list[str] = []
        self.node_set: set[str] = set()
        self.node_specs: dict[str, dict[str, Any]] = {}
        self.node_models: dict[str, Node] = {}
        self.queue_specs: list[dict[str, Any]] = []
        self.queue_problems: list[ObjectError] = []
        self.leaves: set[str] = set()
        self.queue_names: set[str] = set()
        self.bind: dict[tuple[str, str], BindRequestView] = {}
        self.requests_of: dict[tuple[str, str], set[str]] = {}   # (namespace, pod) -> BindRequest keys
        self.request_pod: dict[str, tuple[str, str]] = {}        # BindRequest key -> (namespace, pod)
        self.members: dict[str, set[str]] = {}       # PodGroup key -> keys of this scheduler's pods naming it
        self.unit_of: dict[str, Unit] = {}           # pod key -> the job it belongs to (this scheduler's pods)
        self.node_of: dict[str, str] = {}            # pod key -> spec.nodeName (every pod)
        self.pods_on: dict[str, set[str]] = {}       # node -> keys of the pods naming it
        self.pieces: dict[Unit, _Piece] = {}
        self.order: list[tuple[tuple[float, str], Unit]] = []   # units with a job, in document order
        self.units_on: dict[str, set[Unit]] = {}     # node -> units with tasks holding resources there
        self.placed: set[str] = set()                # pod keys that are tasks
        self.origins: dict[str, tuple[str, str, str, str]] = {}
        self.named_by: dict[str, Unit] = {}          # origin name -> the job whose entry it is
        self.shadowed: dict[str, set[Unit]] = {}     # origin name -> other jobs naming it (rare)
        self.with_problems: set[Unit] = set()

    # ---- one cycle --------------------------------------------------------------------------------
    def snapshot(self, views: Views, changed: dict[str, set[str]] | None, scope: Scope, now: float,
                 head: dict[str, Any]) -> tuple[Assembly, ClusterInfo]:
        self.cycles += 1
        why = self._why_full(changed, scope)
        if why is None and changed is not None:
            try:
                self._apply(views, changed)
            except Rebuild as e:
                why = str(e)
            except Exception as e:    # never a wrong snapshot: whatever failed, start afresh
                self.stats.failures += 1
                metrics.SNAPSHOTS.labels(build="fallback").inc()
                why = f"the delta failed ({type(e).__name__}: {e})"
                log.warning("snapshot: %s; rebuilding it whole", why, exc_info=True)
        if why is None and self.resync_every and self.cycles % self.resync_every == 0:
            return self._resync(views, now, head)
        if why is not None:
            log.debug("snapshot: full rebuild: %s", why)
            self._rebuild(views, scope)
        else:
            self.stats.delta += 1
            metrics.SNAPSHOTS.labels(build="delta").inc()
        return self._emit(views, now, head)

    def _resync(self, views: Views, now: float, head: dict[str, Any]) -> tuple[Assembly, ClusterInfo]:
        """Build whole, and say so if the delta's document differs from it."""
        kept = self._emit(views, now, head)[0]
        self._rebuild(views, self.scope)
        out = self._emit(views, now, head)
        whole = out[0]
        if (kept.doc, kept.origins, [str(p) for p in kept.problems]) != (
                whole.doc, whole.origins, [str(p) for p in whole.problems]):
            self.stats.drifts += 1
            metrics.SNAPSHOTS.labels(build="drift").inc()
            log.error("snapshot: the delta had drifted from the whole rebuild (%s); the whole one is used",
                      _differences(kept, whole))
        return out

    def _why_full(self, changed: dict[str, set[str]] | None, scope: Scope) -> str | None:
        if not self._primed or changed is None:
            return "no earlier snapshot"
        if scope != self.scope:
            return "the shard's partition or scheduler changed"
        kinds = [k for k in _GLOBAL if changed.get(k)]
        return f"{' and '.join(kinds)} objects changed" if kinds else None

    def _rebuild(self, views: Views, scope: Scope) -> None:
        self.stats.full += 1
        metrics.SNAPSHOTS.labels(build="full").inc()
        self._primed = False
        self._reset(scope)
        self.node_names = sorted(v.meta.name for v in views.nodes.values() if scope.selects(v.meta))
        self.node_set = set(self.node_names)
        self._set_queues(views)
        for key in views.bind_requests:
            self._index_request(views, key)
        self.bind = _bind_requests(views.bind_requests.values(), self.node_set)
        units: set[Unit] = set()
        for key in views.pods:
            units |= self._index_pod(views, key)
        units |= {("PodGroup", key) for key in views.pod_groups}
        self._refresh(views, units, set(self.node_set))
        self._primed = True

    def _apply(self, views: Views, changed: dict[str, set[str]]) -> None:
        nodes: set[str] = set()
        for name in changed.get("Node", ()):
            v = views.nodes.get(name)
            if (v is not None and self.scope.selects(v.meta)) != (name in self.node_set):
                raise Rebuild("the set of nodes changed")
            if name in self.node_set:
                nodes.add(name)
        if changed.get("Queue"):
            leaves, names = self.leaves, self.queue_names
            self._set_queues(views)
            if (leaves, names) != (self.leaves, self.queue_names):
                raise Rebuild("the queue tree changed")
        pods = set(changed.get("Pod", ()))
        targets: set[tuple[str, str]] = set()
        for key in changed.get("BindRequest", ()):
            targets |= self._index_request(views, key)
        for target in targets:
            self._choose_request(views, target)
        pods |= {f"{ns}/{pod}" for ns, pod in targets}
        units: set[Unit] = set()
        for key in pods:
            nodes |= {self.node_of[key]} if key in self.node_of else set()
            units |= self._index_pod(views, key)
            nodes |= {self.node_of[key]} if key in self.node_of else set()
        units |= {("PodGroup", key) for key in changed.get("PodGroup", ())}
        self._refresh(views, units, nodes)

    # ---- indexes ---------------------------------------------------------------------------------
    def _set_queues(self, views: Views) -> None:
        self.queue_problems = []
        self.queue_specs, self.leaves = _queues(views.queues.values(), self.scope, self.queue_problems)
        self.queue_names = {v.meta.name for v in views.queues.values() if self.scope.selects(v.meta)}

    def _index_request(self, views: Views, key: str) -> set[tuple[str, str]]:
        """Re-index one BindRequest; the pods whose live request may have changed."""
        pods = set()
        old = self.request_pod.pop(key, None)
        if old is not None:
            self.requests_of[old].discard(key)
            pods.add(old)
        br = views.bind_requests.get(key)
        if br is not None:
            self.request_pod[key] = target = (br.meta.namespace, br.pod)
            self.requests_of.setdefault(target, set()).add(key)
            pods.add(target)
        return pods

    def _choose_request(self, views: Views, target: tuple[str, str]) -> None:
        """The live BindRequest of one pod, chosen among its requests as the full assembly does."""
        live = _bind_requests([views.bind_requests[k] for k in self.requests_of.get(target, ())], self.node_set)
        if target in live:
            self.bind[target] = live[target]
        else:
            self.bind.pop(target, None)

    def _index_pod(self, views: Views, key: str) -> set[Unit]:
        """Re-index one pod; the jobs it left or joined."""
        units = set()
        old = self.unit_of.pop(key, None)
        if old is not None:
            units.add(old)
            if old[0] == "PodGroup":
                self.members[old[1]].discard(key)
        node = self.node_of.pop(key, None)
        if node is not None:
            self.pods_on[node].discard(key)
        p = views.pods.get(key)
        if p is None:
            return units
        self.node_of[key] = p.node
        self.pods_on.setdefault(p.node, set()).add(key)
        if p.scheduler == self.scope.scheduler_name:
            unit = ("PodGroup", f"{p.meta.namespace}/{p.group}") if p.group else ("Pod", key)
            self.unit_of[key] = unit
            units.add(unit)
            if p.group:
                self.members.setdefault(unit[1], set()).add(key)
        return units

    # ---- pieces ----------------------------------------------------------------------------------
    def _refresh(self, views: Views, units: set[Unit], nodes: set[str]) -> None:
        """Assemble and build the given jobs again, then the nodes they and the given ones touch."""
        builder = JobBuilder(views, self.scope, 0.0, self.node_set, self.leaves, self.bind)
        # a bare pod named like a pod group's job takes another name: it follows the group
        units |= {("Pod", key) for kind, key in units if kind == "PodGroup"}
        ordered = sorted(units, key=_unit_order)
        for unit in ordered:   # all out first: a pod moving between jobs is in the new one's tasks
            nodes |= self._drop(unit)
        for unit in ordered:
            piece = self._assemble(views, builder, unit)
            if piece is not None:
                nodes |= self._keep(unit, piece)
        nodes &= self.node_set
        for name in nodes:
            self._build_node(views, name)
        self.stats.jobs, self.stats.nodes = len(units), len(nodes)

    def _assemble(self, views: Views, builder: JobBuilder, unit: Unit) -> JobPiece | None:
        kind, key = unit
        if kind == "PodGroup":
            g = views.pod_groups.get(key)
            return None if g is None else builder.group(key, g, [views.pods[k] for k in self.members.get(key, ())])
        p = views.pods.get(key)
        if p is None or p.group or p.scheduler != self.scope.scheduler_name:
            return None
        group = self.pieces.get(("PodGroup", key))
        return builder.single(p, {key} if group is not None and group.piece.spec is not None else set())

    def _drop(self, unit: Unit) -> set[str]:
        """Take a job's piece out; the nodes it touched."""
        old = self.pieces.pop(unit, None)
        if old is None:
            return set()
        piece = old.piece
        for name in piece.origins:
            self._unname(name, unit)
        self.placed -= piece.placed
        self.with_problems.discard(unit)
        if piece.spec is not None:
            at = bisect.bisect_left(self.order, (piece.sort_key, unit))
            if self.order[at] != (piece.sort_key, unit):
                raise LookupError(f"job {piece.name} is not where its order puts it")
            del self.order[at]
        for name in old.nodes:
            self.units_on[name].discard(unit)
        # the nodes its pods name too: a pod that stops being a task counts among its node's other
        # pods (today those are the nodes its tasks hold; kept so the two cannot drift apart)
        return old.nodes | {self.node_of[k] for k in piece.placed if k in self.node_of}

    def _keep(self, unit: Unit, piece: JobPiece) -> set[str]:
        """Put a job's new piece in; the nodes it touches."""
        if piece.problems:
            self.with_problems.add(unit)
        if piece.spec is None:
            self.pieces[unit] = _Piece(piece, None)
            return set()
        for name, origin in piece.origins.items():
            self._name(name, unit, origin)
        self.placed |= piece.placed
        bisect.insort(self.order, (piece.sort_key, unit))
        model = job_model(piece.spec, 0, 0.0, None, None)
        held = {t.node for t in model.tasks.values() if t.status in HOLDS_NODE and t.node}
        for name in held:
            self.units_on.setdefault(name, set()).add(unit)
        self.pieces[unit] = _Piece(piece, model, held)
        return held | {self.node_of[k] for k in piece.placed if k in self.node_of}

    # A job and a task of another job may share a name (a bare pod named like a pod group: its
    # task); the full assembly merges the jobs' origins in its order, so the later one's stands.
    def _name(self, name: str, unit: Unit, origin: tuple[str, str, str, str]) -> None:
        holder = self.named_by.get(name)
        if holder is not None and _unit_order(holder) > _unit_order(unit):
            self.shadowed.setdefault(name, set()).add(unit)
            return
        if holder is not None:
            self.shadowed.setdefault(name, set()).add(holder)
        self.named_by[name], self.origins[name] = unit, origin

    def _unname(self, name: str, unit: Unit) -> None:
        others = self.shadowed.get(name)
        if others:
            others.discard(unit)
        if self.named_by.get(name) != unit:
            return
        if not others:
            del self.named_by[name], self.origins[name]
            return
        heir = max(others, key=_unit_order)
        others.discard(heir)
        self.named_by[name], self.origins[name] = heir, self.pieces[heir].piece.origins[name]

    def _build_node(self, views: Views, name: str) -> None:
        """The node's spec (its other pods summed again) and its model with the tasks it holds, in
        document order as the full build adds them."""
        spec = dict(views.nodes[name].node)
        others = [views.pods[k] for k in self.pods_on.get(name, ()) if k not in self.placed
                  and views.pods[k].phase not in ("Succeeded", "Failed")]
        if others:
            spec["otherPods"] = other_pods_on(others)
        node = node_model(spec, 0)
        for unit in sorted(self.units_on.get(name, ()), key=lambda u: self.pieces[u].piece.sort_key):
            model = self.pieces[unit].model
            for task in model.tasks.values() if model is not None else ():
                if task.status in HOLDS_NODE and task.node == name:
                    try:
                        node.add_task(task)
                    except ValueError as e:
                        raise ScenarioError(self.file, f"jobs[{task.job}].tasks[{task.name}]", str(e)) from e
        self.node_specs[name], self.node_models[name] = spec, node

    # ---- the cycle's copies ------------------------------------------------------------------------
    def _emit(self, views: Views, now: float, head: dict[str, Any]) -> tuple[Assembly, ClusterInfo]:
        specs, jobs = [], {}
        for i, (_, unit) in enumerate(self.order):
            kept = self.pieces[unit]
            spec = kept.piece.spec
            assert spec is not None and kept.model is not None
            retime(spec, kept.piece.clock, now)
            specs.append(spec)
            created, last_start, stale_since = spec_clock(spec)
            jobs[spec["name"]] = copy_job(kept.model, i, created, last_start, stale_since)
        doc = document(head, self.queue_specs, [self.node_specs[n] for n in self.node_names], specs, views)
        problems = list(self.queue_problems)
        for unit in sorted(self.with_problems, key=_unit_order):
            problems += self.pieces[unit].piece.problems
        nodes = {n: copy_node(self.node_models[n], i) for i, n in enumerate(self.node_names)}
        cluster = ClusterInfo(nodes=nodes, jobs=jobs, queues=queues_model(doc), topologies=topologies_model(doc))
        return Assembly(doc, problems, dict(self.origins), now), cluster


def _differences(kept: Assembly, whole: Assembly) -> str:
    """Where two documents differ: the first few jobs and nodes, the problems, the origins."""
    out = []
    for what in ("jobs", "nodes", "queues"):
        a = {x["name"]: x for x in kept.doc.get(what) or []}
        b = {x["name"]: x for x in whole.doc.get(what) or []}
        names = sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))
        if names:
            out.append(f"{what} {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
    if [str(p) for p in kept.problems] != [str(p) for p in whole.problems]:
        out.append("problems")
    if kept.origins != whole.origins:
        out.append("origins")
    return "; ".join(out) or "the order of jobs or nodes"


def _unit_order(unit: Unit) -> tuple[int, str]:
    """Pod groups first, then bare pods, each by key: the order the full assembly meets them in."""
    return (0 if unit[0] == "PodGroup" else 1, unit[1])


def changed_keys(batches: Iterable[dict[str, set[str]]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for batch in batches:
        for kind, keys in batch.items():
            out.setdefault(kind, set()).update(keys)
    return out
