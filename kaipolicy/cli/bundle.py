"""Finding and loading the rule bundle the CLI uses (the default one unless told otherwise)."""

from __future__ import annotations

from kaipolicy.workflow.bundles import default_policies, load

__all__ = ["default_policies", "load"]
