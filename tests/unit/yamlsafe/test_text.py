"""yamlsafe.text: the encodings read, the bytes refused with their place, the size limit."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from kaipolicy import yamlsafe
from kaipolicy.errors import YamlError

LIMITS = yamlsafe.Limits(max_bytes=4096, max_depth=8, alias_values=100, what="test document")


ENCODED = [
    ("utf-8", "a: é\n".encode()),
    ("utf-8 with a BOM", codecs.BOM_UTF8 + "a: é\n".encode()),
    ("utf-16 LE with a BOM", codecs.BOM_UTF16_LE + "a: é\n".encode("utf-16-le")),
    ("utf-16 BE with a BOM", codecs.BOM_UTF16_BE + "a: é\n".encode("utf-16-be")),
    ("utf-32 with a BOM", "a: é\n".encode("utf-32")),
]


@pytest.mark.parametrize("data", [c[1] for c in ENCODED], ids=[c[0] for c in ENCODED])
def test_utf_8_16_and_32_with_their_byte_order_mark_are_read(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "doc.yaml"
    path.write_bytes(data)
    assert yamlsafe.load(yamlsafe.read_text(path, LIMITS), str(path), LIMITS) == {"a": "é"}


UNREADABLE = [
    ("latin-1", "a: 1\nb: café\n".encode("latin-1"), 2, 7, "not UTF-8 text (byte 0xe9): save the file as UTF-8"),
    ("utf-16 without a BOM", "a: 1\n".encode("utf-16-le"), 1, 1, "looks like UTF-16 or UTF-32"),
    ("broken utf-16", codecs.BOM_UTF16_LE + b"a\x00\x00\xd8", 1, 2, "not UTF-16 text"),
]


@pytest.mark.parametrize(("data", "line", "column", "fragment"), [c[1:] for c in UNREADABLE],
                         ids=[c[0] for c in UNREADABLE])
def test_bytes_that_are_not_text_are_refused_with_the_place_of_the_first_bad_one(
        tmp_path: Path, data: bytes, line: int, column: int, fragment: str) -> None:
    path = tmp_path / "doc.yaml"
    path.write_bytes(data)
    with pytest.raises(YamlError) as info:
        yamlsafe.read_text(path, LIMITS)
    assert (info.value.code, info.value.line) == ("encoding", line)
    assert fragment in info.value.message


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a: 1\n" * 1000)
    with pytest.raises(YamlError, match="the test document is larger than 4 KiB"):
        yamlsafe.read_text(path, LIMITS)


def test_an_endless_file_is_refused_at_the_size_limit() -> None:
    with pytest.raises(YamlError) as info:
        yamlsafe.read_text("/dev/zero", LIMITS)
    assert info.value.code == "size"


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_a_path_that_cannot_be_read_says_why(tmp_path: Path, what: str) -> None:
    path = tmp_path / "nope.yaml" if what == "missing" else tmp_path
    with pytest.raises(YamlError) as info:
        yamlsafe.read_text(path, LIMITS)
    assert info.value.code == "read" and str(path) in str(info.value)
