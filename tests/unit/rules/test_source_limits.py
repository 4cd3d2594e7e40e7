"""Rule-file text handed over directly (as from a ConfigMap) meets the same limits as a file."""

from __future__ import annotations

import pytest

from kaipolicy.rules.source import LIMITS, read_source

GOOD = "plugin: p\nrules:\n  - name: r\n    hook: jobOrder\n    key: \"[-job.priority]\"\n"


@pytest.mark.parametrize(("text", "code", "line", "column"), [
    (GOOD.replace("plugin: p", "plugin: p\ndescription: \"\ud800\""), "E001", 2, 15),
    (GOOD + "# " + "x" * LIMITS.max_bytes, "E006", 1, 1),
    (GOOD.replace("key:", "weight: &w 1\n    other: *w\n    key:"), "E007", 6, 12),
    (GOOD + "args: " + "[" * 40 + "]" * 40 + "\n", "E008", 6, 38),
    (GOOD + "---\n" + GOOD, "E002", 6, 1),
])
def test_text_breaking_a_limit_is_one_diagnostic_with_its_place(text: str, code: str, line: int,
                                                                column: int) -> None:
    src, diagnostics = read_source("configmap/rules.yaml", text)
    assert [(d.code, d.file, d.line, d.column) for d in diagnostics] == [(code, "configmap/rules.yaml", line, column)]
    assert src.data is None


def test_text_within_the_limits_reads_with_its_places() -> None:
    src, diagnostics = read_source("configmap/rules.yaml", GOOD)
    assert diagnostics == []
    assert src.data["rules"][0]["key"] == "[-job.priority]"
    assert src.expr_place(("rules", 0, "key"), 1) == (5, 12)   # the "-" after the quote and "["
