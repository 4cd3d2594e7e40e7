"""Instructions one cycle costs, counted by valgrind's callgrind: the same for the same code and
input whatever else the machine runs, where process-CPU timings of one change drift by more than
the change (bench/README.md, "2026-12-03, the session after").

The input is the openb trace thinned to every STEP-th node and pod (`--step 3`: 508 nodes, 2,718
pods, about 7 minutes under callgrind for the full cycle), as `bench/openb.py` builds it. The
script runs itself twice under callgrind with the same hash seed: once stopped right after the
snapshot (the baseline: imports, loading, the snapshot) and once through the cycle; the cycle's
instructions are the difference. `--switch module.NAME=value` sets a module attribute first (a
shortcut's switch, to count it on and off). `--shape large` counts bench/large.py's shape
instead (4000 nodes: about 20 minutes per run, 85 G instructions of set-up before the cycle).
Prints JSON. Needs `valgrind` on the PATH.

usage: python bench/instructions.py [--shape openb|large] [--step 3] [--offset 0] [--actions all|allocate]
                                    [--switch kaipolicy.actions.solver.solve.HOPELESS_AFTER_VICTIMS=False]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import large
import openb

from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import release, run_cycle
from kaipolicy.framework.config import Params, config_from

COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def switch(spec: str) -> None:
    """`module.NAME=value`, the value a Python literal."""
    target, _, value = spec.partition("=")
    module, _, name = target.rpartition(".")
    if not module or not name or not value:
        raise SystemExit(f"--switch {spec!r}: expected module.NAME=value")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise SystemExit(f"--switch {spec!r}: {e}") from None
    if not hasattr(mod, name):
        raise SystemExit(f"--switch {spec!r}: {module} has no {name}")
    setattr(mod, name, ast.literal_eval(value))


def inner(args: argparse.Namespace, baseline: bool) -> dict[str, Any]:
    """The measured process: the thinned trace, its snapshot and (unless `baseline`) one cycle."""
    for spec in args.switch:
        switch(spec)
    actions = openb.ALL_ACTIONS if args.actions == "all" else ["allocate"]
    if args.shape == "large":
        sizes = {"nodes": 4000 // args.step, "pods": 5000 // args.step}
        doc = large.shape(sizes["nodes"], sizes["pods"])
        doc["actions"] = actions
    else:
        nodes = openb.read_csv("openb_node_list_all_node.csv")[args.offset::args.step]
        pods = sorted(openb.read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))
        doc = openb.scenario_doc(nodes, pods[args.offset::args.step], actions)
        sizes = {"nodes": len(nodes), "pods": len(pods[args.offset::args.step])}
    bundle = load(None)
    with paused_gc():
        cluster = scenario_from_doc(doc, "<openb>").snapshot()
        config = config_from(None, actions=actions, params=Params())
        if baseline:
            return sizes
        start = time.process_time()
        res = run_cycle(cluster, config, bundle, None)
        seconds = time.process_time() - start
        ssn = res.session
        out = {"binds": len(ssn.binds), "pipelines": len(ssn.pipelines), "evictions": len(ssn.evictions),
               "simulated": sum(n for (what, _), n in ssn.tally.items() if what == "simulated"),
               "seconds under callgrind": round(seconds, 1)}
        release(res)
    return out


def inner_env() -> dict[str, str]:
    """The inner run's environment: a fixed hash seed, and the trace where this process finds it
    (the inner run starts in a directory of its own, where a relative path points nowhere)."""
    return {**os.environ, "PYTHONHASHSEED": "0", "KAIPOLICY_OPENB": str(openb.TRACE.resolve())}


def counted(args: argparse.Namespace, baseline: bool) -> tuple[int, dict[str, Any]]:
    """Run this script's inner part under callgrind: the instructions and what it printed."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, str(Path(__file__).resolve()),
           "--inner", "baseline" if baseline else "cycle", "--shape", args.shape, "--step", str(args.step),
           "--offset", str(args.offset),
           "--actions", args.actions, *(a for spec in args.switch for a in ("--switch", spec))]
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(cmd, capture_output=True, text=True, env=inner_env(), cwd=tmp, check=False)
    found = COLLECTED.findall(done.stderr)
    if done.returncode != 0 or not found:
        raise SystemExit(f"callgrind run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return int(found[-1]), json.loads(lines[-1]) if lines else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--shape", choices=("openb", "large"), default="openb",
                    help="the openb trace, or bench/large.py's shape (about 20 minutes per run under callgrind)")
    ap.add_argument("--step", type=int, help="every STEP-th node and pod of the trace (default 3); for large, "
                                             "a STEP-th of its nodes and pods (default 1)")
    ap.add_argument("--offset", type=int, default=0, help="the first node and pod taken")
    ap.add_argument("--actions", choices=("all", "allocate"), default="all")
    ap.add_argument("--switch", action="append", default=[], metavar="module.NAME=value")
    ap.add_argument("--inner", choices=("baseline", "cycle"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.step is None:
        args.step = 1 if args.shape == "large" else 3
    if args.shape == "large" and args.offset:
        raise SystemExit("--offset applies to the openb trace only (large is cut by --step)")
    if args.step < 1 or args.offset < 0:
        raise SystemExit("--step must be at least 1 and --offset at least 0")
    if args.inner:
        print(json.dumps(inner(args, args.inner == "baseline")))
        return
    for spec in args.switch:
        switch(spec)   # a wrong one is told before anything runs under callgrind
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH: install it (apt-get install valgrind) to count instructions")
    base, shape = counted(args, baseline=True)
    total, cycle = counted(args, baseline=False)
    print(json.dumps({"shape": {"name": args.shape, **shape, "step": args.step, "offset": args.offset,
                                "actions": args.actions},
                      "switches": args.switch, "instructions": {"process": total, "baseline": base,
                                                                "cycle": total - base}, **cycle}, indent=1))


if __name__ == "__main__":
    main()
