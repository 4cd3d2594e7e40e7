#!/usr/bin/env python3
"""For seeds of a generator where kaipolicy misses Go: which ingredient is needed for the miss?
Variants: notopo (drop every topologyConstraint), nomulti (drop the 'multi' job), nolimit (queue limits off).
  ablate.py GEN SEED... [-k 5]
"""
import argparse
import copy
import sys

sys.path.insert(0, "/tmp/goref")
from compare import HEAD_TREE, go_outcome, go_runs, kai_outcomes  # noqa

def variants(doc):
    out = {"orig": doc}
    d = copy.deepcopy(doc)
    for j in d["jobs"]:
        j.pop("topologyConstraint", None)
        for g in j.get("subGroups") or []:
            g.pop("topology", None)
    out["notopo"] = d
    d = copy.deepcopy(doc); d["jobs"] = [j for j in d["jobs"] if j["name"] != "multi"]; out["nomulti"] = d
    return out

def main():
    ap = argparse.ArgumentParser(); ap.add_argument("gen"); ap.add_argument("seeds", nargs="+", type=int)
    ap.add_argument("-k", type=int, default=5); a = ap.parse_args()
    sys.path.insert(0, HEAD_TREE)
    from generators import generator
    make = generator(a.gen)
    for s in a.seeds:
        vs = variants(make(s))
        names = list(vs)
        kais = kai_outcomes([vs[n] for n in names])
        res = []
        for n, k in zip(names, kais):
            outs = [go_outcome(r) for r in go_runs(vs[n], a.k)]
            panic = sum("__PANIC__" in o for o in outs)
            m = any(o == k.get("tasks") for o in outs)
            res.append(f"{n}={'ok' if m else 'MISS'}{'(panic %d)' % panic if panic else ''}")
        print(f"seed {s}: " + " ".join(res), flush=True)

if __name__ == "__main__":
    main()
