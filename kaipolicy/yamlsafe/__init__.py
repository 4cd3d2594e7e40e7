"""YAML as untrusted input: bounded size, depth and alias expansion, strict encoding, no duplicate keys.

Parsing is libyaml's (PyYAML's C parser). `load` builds plain data straight from its events (no
node graph), an alias becoming an independent copy counted against a budget; `compose` (for rule
files, which need every node's place) checks the same limits first. Every refusal is a
`YamlError` with the file, line and column. No scenario or rule semantics live here.
"""

from kaipolicy.yamlsafe.build import load
from kaipolicy.yamlsafe.events import scalar_value
from kaipolicy.yamlsafe.nodes import compose, positions
from kaipolicy.yamlsafe.text import Limits, decode, read_text

__all__ = ["Limits", "compose", "decode", "load", "positions", "read_text", "scalar_value"]
