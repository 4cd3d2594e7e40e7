"""A digest of one cycle's decisions, to tell whether a change to the engine decides alike.

The shapes are the benchmarks' own: `openb` (the whole trace, all five actions), `openb-alloc`
(the whole trace, allocate only), `large` (bench/large.py's 4000 nodes). The digest covers every
bind (pod, node, GPU groups, GPUs, action, annotations), pipeline and eviction (with its message
and reason), each job's fit errors and per-pod fit errors, and every pod's status, node, grant and
GPU groups after the cycle. Run it on two trees (a worktree of the old commit on PYTHONPATH) and
compare the digests: equal digests, same decisions. `--tally` also prints the session's tallies
(how many simulations each shortcut settled), which a change may move without changing a
decision. Prints JSON; the cycle's process-CPU seconds are printed too, for a rough comparison.

usage: python bench/decisions.py openb|openb-alloc|large [--step N] [--tally]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from typing import Any

import large
import openb

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import release, run_cycle
from kaipolicy.framework.config import Params, config_from


def shape(which: str, step: int) -> tuple[dict[str, Any], list[str]]:
    if which == "large":
        return large.shape(4000 // step, 5000 // step), large.ALL_ACTIONS
    actions = ["allocate"] if which == "openb-alloc" else openb.ALL_ACTIONS
    nodes = openb.read_csv("openb_node_list_all_node.csv")[::step]
    pods = sorted(openb.read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))[::step]
    return openb.scenario_doc(nodes, pods, actions), actions


def decisions(ssn: Any) -> list[Any]:
    """Everything the digest covers, as plain values in a fixed order."""
    out: list[Any] = [
        [(b.job, b.task, b.namespace, b.node, b.gpu_groups, b.gpus, b.action, sorted(b.annotations.items()))
         for b in ssn.binds],
        [(p.job, p.task, p.node, p.action, p.message) for p in ssn.pipelines],
        [(e.job, e.task, e.namespace, e.node, e.action, e.message, sorted(e.reason.items())) for e in ssn.evictions],
    ]
    for uid in sorted(ssn.cluster.jobs):
        job = ssn.cluster.jobs[uid]
        tasks = [(t.uid, str(t.status), t.node, repr(t.accepted), list(t.gpu_groups))
                 for t in sorted(job.tasks.values(), key=lambda t: t.uid)]
        out.append((uid, list(job.fit_errors), sorted(job.task_fit_errors.items()), tasks))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=["openb", "openb-alloc", "large"])
    ap.add_argument("--step", type=int, default=1, help="every STEP-th node and pod (large: a STEP-th of the shape)")
    ap.add_argument("--tally", action="store_true")
    args = ap.parse_args()
    doc, actions = shape(args.shape, args.step)
    bundle = load(None)
    with paused_gc():
        cluster = scenario_from_doc(doc, f"<{args.shape}>").snapshot()
        config = config_from(None, actions=actions, params=Params())
        start = time.process_time()
        res = run_cycle(cluster, config, bundle, None)
        seconds = time.process_time() - start
        ssn = res.session
        text = json.dumps(decisions(ssn), default=str)
        out: dict[str, Any] = {"shape": args.shape, "step": args.step,
                               "digest": hashlib.sha256(text.encode()).hexdigest()[:12],
                               "binds": len(ssn.binds), "pipelines": len(ssn.pipelines),
                               "evictions": len(ssn.evictions), "cycleSeconds": round(seconds, 2)}
        if args.tally:
            out["tally"] = {f"{what} ({action})": n for (what, action), n in sorted(ssn.tally.items())}
        release(res)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
