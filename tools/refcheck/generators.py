"""The random scenario generators the comparison scripts take by name.

`NAME` is a function of `tests/fuzz/reclaim_pressure.py`; `MODULE.NAME` one of another module of
`tests/fuzz` (e.g. `generate.scenario`). The kaipolicy tree must be on `sys.path` first.

`GOREF_STRIP_TOPO=1` drops a `topologies` declaration that no job's constraint names, so that
`to_go.py` does not refuse the scenario for it and both sides read the same document
(`constrained_three_levels` declares one for its pod-affinity racks without using it).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any


def _names_topology(job: dict[str, Any]) -> bool:
    return bool(job.get("topologyConstraint")) or any(g.get("topology") for g in job.get("subGroups") or [])


def generator(name: str) -> Callable[[int], dict[str, Any]]:
    module, _, function = name.rpartition(".")
    make: Callable[[int], dict[str, Any]] = getattr(importlib.import_module(f"tests.fuzz.{module or 'reclaim_pressure'}"),
                                                   function)
    if os.environ.get("GOREF_STRIP_TOPO") != "1":
        return make

    def stripped(seed: int) -> dict[str, Any]:
        doc = make(seed)
        if not any(_names_topology(j) for j in doc["jobs"]):
            doc.pop("topologies", None)
        return doc

    return stripped
