"""Finding and building rule bundles: the default one, folders added to it, and a test suite's
bundle (argument defaults and rule modes applied), built once per distinct description."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

from kaipolicy.errors import ConfigError
from kaipolicy.paths import data_dir
from kaipolicy.rules import Bundle, load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.workflow.suite import BundleSpec


def default_policies() -> Path:
    env = os.environ.get("KAIPOLICY_POLICIES")
    if env:
        return Path(env)
    here = data_dir("policies")
    if here.is_dir():
        return here
    raise ConfigError("cannot find the default rule bundle: set KAIPOLICY_POLICIES or pass --policies DIR")


def load(paths: list[str] | None) -> Bundle:
    """The rule files and folders given, or the default bundle when none are."""
    chosen = [Path(p) for p in paths] if paths else [default_policies()]
    return load_bundle(chosen, VOCABULARY)


@lru_cache(maxsize=32)
def build(spec: BundleSpec) -> Bundle:
    paths = ([str(default_policies())] if spec.default else []) + list(spec.policies)
    bundle = load(paths) if paths else load_bundle([], VOCABULARY)
    arguments = json.loads(spec.arguments)
    if arguments:
        bundle = bundle.with_arguments(arguments)
    if spec.modes:
        bundle = bundle.with_modes(dict(spec.modes))
    return bundle
