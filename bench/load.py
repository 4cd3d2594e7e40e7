"""Scenario loading on the openb trace's size (about 2 MB of YAML); prints JSON.

The scenario: every node of ../shared/data/openb/openb_node_list_all_node.csv (GPU nodes get
16000 MiB per device and their model as `nvidia.com/gpu.product`), every pod of
openb_pod_list_default.csv as a pending one-pod job (`num_gpu` whole GPUs, or `gpu_milli`/1000 of
one GPU below 1000) in a queue per `qos` class, written as block YAML. Per phase, the median of
--repeat runs: PyYAML's pure-Python safe loader (what kaipolicy used before), PyYAML's C loader,
kaipolicy's loader (libyaml events, limits), validation, and `load_scenario` end to end; plus
the peak traced memory of `load_scenario`. Ratios within one run are what to compare.

usage: python bench/load.py [--repeat 3] [--trace DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from kaipolicy import yamlsafe
from kaipolicy.cache.scenario_schema import validate_scenario
from kaipolicy.cache.scenario_source import LIMITS, load_scenario

ROOT = Path(__file__).resolve().parent.parent
TRACE = Path(os.environ.get("KAIPOLICY_OPENB", ROOT.parent / "shared" / "data" / "openb"))


def openb_scenario(trace: Path) -> dict[str, Any]:
    nodes = []
    with open(trace / "openb_node_list_all_node.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            gpus = int(r["gpu"])
            node: dict[str, Any] = {"name": r["sn"], "gpus": gpus, "cpuMillis": int(r["cpu_milli"]),
                                    "memoryBytes": int(r["memory_mib"]) * 2**20, "maxPods": 110,
                                    "labels": {"nvidia.com/gpu.count": str(gpus)}}
            if gpus:
                node["gpuMemoryMiB"] = 16000
                node["labels"]["nvidia.com/gpu.product"] = r["model"]
            nodes.append(node)
    jobs = []
    with open(trace / "openb_pod_list_default.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            request: dict[str, Any] = {"cpuMillis": int(r["cpu_milli"]), "memoryBytes": int(r["memory_mib"]) * 2**20}
            whole, milli = int(r["num_gpu"]), int(r["gpu_milli"])
            if whole >= 1 and milli < 1000:
                request["gpus"] = milli / 1000
            elif whole:
                request["gpus"] = whole
            jobs.append({"name": r["name"], "queue": f"q-{r['qos']}", "priority": 50, "perTask": request,
                         "tasks": [{"name": f"{r['name']}-0", "state": "Pending"}]})
    queues = [{"name": q} for q in sorted({j["queue"] for j in jobs})]
    return {"name": "openb", "actions": ["allocate"], "queues": queues, "nodes": nodes, "jobs": jobs}


def median_seconds(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", type=Path, default=TRACE)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "openb.yaml"
        path.write_text(yaml.safe_dump(openb_scenario(args.trace), sort_keys=False, width=200), encoding="utf-8")
        text = path.read_text(encoding="utf-8")
        doc = yamlsafe.load(text, str(path), LIMITS)
        figures: dict[str, Any] = {
            "bytes": len(text.encode("utf-8")), "nodes": len(doc["nodes"]), "jobs": len(doc["jobs"]),
            "pyyaml_python_safe_load_s": median_seconds(lambda: yaml.load(text, Loader=yaml.SafeLoader), 1),
            "pyyaml_c_safe_load_s": median_seconds(lambda: yaml.load(text, Loader=yaml.CSafeLoader), args.repeat),
            "yamlsafe_load_s": median_seconds(lambda: yamlsafe.load(text, str(path), LIMITS), args.repeat),
            "validate_s": median_seconds(lambda: validate_scenario(doc, str(path)), args.repeat),
            "load_scenario_s": median_seconds(lambda: load_scenario(path), args.repeat),
        }
        tracemalloc.start()
        load_scenario(path)
        figures["load_scenario_peak_mib"] = round(tracemalloc.get_traced_memory()[1] / 2**20, 1)
        tracemalloc.stop()
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
