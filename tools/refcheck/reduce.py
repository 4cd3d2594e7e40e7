#!/usr/bin/env python3
"""Greedy reduction of a scenario on which kaipolicy misses Go: drop jobs, tasks, nodes, queues while the miss holds.
  reduce.py IN.yaml OUT.yaml [-k 3] [--keep JOB]
"""
import argparse
import copy
import sys

import yaml

sys.path.insert(0, "/tmp/goref")
from compare import go_outcome, go_runs, kai_outcomes  # noqa
from to_go import Unsupported

import os
MV = os.environ.get("REDUCE_MV") == "1"   # also require a miss with KAI_MOVED_VICTIMS=1

def miss(doc, k):
    try:
        kr = kai_outcomes([doc])[0]
        if "error" in kr:
            return False
        krs = [kr]
        if MV:
            os.environ["KAI_MOVED_VICTIMS"] = "1"
            krs.append(kai_outcomes([doc])[0])
            os.environ["KAI_MOVED_VICTIMS"] = "0"
            if "error" in krs[1]:
                return False
        outs = [go_outcome(r) for r in go_runs(doc, k)]
    except (Unsupported, RuntimeError):
        return False
    if any("__PANIC__" in o for o in outs):
        return False
    return not any(o == x["tasks"] for o in outs for x in krs)

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("inp"); ap.add_argument("out"); ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--keep", action="append", default=[])
    a = ap.parse_args()
    doc = yaml.safe_load(open(a.inp))
    assert miss(doc, a.k), "no miss to start with"
    changed = True
    while changed:
        changed = False
        for i in range(len(doc["jobs"]) - 1, -1, -1):
            if doc["jobs"][i]["name"] in a.keep:
                continue
            d = copy.deepcopy(doc); del d["jobs"][i]
            if miss(d, a.k):
                doc = d; changed = True; print("drop job", i, flush=True)
        for i in range(len(doc["jobs"])):
            j = doc["jobs"][i]
            for t in range(len(j["tasks"]) - 1, -1, -1):
                if len(j["tasks"]) <= 1:
                    break
                d = copy.deepcopy(doc); jj = d["jobs"][i]
                del jj["tasks"][t]
                for n, tt in enumerate(jj["tasks"]):
                    tt["name"] = f"{jj['name']}-{n}"
                if "minAvailable" in jj:
                    jj["minAvailable"] = min(jj["minAvailable"], len(jj["tasks"]))
                if miss(d, a.k):
                    doc = d; changed = True; print("drop task", j["name"], t, flush=True)
        used = {t.get("node") for j in doc["jobs"] for t in j["tasks"]}
        for i in range(len(doc["nodes"]) - 1, -1, -1):
            if doc["nodes"][i]["name"] in used:
                continue
            d = copy.deepcopy(doc); del d["nodes"][i]
            if miss(d, a.k):
                doc = d; changed = True; print("drop node", i, flush=True)
    yaml.safe_dump(doc, open(a.out, "w"), sort_keys=False, width=200)
    print("done")

if __name__ == "__main__":
    main()
