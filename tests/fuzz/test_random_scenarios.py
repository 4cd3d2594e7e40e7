"""Random schema-valid scenarios never crash the engine and keep its invariants.

Each case runs a block of seeds through `tests.fuzz.properties.check`: no exception but a
KaipolicyError, no rule errors, known states, placed tasks on existing nodes, no node over its
GPU / CPU / MIG capacity, no pod evicted twice in a cycle, the same report twice, the same
placements with `vectorize=False`. Seeds that find a known engine bug are left out (KNOWN);
`python -m tests.fuzz.generate --seeds 0-5000 -j 2` runs a longer search.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.fuzz.generate import ACTIONS, STATES, STATS, scenario
from tests.fuzz.properties import check

SEEDS = range(480)
BLOCK = 40

#: Seeds in SEEDS that fail because of an engine bug, with the failure class. None do today.
#: Earlier failing seeds (generator as committed), all fixed, with regression tests in
#: tests/unit/actions/test_regressions.py: moved victims evicted again (1387 2070 2448 2776 3554
#: 3887 21361 21906 23187 25254 25961), queueDepthPerAction 0 crash (22161 23299), a new shared
#: group bound on a releasing device (20713), fractions below 0.01 GPU (1990, now refused).
KNOWN: dict[int, str] = {}


@pytest.mark.parametrize("start", range(SEEDS.start, SEEDS.stop, BLOCK))
def test_random_scenarios_keep_the_engines_invariants(start: int) -> None:
    failures = []
    for seed in range(start, min(start + BLOCK, SEEDS.stop)):
        if seed in KNOWN:
            continue
        failures += [f"seed {seed}: {f.kind}: {f.detail}" for f in check(scenario(seed))]
    assert not failures, "\n".join(failures)


def test_the_generator_covers_the_format_and_rarely_needs_a_second_try() -> None:
    seen: Counter[str] = Counter()
    before = dict(STATS)
    for seed in range(300):
        doc = scenario(seed)
        seen.update(f"action {a}" for a in doc["actions"])
        seen.update(f"state {t['state']}" for j in doc["jobs"] for t in j["tasks"])
        seen.update(f"node {n.get('migStrategy', 'none')}" for n in doc["nodes"])
        seen.update(f"job {k}" for j in doc["jobs"] for k in j)
        seen.update(f"request {k}" for j in doc["jobs"] for k in j["perTask"])
        seen.update(f"config {k}" for k in doc.get("config", {}))
        seen.update("gpuspread" for p in doc.get("config", {}).get("tiers", [{"plugins": []}])[0]["plugins"]
                    if p["name"] == "gpuspread")
    wanted = ([f"action {a}" for a in ACTIONS] + [f"state {s}" for s in STATES]
              + ["node none", "node single", "node mixed", "job subGroups", "job topologyConstraint",
                 "job minAvailable", "job deleted", "job staleSeconds", "job lastStartMinutesAgo",
                 "request gpuDevices", "request gpuMemoryMiB", "request mig", "config tiers",
                 "config queueDepthPerAction", "gpuspread"])
    assert [w for w in wanted if not seen[w]] == []
    generated = STATS["generated"] - before.get("generated", 0)
    rejected = STATS["rejected"] - before.get("rejected", 0)
    assert rejected <= generated // 20, f"{rejected} of {generated} generated documents failed the schema"
