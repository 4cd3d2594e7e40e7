"""The documented subset of CEL (docs/policy-language.md, "Conformance"): which cases are in it.

`exclusion(case)` names the feature that puts a case outside, or returns None. The rules look
only at the case (its file, flags, environment, expected value and the words of its
expression), never at how kaipolicy fares on it, so a bug cannot move a case out of the subset.
"""

from __future__ import annotations

import re

from tests.conformance.suite import Case
from tests.conformance.values import Unsupported, to_type, to_typed

FILES_OUT = {
    "dynamic": "protobuf messages and well-known types",
    "enums": "protobuf enums",
    "proto2": "protobuf messages",
    "proto2_ext": "protobuf messages",
    "proto3": "protobuf messages",
    "wrappers": "protobuf wrapper types",
    "namespace": "containers and qualified names",
    "timestamps": "timestamps and durations",
    "unknowns": "partial evaluation (unknowns)",
    "optionals": "optional values",
    "macros2": "two-variable comprehensions",
    "bindings_ext": "extension libraries",
    "block_ext": "extension libraries",
    "encoders_ext": "extension libraries",
    "math_ext": "extension libraries",
    "network_ext": "extension libraries",
    "string_ext": "extension libraries",
}
# Words of the expression (string and bytes literals blanked out) that need a feature outside.
TYPE_NAMES = r"int|uint|double|bool|string|bytes|list|map|null_type|type|dyn"
FEATURES = (
    ("type() and type values", re.compile(rf"\btype\s*\(|(?<![.\w])({TYPE_NAMES})\b(?!\s*\()")),
    ("timestamps and durations", re.compile(r"\b(timestamp|duration)\s*\(")),
    ("optional values", re.compile(r"\boptional\.|\?\.|\[\?|\.\?|\.(hasValue|orValue|or)\s*\(")),
    ("protobuf messages", re.compile(r"\bgoogle\.protobuf\b|TestAllTypes|\b(?!in\b)[A-Za-z_][\w.]*\s*\{")),
    ("extension libraries", re.compile(r"\b(cel\.(bind|block)|math\.|strings\.|base64\.|sets\.|lists\.)")),
)
# String and bytes literals, and backquoted field names (`content-type`), whose words do not count.
_QUOTED = re.compile(r"""[rRbB]{0,2}("{3}(.|\n)*?"{3}|'{3}(.|\n)*?'{3}|"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*')"""
                     r"|`[\w.\-/ ]+`")


def exclusion(case: Case) -> str | None:
    """The feature outside the documented subset that this case needs, or None when it is inside."""
    if case.file in FILES_OUT:
        return FILES_OUT[case.file]
    if case.disable_check:
        return "evaluation without the type checker"
    if case.container:
        return "containers and qualified names"
    if case.functions:
        return "function declarations"
    if case.disable_macros:
        return "parsing without macros"
    if case.expect in ("unknown", "any_unknowns"):
        return "partial evaluation (unknowns)"
    if any("." in name for name in (*case.type_env, *case.bindings)):
        return "containers and qualified names"
    words = _QUOTED.sub('""', case.expr)
    for feature, pattern in FEATURES:
        if pattern.search(words):
            return feature
    return _unsupported_values(case)


def _unsupported_values(case: Case) -> str | None:
    try:
        for decl in case.type_env.values():
            to_type(decl)
        for value in case.bindings.values():
            to_typed(value)
        if case.value is not None:
            to_typed(case.value)
        if case.deduced_type is not None:
            to_type(case.deduced_type)
    except Unsupported as err:
        return str(err)
    return None

