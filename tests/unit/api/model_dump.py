"""Every field of a snapshot as plain values, in the snapshot's own orders: two snapshots are the
same model exactly when their dumps are equal (used to compare copies and delta-built snapshots
with the full build)."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from kaipolicy.api.job import PodSet, SubGroupSet
from kaipolicy.api.node import PodOnNode
from kaipolicy.api.snapshot import ClusterInfo


def dump(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    if isinstance(value, PodOnNode):
        return ("PodOnNode", *(dump(getattr(value, s)) for s in PodOnNode.__slots__))
    if isinstance(value, SubGroupSet | PodSet):
        # the tree's parent links point back up: name the parent instead of walking it again
        return (type(value).__name__, *((f.name, value.parent.name if f.name == "parent" and value.parent else
                                         dump(getattr(value, f.name)) if f.name != "parent" else None)
                                        for f in fields(value)))
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *((f.name, dump(getattr(value, f.name))) for f in fields(value)))
    if isinstance(value, dict):
        return ("dict", *((k, dump(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, *(dump(v) for v in value))
    if isinstance(value, set | frozenset):
        return ("set", *sorted(map(repr, value)))
    if isinstance(value, float):
        return ("float", value.hex())   # bit for bit
    return value


def dump_cluster(cluster: ClusterInfo) -> Any:
    return dump(cluster)
