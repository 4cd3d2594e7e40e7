"""The audit log: per cycle, what each rule decided for each task and eviction, as JSON lines.

Records are plain dicts collected in memory; `lines()` renders them. The simulator prints or
writes them on request; the server appends them to a file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Audit:
    enabled: bool = True
    records: list[dict[str, Any]] = field(default_factory=list)
    cycle: int = 0
    bundle_hash: str = ""

    def add(self, kind: str, **fields: Any) -> None:
        if self.enabled:
            self.records.append({"cycle": self.cycle, "bundle": self.bundle_hash, "kind": kind, **fields})

    def rule_error(self, outcome: Any) -> None:
        self.add("rule-error", rule=outcome.rule, message=outcome.message)

    def lines(self) -> list[str]:
        return [json.dumps(r, sort_keys=True, default=str) for r in self.records]
