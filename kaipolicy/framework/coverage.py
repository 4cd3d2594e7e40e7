"""Rule coverage: which rules decided something in a run (`kaipolicy test --coverage`).

A rule decided something when it denied or refused (deny and allow rules, also in warn or
audit mode), failed (an `error` outcome), gave two candidates different scores (score rules;
gpuOrder: a non-zero score), gave two items different keys in one cycle (order rules), split
or narrowed the candidate nodes (subsetNodes) or ran at all (the other built-ins, which act by
side effect). The session calls it only when collecting; otherwise it costs one test per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Coverage:
    decided: set[str] = field(default_factory=set)
    _first_keys: dict[str, Any] = field(default_factory=dict)

    def hit(self, rule: str) -> None:
        self.decided.add(rule)

    def new_cycle(self) -> None:
        self._first_keys.clear()

    def key(self, labels: list[str], parts: list[Any]) -> None:
        """One item's key, a part per rule: a rule whose part differs from the first item's
        part seen this cycle told two items apart."""
        for label, part in zip(labels, parts):
            if label in self.decided:
                continue
            first = self._first_keys.setdefault(label, part)
            try:
                differs = bool(first != part)
            except Exception:  # noqa: BLE001 - incomparable parts are different parts
                differs = True
            if differs:
                self.decided.add(label)
