"""Where the project's data folders are: beside the package in a checkout (or an editable
install), or under `<prefix>/share/kaipolicy/` when installed from a wheel."""

from __future__ import annotations

import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[1]


def data_dir(name: str) -> Path:
    """`policies` or `schemas`: the first of the checkout's folder and the installed one that exists."""
    for base in (_CHECKOUT, Path(sys.prefix) / "share" / "kaipolicy"):
        candidate = base / name
        if candidate.is_dir():
            return candidate
    return _CHECKOUT / name
