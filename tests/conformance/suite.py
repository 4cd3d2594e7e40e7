"""The official CEL conformance suite (cel-spec `tests/simple/testdata`): where it is, and its cases.

The suite is never committed here. It is found, in this order, at `$KAIPOLICY_CEL_SPEC` (a
cel-spec checkout, a `cel.dev/expr` module folder or a testdata folder) or in `.cache/cel-spec/`,
which `python -m tests.conformance.fetch` fills (see that module for where from).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.conformance import textproto
from tests.conformance.textproto import Message

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "cel-spec"
ENV_VAR = "KAIPOLICY_CEL_SPEC"
MARKER = "SOURCE"  # the file fetch writes beside the suite: which copy it is
RESULT_KINDS = ("value", "typed_result", "eval_error", "any_eval_errors", "unknown", "any_unknowns")


@dataclass(frozen=True)
class Case:
    """One conformance test: `file/section/name`, its expression, environment and expectation."""

    file: str
    section: str
    name: str
    expr: str
    disable_macros: bool = False
    disable_check: bool = False
    check_only: bool = False
    container: str = ""
    type_env: dict[str, Message] = field(default_factory=dict)     # name -> cel.expr.Type
    functions: tuple[str, ...] = ()                                 # names of declared functions
    bindings: dict[str, Message] = field(default_factory=dict)     # name -> cel.expr.Value
    expect: str = "value"                                           # one of RESULT_KINDS
    value: Message | None = None                                    # the expected cel.expr.Value
    deduced_type: Message | None = None                             # typed_result's cel.expr.Type

    @property
    def id(self) -> str:
        return f"{self.file}/{self.section}/{self.name}"


def locate() -> tuple[Path | None, str]:
    """(the folder holding the *.textproto files, "") or (None, why it is not there)."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        base = Path(configured)
        for folder in (base / "tests" / "simple" / "testdata", base):
            if any(folder.glob("*.textproto")):
                return folder, ""
        return None, f"${ENV_VAR}={configured} holds no *.textproto files (nor tests/simple/testdata/)"
    if any(CACHE.glob("*.textproto")):
        return CACHE, ""
    return None, (f"the CEL conformance suite is not in {CACHE}: run `python -m tests.conformance.fetch` "
                  f"(or point ${ENV_VAR} at a cel-spec checkout)")


def describe(folder: Path) -> str:
    """Which copy of the suite a folder holds: fetch's SOURCE line, or the folder itself."""
    marker = folder / MARKER
    if marker.exists():
        return marker.read_text(encoding="utf-8").strip()
    return f"{folder} (${ENV_VAR})" if os.environ.get(ENV_VAR) else str(folder)


def load_cases(folder: Path) -> list[Case]:
    cases: list[Case] = []
    for path in sorted(folder.glob("*.textproto")):
        document = textproto.read(path.read_text(encoding="utf-8"))
        for section in document.messages("section"):
            for test in section.messages("test"):
                cases.append(_case(path.stem, section.text("name"), test))
    return cases


def _case(file: str, section: str, test: Message) -> Case:
    type_env: dict[str, Message] = {}
    functions: list[str] = []
    for decl in test.messages("type_env"):
        ident = decl.message("ident")
        if ident is not None and ident.message("type") is not None:
            type_env[decl.text("name")] = ident.message("type") or Message()
        else:
            functions.append(decl.text("name"))
    bindings: dict[str, Message] = {}
    for entry in test.messages("bindings"):
        expr_value = entry.message("value") or Message()
        bindings[entry.text("key")] = expr_value.message("value") or expr_value
    expect = next((kind for kind in RESULT_KINDS if test.has(kind)), "value")
    value = test.message("value")
    deduced = None
    if expect == "typed_result":
        typed = test.message("typed_result") or Message()
        value, deduced = typed.message("result"), typed.message("deduced_type")
    elif not test.has("value") and expect == "value":
        value = Message({"bool_value": ["true"]})  # the format's default: the expression is true
    return Case(file, section, test.text("name"), test.text("expr"), test.flag("disable_macros"),
                test.flag("disable_check"), test.flag("check_only"), test.text("container"), type_env,
                tuple(functions), bindings, expect, value, deduced)
