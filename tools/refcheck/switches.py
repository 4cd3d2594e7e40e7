#!/usr/bin/env python3
"""Tell why seeds differ: each seed is compared again under the harness's switches, one
combination after another, until kaipolicy's outcome is one of Go's.

  switches.py --gen slots_in_domains 5 38 90 [-k 3]
  switches.py SCENARIO.yaml... [-k 3]

Every run has the victim-node order switched off (GOREF_SORTED_VICTIM_NODES=1; the harness must
come from the current setup.sh). The combinations, in order: none (the seed agrees on a second
look: map order left), kaipolicy's moved-victim rule off (KAI_MOVED_VICTIMS=1), each of the
reference's drift switches alone, then each with the rule off (README, "Known drift in the
reference"). Where none explains a seed whose consolidation caps its victims, the same search
runs on the seed with the cap off (README, "Consolidation's victim cap"). A seed still
unexplained is run once more with HARNESS_NODES=1, and the lines
where the reference's own node accounting goes below zero (idle or releasing GPUs) are counted:
the shared-group drift, which has no switch, shows there.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

sys.path.insert(0, "/tmp/goref")
import compare  # noqa: E402
from to_go import Unsupported, convert  # noqa: E402

#: (label, environment) in the order they are tried.
COMBINATIONS: list[tuple[str, dict[str, str]]] = [
    ("map order", {}),
    ("moved-victim rule", {"KAI_MOVED_VICTIMS": "1"}),
    ("guards drift", {"GOREF_EXACT_GUARDS": "1"}),
    ("move roll-backs drift", {"GOREF_EXACT_MOVE_ROLLBACKS": "1"}),
    ("moves drift", {"GOREF_EXACT_MOVES": "1"}),
    ("moved-victim rule + guards drift", {"KAI_MOVED_VICTIMS": "1", "GOREF_EXACT_GUARDS": "1"}),
    ("moved-victim rule + move roll-backs drift",
     {"KAI_MOVED_VICTIMS": "1", "GOREF_EXACT_MOVE_ROLLBACKS": "1"}),
    ("moved-victim rule + moves drift", {"KAI_MOVED_VICTIMS": "1", "GOREF_EXACT_MOVES": "1"}),
]
SWITCHES = ("KAI_MOVED_VICTIMS", "GOREF_EXACT_GUARDS", "GOREF_EXACT_MOVE_ROLLBACKS", "GOREF_EXACT_MOVES")


@contextmanager
def switched(env: dict[str, str]) -> Iterator[None]:
    """The switches of `env` on and every other one off, for the Go runs and kaipolicy's run."""
    saved = {name: os.environ.get(name) for name in (*SWITCHES, "GOREF_SORTED_VICTIM_NODES")}
    try:
        for name in SWITCHES:
            os.environ.pop(name, None)
        os.environ.update(env)
        os.environ["GOREF_SORTED_VICTIM_NODES"] = "1"
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def uncapped(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The scenario with consolidation's victim cap off (README, "Consolidation's victim cap"), or
    None when it has no cap to take off (the cap is on unless the scenario sets it to 0)."""
    params = doc.get("params") or {}
    if "consolidation" not in (doc.get("actions") or []) or params.get("maxConsolidationPreemptees") == 0:
        return None
    return {**doc, "params": {**params, "maxConsolidationPreemptees": 0}}


def explain(doc: dict[str, Any], k: int) -> str:
    for label, env in COMBINATIONS:
        with switched(env):
            s = compare.compare(doc, k)
        if s["kai"].get("matches_go"):
            return f"{label} ({len(s['go_distinct'])} Go outcome(s) in {k} runs)"
        if not env and all("__PANIC__" in d["outcome"] for d in s["go_distinct"]):
            # (only without switches: a switch may move the reference onto a path that panics)
            return f"Go panics in every run: {s['go_distinct'][0]['outcome']['__PANIC__'][0][:160]}"
    free = uncapped(doc)
    if free is not None:
        # the cap's own map order hides what is left: the same search on the scenario without it
        return "with consolidation's victim cap off: " + explain(free, k)
    return "none; " + negative_accounting(doc)


def negative_accounting(doc: dict[str, Any]) -> str:
    """How many of the reference's node-accounting lines (one per node after each action) show
    idle or releasing GPUs below zero, and the first."""
    path = os.path.join("/tmp/goref/tmp", f"switches-{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump(convert(doc), f)
    try:
        with switched({}):
            env = dict(os.environ, HARNESS_INPUT=path, HARNESS_NODES="1")
            p = subprocess.run([compare.GO_BIN, "-test.run", "^TestHarness$", "-test.count=1"], env=env,
                               capture_output=True, text=True, timeout=900, cwd="/tmp/goref")
    finally:
        os.unlink(path)
    lines = [line for line in p.stderr.splitlines() if line.startswith("HARNESS_NODES")]
    below = [line for line in lines if any(f"{field}=-" in line for field in
                                            ("idleSum", "releasingSum", "idleWhole", "releasingWhole"))]
    first = below[0].removeprefix("HARNESS_NODES ") if below else "-"
    return f"Go's node accounting below zero in {len(below)} of {len(lines)} lines (first: {first})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("items", nargs="+", help="seeds with --gen, else scenario files")
    ap.add_argument("--gen")
    ap.add_argument("-k", type=int, default=3)
    a = ap.parse_args()
    os.makedirs("/tmp/goref/tmp", exist_ok=True)
    if a.gen:
        sys.path.insert(0, compare.HEAD_TREE)
        from generators import generator
        make = generator(a.gen)
        cases = [(f"{a.gen} {seed}", make(int(seed))) for seed in a.items]
    else:
        import yaml
        cases = []
        for path in a.items:
            with open(path) as f:
                cases.append((path, yaml.safe_load(f)))
    for name, doc in cases:
        try:
            print(f"{name}: {explain(doc, a.k)}", flush=True)
        except Unsupported as e:
            print(f"{name}: not expressible in the harness: {e}", flush=True)


if __name__ == "__main__":
    main()
