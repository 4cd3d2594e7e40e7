"""What the scalar emitter generates for the default bundle: typed Python, no dyn helpers."""

from __future__ import annotations

import re
from pathlib import Path

from kaipolicy.rules import load_bundle
from kaipolicy.rules.emit import DYNAMIC_HELPERS, HELPERS
from kaipolicy.rules.standard import VOCABULARY

POLICIES = Path(__file__).resolve().parents[3] / "policies"


def test_the_default_bundle_runs_typed_code_only() -> None:
    """Its rules are typed throughout, so none of its generated code goes through the slower
    helpers that give CEL's semantics to values behind dyn (the hot path stays plain Python)."""
    assert DYNAMIC_HELPERS <= HELPERS.keys()
    bundle = load_bundle([POLICIES], VOCABULARY)
    called = {name for plugin in bundle.plugins.values() for rule in plugin.rules
              for name in re.findall(r"\b_[a-z][a-z0-9_]*\b", rule.source)}
    assert called & DYNAMIC_HELPERS == set()
