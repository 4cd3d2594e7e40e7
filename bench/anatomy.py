"""What one full cycle's eviction searches are made of: per job an eviction action tried, how many
simulations its search ran, how each ended and what it cost; then the same summed by ending.

The solver is watched from outside (its functions wrapped for the run); nothing here is in the
scheduler, and the decisions are the scheduler's own. A simulation ends one of these ways:

- `cannot fit`: a pod of the partial job fits no node right after the evictions (nothing placed);
- `proven`: refused by the reclaim proof before anything was placed (actions/solver/proofs.py);
- `refused`: the preemptor was placed (or its placement proven) and the validator refused, or
  the refusal bounds cut the simulation short;
- `unplaced, all back`: every victim went back (none is left evicted) and the preemptor was not
  placed: the victims' turns came first and took their room back;
- `unplaced, some out`: the preemptor was not placed, some victim stayed evicted;
  both unplaced endings are also counted by whether every victim placed went back onto the node
  it was evicted from (the simulation then ends as a read of the victims' landings could tell),
  and by whether that holds with whole GPUs or CPU only among the victims ("both of the last two");
- `solution`: the scenario solved the partial job.

Each simulation is also counted by whether a victim asks for a GPU fraction and whether every
victim was evicted from a node of its own (no two from one node): what a proof that victims go
back where they were must handle.

usage: python bench/anatomy.py [--shape openb|large] [--top 15]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import large
import openb

from kaipolicy.actions.solver import proofs, solve
from kaipolicy.api.task import Status, Task
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.cli.bundle import load
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import run_cycle
from kaipolicy.framework.config import Params, config_from

ENDINGS = ("cannot fit", "proven", "refused", "unplaced, all back", "unplaced, some out", "solution")


@dataclass
class Search:
    """One job's search in one action."""

    action: str
    job: str
    solved: bool = False
    seconds: float = 0.0
    endings: Counter[str] = field(default_factory=Counter)


@dataclass
class Watch:
    """What the wrapped functions saw: the searches, and per ending its simulations' seconds and
    their kinds (fraction among the victims, victims each on a node of their own)."""

    searches: list[Search] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    scenario_seconds: float = 0.0     # in solve_scenario: the simulations and the evictions around them
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    # set by the inner wrappers for the simulation being run
    cannot_fit: bool = False
    proven: bool = False
    all_back: bool = False
    moved: bool = False


def watch_solver() -> Watch:
    """Wrap the solver's functions for the rest of the process."""
    w = Watch()
    solve_job, simulate, scenario = solve.JobSolver.solve, solve._simulate, solve.solve_scenario
    cannot_fit, allocate, refuses = solve._preemptor_cannot_fit, solve._allocate_virtually, proofs.ReclaimRefusals.refuses

    def solve_wrapped(self: solve.JobSolver, job: Any) -> Any:
        search = Search(self.action, job.name)
        w.searches.append(search)
        t0 = time.perf_counter()
        out = solve_job(self, job)
        search.seconds, search.solved = time.perf_counter() - t0, bool(out[0])
        return out

    def scenario_wrapped(*args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return scenario(*args)
        finally:
            w.scenario_seconds += time.perf_counter() - t0

    def cannot_fit_wrapped(*args: Any) -> bool:
        w.cannot_fit = cannot_fit(*args)
        return w.cannot_fit

    def refuses_wrapped(self: proofs.ReclaimRefusals, *args: Any) -> bool:
        w.proven = refuses(self, *args)
        return w.proven

    def allocate_wrapped(solver: Any, scenario: Any, stmt: Any, nodes: Any, victims: list[Task],
                         feasible: Any = None) -> Any:
        evicted_from = [t.node for t in victims]
        out = allocate(solver, scenario, stmt, nodes, victims, feasible)
        w.all_back = all(t.status != Status.RELEASING for t in victims)
        w.moved = any(t.status != Status.RELEASING and t.node != node for t, node in zip(victims, evicted_from))
        return out

    def simulate_wrapped(solver: Any, scenario: Any, stmt: Any, feasible: Any, victims: list[Task],
                         provable: bool, start: int = 0) -> Any:
        w.cannot_fit = w.proven = w.all_back = w.moved = False
        shared = "fraction among the victims" if any(t.request.is_shared for t in victims) else "whole GPUs or CPU"
        apart = "each victim on its own node" if len({t.node for t in victims}) == len(victims) else "victims share a node"
        t0 = time.perf_counter()
        out = simulate(solver, scenario, stmt, feasible, victims, provable, start)
        seconds = time.perf_counter() - t0
        if out is not None:
            ending = "solution" if out.solved else ("proven" if w.proven else "refused")
        elif w.cannot_fit:
            ending = "cannot fit"
        else:
            ending = "unplaced, all back" if w.all_back else "unplaced, some out"
        w.searches[-1].endings[ending] += 1
        w.seconds[ending] = w.seconds.get(ending, 0.0) + seconds
        w.kinds[ending, shared] += 1
        w.kinds[ending, apart] += 1
        if ending.startswith("unplaced"):
            w.kinds[ending, "a victim placed elsewhere" if w.moved else "every victim placed went back"] += 1
            if not w.moved and shared == "whole GPUs or CPU":
                w.kinds[ending, "both of the last two"] += 1
        return out

    for owner, name, wrapped in ((solve.JobSolver, "solve", solve_wrapped), (solve, "_simulate", simulate_wrapped),
                                 (solve, "solve_scenario", scenario_wrapped),
                                 (solve, "_preemptor_cannot_fit", cannot_fit_wrapped),
                                 (solve, "_allocate_virtually", allocate_wrapped),
                                 (proofs.ReclaimRefusals, "refuses", refuses_wrapped)):
        setattr(owner, name, wrapped)
    return w


def cluster_doc(shape: str) -> dict[str, Any]:
    if shape == "large":
        doc = large.shape(4000, 5000)
        doc["actions"] = list(openb.ALL_ACTIONS)
        return doc
    nodes = openb.read_csv("openb_node_list_all_node.csv")
    pods = sorted(openb.read_csv("openb_pod_list_default.csv"), key=lambda p: int(p["creation_time"]))
    return openb.scenario_doc(nodes, pods, openb.ALL_ACTIONS)


def report(w: Watch, action_seconds: dict[str, float], top: int) -> None:
    print("seconds per action:", {a: round(s, 2) for a, s in action_seconds.items()})
    searches = sorted(w.searches, key=lambda s: -s.seconds)
    print(f"\n{len(searches)} searches; the {min(top, len(searches))} longest:")
    print(f"{'action':<14}{'job':<22}{'solved':<8}{'seconds':>8}{'sims':>7}  endings")
    for s in searches[:top]:
        endings = ", ".join(f"{e} {n}" for e, n in s.endings.most_common())
        print(f"{s.action:<14}{s.job:<22}{s.solved!s:<8}{s.seconds:>8.2f}{sum(s.endings.values()):>7}  {endings}")
    failed = [s for s in searches if not s.solved]
    in_searches = sum(s.seconds for s in searches)
    simulating = sum(w.seconds.values())
    print(f"\nfailed searches: {len(failed)}, {sum(s.seconds for s in failed):.1f} s of {in_searches:.1f} s in "
          f"searches: {simulating:.1f} s simulating, {w.scenario_seconds - simulating:.1f} s evicting and rolling "
          f"back around the simulations, {in_searches - w.scenario_seconds:.1f} s building scenarios and the rest")
    total = Counter[str]()
    for s in searches:
        total.update(s.endings)
    print(f"\n{'ending':<22}{'sims':>8}{'seconds':>9}  kinds")
    for e in ENDINGS:
        kinds = ", ".join(f"{k} {n}" for (ending, k), n in sorted(w.kinds.items()) if ending == e)
        print(f"{e:<22}{total[e]:>8}{w.seconds.get(e, 0.0):>9.2f}  {kinds}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--shape", choices=("openb", "large"), default="openb")
    ap.add_argument("--top", type=int, default=15, help="searches listed, longest first")
    a = ap.parse_args()
    doc = cluster_doc(a.shape)
    scn = scenario_from_doc(doc, f"<{a.shape}>")
    bundle = load(None)
    with paused_gc():
        cluster = scn.snapshot()
    w = watch_solver()
    result = run_cycle(cluster, config_from(doc.get("config"), actions=doc["actions"], params=Params()), bundle)
    report(w, result.action_seconds, a.top)


if __name__ == "__main__":
    main()
