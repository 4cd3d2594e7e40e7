#!/usr/bin/env python3
"""Where do Go and kaipolicy first part ways on a generated scenario?

  diverge.py busy_three_levels SEED [SEED...] [-k 10]

1. the first cycle c whose outcome (scenario cut to c cycles) kaipolicy gives and no Go run does;
2. the cluster as kaipolicy settles it after c-1 cycles (plain path) made a one-cycle scenario,
   and on it the first action a (actions cut to the first a) whose outcome no Go run gives.
Prints the pods that differ there. The settled scenario carries the stale/last-start clocks as
kaipolicy keeps them (a second-level approximation of the cycle clock).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, "/tmp/goref")
from compare import HEAD_TREE, PY, diff, go_outcome, go_runs, kai_outcomes  # noqa: E402

SETTLE = r'''
import sys, json, os
TREE = os.environ["KAI_TREE"]; sys.path.insert(0, TREE); os.chdir(TREE)
from tests.scenarios.test_eviction_shortcuts import switched
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.simulate import simulate
from tests.scenarios.shared import default_bundle
doc = json.loads(sys.stdin.read())
with switched(False):
    res = simulate(scenario_from_doc(doc, "<settle>"), default_bundle())
scn = res.scenario
scn.settle(res.cluster)
now = scn.now + 1.0
out = copy = json.loads(json.dumps(doc))
out["cycles"] = 1
jobs = []
for spec in scn.jobs:
    j = dict(spec)
    j.pop("staleSeconds", None); j.pop("lastStartMinutesAgo", None)
    if j["name"] in scn.stale_since:
        j["staleSeconds"] = now - scn.stale_since[j["name"]]
    if j["name"] in scn.last_start:
        j["lastStartMinutesAgo"] = (now - scn.last_start[j["name"]]) / 60.0
    j["tasks"] = [{k: v for k, v in t.items() if not (k == "gpuGroups" and not v)} for t in spec["tasks"]]
    jobs.append(j)
out["jobs"] = jobs
print(json.dumps(out))
'''


def settled(doc: dict, cycles: int) -> dict:
    d = copy.deepcopy(doc)
    d["cycles"] = cycles
    p = subprocess.run(["nice", "-n", "10", PY, "-c", SETTLE], input=json.dumps(d), capture_output=True, text=True,
                       env=dict(os.environ, KAI_TREE=HEAD_TREE, PYTHONPATH=HEAD_TREE))
    if p.returncode:
        raise RuntimeError(p.stderr[-2000:])
    return json.loads(p.stdout)


def first_miss(docs: list[dict], k: int) -> tuple[int, dict, list] | None:
    kais = kai_outcomes(docs)
    for i, (d, kr) in enumerate(zip(docs, kais)):
        outs = {}
        for g in go_runs(d, k):
            o = go_outcome(g)
            outs[json.dumps(sorted(o.items()))] = o
        if not any(o == kr["tasks"] for o in outs.values()):
            return i, kr, list(outs.values())
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("gen")
    ap.add_argument("seeds", nargs="+", type=int)
    ap.add_argument("-k", type=int, default=10)
    a = ap.parse_args()
    sys.path.insert(0, HEAD_TREE)
    from generators import generator
    make = generator(a.gen)
    for seed in a.seeds:
        doc = make(seed)
        cut = []
        for c in range(1, doc["cycles"] + 1):
            d = copy.deepcopy(doc)
            d["cycles"] = c
            cut.append(d)
        hit = first_miss(cut, a.k)
        if hit is None:
            print(f"seed {seed}: no divergence found with k={a.k}")
            continue
        c = hit[0] + 1
        base = settled(doc, c - 1) if c > 1 else dict(copy.deepcopy(doc), cycles=1)
        acts = base["actions"]
        steps = [dict(copy.deepcopy(base), actions=acts[:m]) for m in range(1, len(acts) + 1)]
        hit2 = first_miss(steps, a.k)
        if hit2 is None:
            print(f"seed {seed}: cycle {c} diverges, but the settled one-cycle replay does not (clock carry?)")
            continue
        m, kr, outs = hit2
        best = min(outs, key=lambda o: len(diff(o, kr["tasks"])))
        d = diff(best, kr["tasks"])
        pods = "; ".join(f"{n}: Go {v['a'][0]}@{v['a'][1] or '-'} / kai {v['b'][0]}@{v['b'][1] or '-'}"
                         if v["a"] and v["b"] else f"{n}: {v}" for n, v in sorted(d.items()))
        print(f"seed {seed}: first diverges in cycle {c}, action {acts[m]} "
              f"({len(outs)} Go outcome(s) at that point): {pods}", flush=True)


if __name__ == "__main__":
    main()
