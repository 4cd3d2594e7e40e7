"""What the machine a benchmark ran on is, printed with its figures: the sessions that measure this
project's targets run on machines of different speeds (one ran the same code three times slower
than the one before, bench/README.md, "the eighth session"), so a figure means little without it.

Two fixed pieces of work stand for the two kinds the engine does: a pure-Python loop and a numpy
pass over a node table's worth of rows. Their times change with the machine and its load, never
with the code under test; compare a benchmark's figures across machines only through them, or by
instruction counts (bench/instructions.py).
"""

from __future__ import annotations

import os
import platform
import timeit
from typing import Any

import numpy as np

#: the rows of the numpy pass: the openb trace's nodes, 8 resources each
ROWS = 1523


def cpu_model() -> str:
    """The CPU's model name and clock as the kernel reports them (a virtual machine's model name
    can be as bare as "AMD EPYC"), else the platform's word for it."""
    found: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                found.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = found.get("model name") or platform.processor() or platform.machine()
    mhz = found.get("cpu MHz")
    return f"{model} at {float(mhz):.0f} MHz" if mhz else model


def python_loop_ms() -> float:
    """Milliseconds of summing a million integers in a Python loop, the best of five."""
    return min(timeit.repeat("sum(range(1_000_000))", number=1, repeat=5)) * 1000


def numpy_pass_us() -> float:
    """Microseconds of one feasibility-like pass (compare, reduce a row) over ROWS x 8 values, the
    best of five runs of 200."""
    table = np.random.default_rng(0).random((ROWS, 8))
    best = min(timeit.repeat(lambda: (table > 0.5).all(axis=1), number=200, repeat=5))
    return best / 200 * 1e6


def describe() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "pythonLoopMs": round(python_loop_ms(), 1),
            "numpyPassUs": round(numpy_pass_us(), 1)}
