"""Rule files -> compiled hooks: source, schema, parse, check, cost, compile (+ vectorize).

Load a directory of rule files with `load_bundle`; bind a plugin's arguments with
`Bundle.instantiate`; `lint` reports problems without loading.
"""

from __future__ import annotations

from kaipolicy.rules.bundle import Bundle, PluginInstance, load_bundle
from kaipolicy.rules.compile import BoundRule, CompiledRule
from kaipolicy.rules.diagnostics import Diagnostic
from kaipolicy.rules.lint import lint
from kaipolicy.rules.plugin import CompiledPlugin
from kaipolicy.rules.runtime import EvalError
from kaipolicy.rules.vocabulary import FieldSpec, FunctionSpec, TypeSpec, Vocabulary

__all__ = [
    "BoundRule", "Bundle", "CompiledPlugin", "CompiledRule", "Diagnostic", "EvalError", "FieldSpec",
    "FunctionSpec", "PluginInstance", "TypeSpec", "Vocabulary", "lint", "load_bundle",
]
