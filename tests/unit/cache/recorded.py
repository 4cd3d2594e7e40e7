"""Objects recorded from a real kube-apiserver (tests/unit/cache/recorded/*.yaml), by kind and name,
each handed out as a fresh copy that a test may change."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.errors import ObjectError

HERE = Path(__file__).resolve().parent / "recorded"


@functools.cache
def _objects(kind: str) -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((HERE / f"{kind}.yaml").read_text())
    return {d["metadata"]["name"]: d for d in docs if d}


def recorded(kind: str, name: str) -> dict[str, Any]:
    """A copy of the recorded object: `kind` is the file (nodes, pods, podgroups, queues, bindrequests)."""
    return copy.deepcopy(_objects(kind)[name])


def refusal(convert: Callable[[dict[str, Any]], Any], obj: dict[str, Any]) -> str:
    """The message of the ObjectError `convert` raises on `obj` (the test fails if it raises none)."""
    with pytest.raises(ObjectError) as e:
        convert(obj)
    return str(e.value)
