"""Bytes to text: the size limit, the encodings accepted, and places in the text.

`Limits` is what one kind of document may cost; `read_text` refuses a file over its size (it
reads no further) or not UTF-8 (UTF-16/32 only with a byte-order mark), naming the first bad byte.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from pathlib import Path

from kaipolicy.errors import YamlError

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


@dataclass(frozen=True)
class Limits:
    """What one kind of document may cost. `alias_values` is how many values aliases may add
    in all when expanded (each alias copies its anchor's value); 0 refuses aliases outright."""

    max_bytes: int
    max_depth: int
    alias_values: int
    what: str = "file"      # how messages name the document: "rule file", "scenario"


def read_text(path: str | Path, limits: Limits) -> str:
    """The file's text; refuses a file over the size limit (read no further) or not UTF-8/16/32."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as err:
        raise YamlError(name, "read", f"cannot read: {err.strerror or err}") from err
    if len(data) > limits.max_bytes:
        raise YamlError(name, "size", f"the {limits.what} is larger than {_size(limits.max_bytes)}, "
                                      "the limit for one document")
    return decode(data, name)


def decode(data: bytes, name: str) -> str:
    """UTF-8 (a byte-order mark is allowed); UTF-16 and UTF-32 only with their byte-order mark."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec).lstrip("\ufeff")
            except UnicodeDecodeError as err:
                raise _undecodable(name, data, err, codec) from err
    if b"\x00" in data[:256]:
        # NUL is never part of YAML text: this is UTF-16 or UTF-32 that lost its byte-order mark
        raise YamlError(name, "encoding", "not UTF-8 text (it holds NUL bytes); it looks like UTF-16 or UTF-32 "
                                          "without a byte-order mark: save it as UTF-8", 1, 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _undecodable(name, data, err, "utf-8") from err


def _undecodable(name: str, data: bytes, err: UnicodeDecodeError, codec: str) -> YamlError:
    good = data[:err.start].decode(codec, errors="replace")
    line, column = line_col(good, len(good))
    what = "UTF-8" if codec.startswith("utf-8") else codec.upper()
    return YamlError(name, "encoding", f"not {what} text (byte 0x{data[err.start]:02x}): save the file as UTF-8",
                     line, column)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"


def line_col(text: str, index: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1
