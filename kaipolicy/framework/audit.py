"""The audit log: per cycle, what each rule decided, as versioned JSON records.

Records are plain dicts kept in memory; `lines()` renders them. Their shape is published in
`schemas/audit.schema.json` (kinds: task, job, eviction, shadow, error, outcome) and every
record carries `version`. A record equal to the one before it is not repeated: the earlier
one counts it in `repeated`. Disabled, `add` returns at once and nothing is built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

AUDIT_VERSION = 1
RESOURCES_RULE = "(node resources)"   # the built-in fit check, not a rule of the bundle


@dataclass
class Audit:
    enabled: bool = True
    detail: bool = False          # rejection groups list every node (policy tests read them)
    records: list[dict[str, Any]] = field(default_factory=list)
    cycle: int = 0
    bundle_hash: str = ""
    source: str = ""              # the scenario file (or cluster) the cycle ran on
    _last: dict[str, Any] | None = None
    _repeats: int = 0

    def add(self, kind: str, **fields: Any) -> None:
        if not self.enabled:
            return
        record = {"version": AUDIT_VERSION, "cycle": self.cycle, "bundle": self.bundle_hash, "kind": kind,
                  **fields}
        if self.source:
            record["source"] = self.source
        if record == self._last:
            self._repeats += 1
            self.records[-1] = {**record, "repeated": self._repeats}
            return
        self._last, self._repeats = record, 0
        self.records.append(record)

    def error(self, rule: str, message: str, hook: str, action: str) -> None:
        """A rule failed while evaluating: an `error` record, never read as allow or deny."""
        self.add("error", action=action, rule=rule, hook=hook, message=message)

    def lines(self) -> list[str]:
        return [json.dumps(r, sort_keys=True, default=str) for r in self.records]


@dataclass(slots=True)
class RejectionGroup:
    rule: str
    count: int
    sample_node: str
    message: str
    nodes: list[str]


class Rejections:
    """Nodes rejected for one task, grouped by the rule that rejected them (first node as sample)."""

    __slots__ = ("detail", "groups")

    def __init__(self, detail: bool = False) -> None:
        self.detail = detail
        self.groups: dict[str, RejectionGroup] = {}

    def add(self, rule: str, node: str, message: str) -> None:
        group = self.groups.get(rule)
        if group is None:
            self.groups[rule] = RejectionGroup(rule, 1, node, message, [node])
            return
        group.count += 1
        if self.detail:
            group.nodes.append(node)

    def sample(self, rule: str, node: str, message: str) -> None:
        """Make `node` the group's sample (e.g. the node closest to fitting)."""
        group = self.groups.get(rule)
        if group is not None:
            group.sample_node, group.message = node, message

    def records(self) -> list[dict[str, Any]]:
        out = []
        for g in sorted(self.groups.values(), key=lambda g: (-g.count, g.rule)):
            entry: dict[str, Any] = {"rule": g.rule, "count": g.count, "sampleNode": g.sample_node,
                                     "message": g.message}
            if self.detail:
                entry["nodes"] = sorted(g.nodes)
            out.append(entry)
        return out
