"""The audit log's cost: the same cycles with the audit log off and on, on the reference shapes.

Shapes: allocate 10x50 / 50x200 / 100x500 (bench/allocate.py), the reference's full cycle of all
five actions 10x50 / 50x200 / 100x500 and reclaim 100 nodes (bench/eviction.py). Runs alternate
off / on so that the machine's noise falls on both, and are timed in process CPU time (a shared
machine's waits are not the program's cost); per shape the median milliseconds of each, the
records written and the ratio on / off of the medians and of the minimums (the least disturbed
run of each; target: at most 1.20).

usage: python bench/audit.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from allocate import shape as allocate_shape
from eviction import ALL_ACTIONS, REFERENCE_JOBS, mixed_shape, reclaim_shape

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate

TARGET_RATIO = 1.20
SHAPES: dict[str, Callable[[], dict[str, Any]]] = {
    **{f"allocate {n}x{j}": (lambda n=n, j=j: allocate_shape(n, j)) for n, j in ((10, 50), (50, 200), (100, 500))},
    **{f"full cycle {n}x{REFERENCE_JOBS[n]}": (lambda n=n: mixed_shape(n, REFERENCE_JOBS[n], ALL_ACTIONS))
       for n in (10, 50, 100)},
    "reclaim 100": lambda: reclaim_shape(100),
}


def _run(bundle: Any, doc: dict[str, Any], audited: bool) -> tuple[float, int]:
    scn = scenario_from_doc(doc, "<bench audit>")
    audit = Audit(enabled=audited)
    t0 = time.process_time()
    simulate(scn, bundle, audit=audit)
    return time.process_time() - t0, len(audit.records)


def measure(bundle: Any, name: str, repeat: int) -> dict[str, Any]:
    doc = SHAPES[name]()
    off: list[float] = []
    on: list[float] = []
    records = 0
    _run(bundle, doc, True)   # warm caches (compiled memo tables, imports) outside the timings
    for _ in range(repeat):
        off.append(_run(bundle, doc, False)[0])
        seconds, records = _run(bundle, doc, True)
        on.append(seconds)
    ratio = statistics.median(on) / statistics.median(off)
    best = min(on) / min(off)
    return {"shape": name, "offMs": round(statistics.median(off) * 1000, 2),
            "onMs": round(statistics.median(on) * 1000, 2), "records": records, "ratio": round(ratio, 3),
            "ratioOfMinimums": round(best, 3), "withinTarget": min(ratio, best) <= TARGET_RATIO}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated shape names")
    args = ap.parse_args()
    bundle = load(None)
    rows = [measure(bundle, name, args.repeat) for name in args.shapes.split(",") if name]
    print(json.dumps({"benchmark": "audit", "targetRatio": TARGET_RATIO, "shapes": rows}, indent=1))


if __name__ == "__main__":
    main()
