"""kaipolicy's plain-path outcome (shortcuts off) for scenario docs.

Run with /work/main/.venv/bin/python; the kaipolicy tree is taken from KAI_TREE (default
/work/main), e.g. KAI_TREE=/tmp/goref/old for an exported older commit.

stdin: JSON lines, each a scenario doc; stdout: JSON lines, each
{"tasks": {name: [status, node]}, "counts": [[binds, evictions, pipelined] per cycle], ...}
or {"error": "..."}.
"""
from __future__ import annotations

import json
import os
import sys

TREE = os.environ.get("KAI_TREE", "/work/main")
sys.path.insert(0, TREE)
os.chdir(TREE)

from tests.scenarios.test_eviction_shortcuts import outcome, switched  # noqa: E402

if os.environ.get("KAI_MOVED_VICTIMS") == "1":
    # diagnostic only: switch off kaipolicy's documented rule "a pod evicted in this session is not
    # a victim again" (docs/engine.md), which the reference does not have
    from kaipolicy.api.task import ACTIVE_ALLOCATED  # noqa: E402
    from kaipolicy.framework.session import Session  # noqa: E402

    def _evictable(self, task):
        return task.status in ACTIVE_ALLOCATED

    Session.evictable = _evictable


def summarize(doc):
    with switched(os.environ.get("KAI_SHORTCUTS") == "1"):
        res = outcome(doc)
    if isinstance(res, str):
        return {"error": res}
    report = res[0][0]
    tasks = {t["name"]: [t["status"], t.get("node") or ""] for t in report["tasks"]}
    groups = {t["name"]: t.get("gpuGroups") or [] for t in report["tasks"]}
    counts = [[c.get("binds", 0), c.get("evictions", 0), c.get("pipelined", 0)] for c in report.get("perCycle", [])]
    return {"tasks": tasks, "gpuGroups": groups, "counts": counts, "tree": TREE,
            "shortcuts": os.environ.get("KAI_SHORTCUTS") == "1"}


def main():
    import kaipolicy
    sys.stderr.write(f"kaipolicy from {os.path.dirname(kaipolicy.__file__)}\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        doc = json.loads(line)
        try:
            out = summarize(doc)
        except Exception as e:  # noqa: BLE001
            out = {"error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
