"""yamlsafe.build: the same data as PyYAML's safe loader, or a refusal with its kind and place."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
import yaml

from kaipolicy import yamlsafe
from kaipolicy.errors import InputError, YamlError

LIMITS = yamlsafe.Limits(max_bytes=4096, max_depth=8, alias_values=100, what="test document")
NO_ALIASES = yamlsafe.Limits(max_bytes=4096, max_depth=8, alias_values=0, what="rule file")

SAME_AS_SAFE_LOAD = [
    "a: 1\nb: [x, 'y', \"z\"]\nc: {d: null, e: ~, f: true, g: no, h: 1.5, i: 0x10, j: 1_000}\n",
    "plain: hello world\nquoted: '010'\nint: 010\nsexagesimal: 1:30\nfloat: 6.4e+10\ntext: 64e9\n",
    "empty:\nlist: []\nmap: {}\nblock: |\n  two\n  lines\n",
    "when: 2001-12-14\nexact: 2001-12-14t21:59:43.10-05:00\n",
    "- &a {x: 1}\n- *a\n- {<<: *a, y: 2}\n- {<<: [*a, {x: 3, z: 4}], x: 5}\n",
    "inf: .inf\nnan: .NaN\nneg: -.inf\nmerge_text: '<<'\n",
    "\ufeffbom: first\n",
    "",
    "# only a comment\n",
    "[1, [2, [3]]]\n",
    "!!str 12: !!int '7'\nk: !!float 3\nn: !!null ''\nb: !!bool yes\n",
]


@pytest.mark.parametrize("text", SAME_AS_SAFE_LOAD)
def test_documents_read_as_pyyaml_safe_load_reads_them(text: str) -> None:
    got = yamlsafe.load(text, "doc.yaml", LIMITS)
    want = yaml.safe_load(text)
    assert _same(got, want), (got, want)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_an_alias_is_an_independent_copy_of_its_anchor() -> None:
    data = yamlsafe.load("a: &x {n: [1]}\nb: *x\n", "doc.yaml", LIMITS)
    data["b"]["n"].append(2)
    assert data["a"] == {"n": [1]}


REFUSED = [
    # (case, text, limits, code, line, column, message fragment)
    ("duplicate key", "a: 1\nb:\n  c: 1\n  c: 2\n", LIMITS, "duplicate-key", 4, 3,
     "duplicate key 'c' in the mapping that starts at line 3"),
    ("duplicate key after a merge is fine, twice is not", "a: &x {k: 1}\nb: {<<: *x, k: 2, k: 3}\n", LIMITS,
     "duplicate-key", 2, 19, "duplicate key 'k'"),
    ("alias in a rule file", "a: &x 1\nb: *x\n", NO_ALIASES, "alias", 2, 4, "aliases (*x) are not allowed in a rule file"),
    ("alias to nothing", "a: *nope\n", LIMITS, "alias", 1, 4, "the alias *nope names no anchor"),
    ("recursive alias", "a: &r [1, *r]\n", LIMITS, "alias", 1, 11, "refers to a value that contains it"),
    ("alias expansion past the budget", "a: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n",
     LIMITS, "alias", 2, 38, "expand this test document by more than 100 values"),
    ("too deep", "a: " + "[" * 9 + "]" * 9 + "\n", LIMITS, "depth", 1, 11, "nested deeper than 8 levels"),
    ("two documents", "a: 1\n---\nb: 2\n", LIMITS, "documents", 2, 1, "more than one YAML document"),
    ("unsafe tag", "a: !!python/object:os.system {}\n", LIMITS, "tag", 1, 4, "is not allowed"),
    ("set tag", "a: !!set {x}\n", LIMITS, "tag", 1, 4, "is not allowed"),
    ("binary tag", "a: !!binary aGVsbG8=\n", LIMITS, "tag", 1, 4, "is not allowed"),
    ("a list as a key", "? [a, b]\n: 1\n", LIMITS, "key", 1, 3, "a mapping key must be a plain value"),
    ("an alias of a list as a key", "a: &k [1]\n? *k\n: 2\n", LIMITS, "key", 2, 3, "a mapping key must be a plain value"),
    ("a merge of a scalar", "a: &x 1\nb: {<<: *x}\n", LIMITS, "merge", 2, 9, "a merge key (<<) takes a mapping"),
    ("an integer of 5000 digits", "n: " + "9" * 5000 + "\n", LIMITS, "value", 1, 4, "5000 digits is too long"),
    ("the YAML 1.1 value key", "a: =\n", LIMITS, "value", 1, 4, "cannot read '='"),
    ("a control character", "a: \"x\x01\"\n", LIMITS, "syntax", 1, 6, "character U+0001 is not allowed"),
    ("a control character after multi-byte text", "é: ü\x7f\n", LIMITS, "syntax", 1, 5, "U+007F"),
    ("an escaped lone surrogate", 'a: "\\ud800"\n', LIMITS, "syntax", 1, 7, "invalid Unicode character escape"),
    ("a code point past U+10FFFF", 'a: "\\U00110000"\n', LIMITS, "syntax", 1, 7, "invalid Unicode"),
    ("malformed", "a: [1,\n  b: }\n", LIMITS, "syntax", 2, 6, "malformed YAML"),
]


@pytest.mark.parametrize(("text", "limits", "code", "line", "column", "fragment"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_refusals_name_the_kind_and_the_place(text: str, limits: yamlsafe.Limits, code: str, line: int,
                                              column: int, fragment: str) -> None:
    with pytest.raises(YamlError) as info:
        yamlsafe.load(text, "doc.yaml", yamlsafe.Limits(10**6, limits.max_depth, limits.alias_values, limits.what))
    err = info.value
    assert (err.code, err.line, err.column) == (code, line, column), str(err)
    assert fragment in err.message
    assert str(err).startswith(f"doc.yaml:{line}:{column}: ")
    assert isinstance(err, InputError)


def test_text_with_a_lone_surrogate_is_refused_with_its_place() -> None:
    with pytest.raises(YamlError) as info:
        yamlsafe.load("a: 1\nb: x\ud800\n", "doc.yaml", LIMITS)
    assert (info.value.code, info.value.line, info.value.column) == ("encoding", 2, 5)


def test_the_billion_laughs_is_refused_in_milliseconds() -> None:
    laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
    start = time.perf_counter()
    with pytest.raises(YamlError, match="expand this test document by more than 100 values"):
        yamlsafe.load(laughs, "doc.yaml", LIMITS)
    with pytest.raises(YamlError, match="aliases"):
        yamlsafe.compose(laughs, "doc.yaml", NO_ALIASES)
    assert time.perf_counter() - start < 5
