"""Finding and loading the rule bundle the CLI uses (the default one unless told otherwise)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kaipolicy.errors import ConfigError
from kaipolicy.paths import data_dir


def default_policies() -> Path:
    env = os.environ.get("KAIPOLICY_POLICIES")
    if env:
        return Path(env)
    here = data_dir("policies")
    if here.is_dir():
        return here
    raise ConfigError("cannot find the default rule bundle: set KAIPOLICY_POLICIES or pass --policies DIR")


def load(paths: list[str] | None) -> Any:
    from kaipolicy.rules import load_bundle
    from kaipolicy.rules.standard import VOCABULARY

    chosen = [Path(p) for p in paths] if paths else [default_policies()]
    return load_bundle(chosen, VOCABULARY)
