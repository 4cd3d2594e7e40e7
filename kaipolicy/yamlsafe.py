"""YAML as untrusted input: bounded size, depth and alias expansion, strict encoding, no duplicate keys.

Parsing is libyaml's (PyYAML's C parser); `load` builds plain data straight from its events, so
no node graph is kept, and an alias becomes an independent copy counted against a budget.
`compose` (for rule files, which need every node's place) checks the same limits first.
Every refusal is a `YamlError` with the file, line and column. No scenario or rule semantics here.
"""

from __future__ import annotations

import codecs
import copy
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml import events as ev
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from kaipolicy.errors import YamlError

__all__ = ["Limits", "compose", "decode", "load", "positions", "read_text", "scalar_value"]

STR = "tag:yaml.org,2002:str"
INT = "tag:yaml.org,2002:int"
MERGE = "tag:yaml.org,2002:merge"
_SCALAR_TAGS = frozenset({STR, "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                          "tag:yaml.org,2002:null"})
_COLLECTION_TAGS = frozenset({"tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"})
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CONSTRUCTOR = SafeConstructor()
_IMPLICIT: dict[str, list[tuple[str, re.Pattern[str]]]] = Resolver.yaml_implicit_resolvers
_CACHE_SIZE = 65536
_MAX_DIGITS = 4300   # what Python converts from text to int (sys.get_int_max_str_digits)


@dataclass(frozen=True)
class Limits:
    """What one kind of document may cost. `alias_values` is how many values aliases may add
    in all when expanded (each alias copies its anchor's value); 0 refuses aliases outright."""

    max_bytes: int
    max_depth: int
    alias_values: int
    what: str = "file"      # how messages name the document: "rule file", "scenario"


# ---------------------------------------------------------------- bytes -> text
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
    line, column = _line_col(good, len(good))
    what = "UTF-8" if codec.startswith("utf-8") else codec.upper()
    return YamlError(name, "encoding", f"not {what} text (byte 0x{data[err.start]:02x}): save the file as UTF-8",
                     line, column)


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB"


def _line_col(text: str, index: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - start + 1


# ---------------------------------------------------------------- events
def _events(text: str, name: str, limits: Limits) -> Iterator[ev.Event]:
    """libyaml's events; its errors become YamlErrors with the place in `text`."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates, only from text that never was bytes
        line, column = _line_col(text, err.start)
        raise YamlError(name, "encoding", f"character U+{ord(text[err.start]):04X} cannot be encoded",
                        line, column) from err
    try:
        yield from yaml.parse(data, Loader=yaml.CSafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = str(err.problem or err.context)
        if "maximum nesting depth" in what:   # libyaml's own limit (1000) met while scanning ahead
            raise YamlError(name, "depth", _too_deep(limits), line, column) from err
        if err.problem and err.context:
            at = err.context_mark
            what += f" ({err.context}" + (f" that starts at line {at.line + 1}, column {at.column + 1})" if at else ")")
        raise YamlError(name, "syntax", f"malformed YAML: {what}", line, column) from err
    except yaml.reader.ReaderError as err:
        # libyaml reports a byte offset into the UTF-8 text
        index = len(data[:err.position].decode("utf-8", errors="replace"))
        line, column = _line_col(text, index)
        raise YamlError(name, "syntax", f"malformed YAML: character U+{err.character:04X} is not allowed "
                                        f"({err.reason})", line, column) from err
    except yaml.YAMLError as err:
        raise YamlError(name, "syntax", f"malformed YAML: {err}") from err


def _where(event: ev.Event) -> tuple[int, int]:
    mark = event.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)


def _resolve(value: str) -> str:
    """The tag YAML 1.1 gives a plain scalar (what PyYAML's Resolver does, without its node
    argument): int, float, bool, null, timestamp, merge, or str."""
    for tag, pattern in _IMPLICIT.get(value[:1], ()):
        if pattern.match(value):
            return str(tag)
    return STR


# ---------------------------------------------------------------- checks on single events
def _refuse(event: ev.Event, name: str, code: str, message: str) -> YamlError:
    line, column = _where(event)
    return YamlError(name, code, message, line, column)


def _check_collection(event: ev.Event, depth: int, name: str, limits: Limits) -> None:
    """A mapping or list opening at `depth` (0 = the top level)."""
    if depth >= limits.max_depth:
        raise _refuse(event, name, "depth", _too_deep(limits))
    tag = getattr(event, "tag", None)
    if tag not in (None, "!") and tag not in _COLLECTION_TAGS:
        raise _refuse(event, name, "tag", f"the tag {tag!r} is not allowed in a {limits.what}")


def _check_scalar(event: ev.ScalarEvent, name: str, limits: Limits) -> None:
    if event.tag not in (None, "!") and event.tag not in _SCALAR_TAGS:
        raise _refuse(event, name, "tag", f"the tag {event.tag!r} is not allowed in a {limits.what}")


def _check_document(event: ev.Event, number: int, name: str, limits: Limits) -> None:
    if number > 1:
        raise _refuse(event, name, "documents", f"more than one YAML document (---): a {limits.what} "
                                                "is one document")


def _too_long(digits: str) -> str:
    return f"an integer of {len(digits)} digits is too long to read ({_MAX_DIGITS} at most)"


def _too_deep(limits: Limits) -> str:
    return f"nested deeper than {limits.max_depth} levels, the limit for a {limits.what}"


def _alias_refused(event: ev.AliasEvent, name: str, limits: Limits) -> YamlError:
    return _refuse(event, name, "alias", f"aliases (*{event.anchor}) are not allowed in a {limits.what}: "
                                         "write the value out")


# ---------------------------------------------------------------- text -> data
class _Frame:
    __slots__ = ("anchor", "count", "key", "key_event", "merges", "start", "value")

    def __init__(self, value: dict[Any, Any] | list[Any], start: ev.Event, count: int) -> None:
        self.value = value
        self.start = start          # the collection's start event: its tag, anchor and place
        self.anchor = getattr(start, "anchor", None)
        self.count = count          # values built before this one began (for its size)
        self.key: Any = _NO_KEY
        self.key_event: ev.Event | None = None
        self.merges: list[dict[Any, Any]] = []


_NO_KEY = object()
_MERGE_KEY = object()


class _Builder:
    """Plain data from one document's events (dicts, lists, str, int, float, bool, None, dates)."""

    def __init__(self, name: str, limits: Limits) -> None:
        self.name = name
        self.limits = limits
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.count = 0            # values built, aliases' copies included
        self.written = 0          # values written out in the text
        self.documents = 0
        self.root: Any = None
        self.scalars: dict[tuple[str, bool], Any] = {}

    def fail(self, event: ev.Event, code: str, message: str) -> YamlError:
        return _refuse(event, self.name, code, message)

    def feed(self, event: ev.Event) -> None:
        if isinstance(event, ev.ScalarEvent):
            self.add(self.scalar(event), event, 1)
        elif isinstance(event, ev.CollectionStartEvent):
            self.open(event)
        elif isinstance(event, ev.CollectionEndEvent):
            self.close()
        elif isinstance(event, ev.AliasEvent):
            self.alias(event)
        elif isinstance(event, ev.DocumentStartEvent):
            self.documents += 1
            _check_document(event, self.documents, self.name, self.limits)

    # -- scalars
    def scalar(self, event: ev.ScalarEvent) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            plain = bool(event.implicit[0])
            key = (event.value, plain)
            if key in self.scalars:
                return self.scalars[key]
            value = self.construct(_resolve(event.value) if plain else STR, event)
            if len(self.scalars) >= _CACHE_SIZE:
                self.scalars.clear()
            self.scalars[key] = value
            return value
        _check_scalar(event, self.name, self.limits)
        return self.construct(tag, event)

    def construct(self, tag: str, event: ev.ScalarEvent) -> Any:
        if tag == STR:
            return event.value
        if tag == MERGE:
            return _MERGE_KEY
        if tag == INT and len(event.value) > _MAX_DIGITS:
            raise self.fail(event, "value", _too_long(event.value))
        try:
            return _scalar_value(tag, event.value)
        except (yaml.YAMLError, ValueError, OverflowError, KeyError) as err:
            problem = getattr(err, "problem", None) or str(err)
            raise self.fail(event, "value", f"cannot read {event.value[:40]!r} as {tag.rsplit(':', 1)[-1]}: "
                                            f"{problem}") from err

    # -- collections
    def open(self, event: ev.CollectionStartEvent) -> None:
        _check_collection(event, len(self.stack), self.name, self.limits)
        top = self.stack[-1] if self.stack else None
        if top is not None and isinstance(top.value, dict) and top.key is _NO_KEY:
            raise self.fail(event, "key", "a mapping key must be a plain value, not a list or mapping")
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        value: dict[Any, Any] | list[Any] = {} if type(event) is ev.MappingStartEvent else []
        self.stack.append(_Frame(value, event, self.count))
        self.count += 1
        self.written += 1

    def close(self) -> None:
        frame = self.stack.pop()
        value = frame.value
        if frame.merges and isinstance(value, dict):
            merged: dict[Any, Any] = {}
            for source in reversed(frame.merges):   # the first merged mapping wins, explicit keys over all
                merged.update(source)
            merged.update(value)
            value = merged
        if frame.anchor is not None:
            self.open_anchors.discard(frame.anchor)
            self.anchors[frame.anchor] = (value, self.count - frame.count)
        self.add(value, frame.start, 0)

    def alias(self, event: ev.AliasEvent) -> None:
        name = event.anchor
        if self.limits.alias_values <= 0:
            raise _alias_refused(event, self.name, self.limits)
        if name in self.open_anchors:
            raise self.fail(event, "alias", f"the alias *{name} refers to a value that contains it")
        if name not in self.anchors:
            raise self.fail(event, "alias", f"the alias *{name} names no anchor (&{name}) before it")
        value, size = self.anchors[name]
        self.count += size
        if self.count - self.written > self.limits.alias_values:
            raise self.fail(event, "alias", f"aliases expand this {self.limits.what} by more than "
                                            f"{self.limits.alias_values} values, the limit")
        self.add(copy.deepcopy(value) if isinstance(value, (dict, list)) else value, event, 0)

    # -- placing a value in its parent
    def add(self, value: Any, event: ev.Event, counted: int) -> None:
        self.count += counted
        self.written += counted
        anchor = getattr(event, "anchor", None) if counted else None
        if anchor is not None:
            self.anchors[anchor] = (value, 1)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        if isinstance(top.value, list):
            top.value.append(value)
        elif top.key is _NO_KEY:
            self.key(top, value, event)
        else:
            if top.key is _MERGE_KEY:
                top.merges.extend(self.merge_sources(value, event))
            else:
                top.value[top.key] = value
            top.key = _NO_KEY

    def key(self, top: _Frame, key: Any, event: ev.Event) -> None:
        if isinstance(key, (dict, list)):
            raise self.fail(event, "key", "a mapping key must be a plain value, not a list or mapping")
        if key is not _MERGE_KEY and key in top.value:
            line, _ = _where(top.start)
            raise self.fail(event, "duplicate-key", f"duplicate key {key!r} in the mapping that starts at "
                                                    f"line {line}")
        top.key = key
        top.key_event = event

    def merge_sources(self, value: Any, event: ev.Event) -> list[dict[Any, Any]]:
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(s, dict) for s in sources):
            raise self.fail(event, "merge", "a merge key (<<) takes a mapping or a list of mappings")
        return sources


def load(text: str, name: str, limits: Limits) -> Any:
    """The one document in `text` as plain data (None when empty), within `limits`."""
    builder = _Builder(name, limits)
    for event in _events(text, name, limits):
        builder.feed(event)
    return builder.root


# ---------------------------------------------------------------- nodes (for rule files)
def compose(text: str, name: str, limits: Limits) -> yaml.Node | None:
    """The node graph of the one document in `text` (None when empty), checked against `limits`
    (depth, tags, one document) before libyaml composes it. Aliases are refused whatever the
    limits say: a node graph shares an alias's node with its anchor, so its place would be wrong
    and every walk of the graph would expand it again."""
    depth = documents = 0
    for event in _events(text, name, limits):
        if isinstance(event, ev.CollectionStartEvent):
            _check_collection(event, depth, name, limits)
            depth += 1
        elif isinstance(event, ev.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, ev.ScalarEvent):
            _check_scalar(event, name, limits)
        elif isinstance(event, ev.AliasEvent):
            raise _alias_refused(event, name, limits)
        elif isinstance(event, ev.DocumentStartEvent):
            documents += 1
            _check_document(event, documents, name, limits)
    try:
        node: yaml.Node | None = yaml.compose(text.encode("utf-8"), Loader=yaml.CSafeLoader)
    except yaml.YAMLError as err:  # the events above passed, so this is not expected
        raise YamlError(name, "syntax", f"malformed YAML: {err}") from err
    return node


def positions(text: str, paths: Sequence[Sequence[Any]]) -> list[tuple[int, int] | None]:
    """(line, column) of the value at each path (mapping keys and list indexes) in a text that
    `load` accepted; for a path ending in a mapping key, the key's place; None where absent.
    (Composes the text once more, so it is for error messages, not for every value.)"""
    try:
        root = yaml.compose(text.encode("utf-8"), Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return [None for _ in paths]
    return [_place(root, path) for path in paths]


def _place(node: yaml.Node | None, path: Sequence[Any]) -> tuple[int, int] | None:
    place = node
    for step in path:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if _key_of(k) == step]
            if not found:
                return None
            place, node = found[-1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            place = node = node.value[step]
        else:
            return None
    if place is None:
        return None
    return place.start_mark.line + 1, place.start_mark.column + 1


def _scalar_value(tag: str, text: str) -> Any:
    """A resolved scalar's value. (SafeConstructor's per-tag functions, called directly: its
    `construct_object` would remember every node it ever saw.)"""
    if tag == STR:
        return text
    return _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, yaml.ScalarNode(tag, text))


def scalar_value(node: yaml.Node) -> Any:
    """The value of a composed scalar node; ValueError (with the reason) when it cannot be read.
    A merge key (<<) is kept as its text: only `load` merges."""
    if node.tag == MERGE:
        return node.value
    if node.tag == INT and len(node.value) > _MAX_DIGITS:
        raise ValueError(_too_long(node.value))
    try:
        return _scalar_value(node.tag, node.value)
    except KeyError as err:
        raise ValueError(f"the tag {node.tag!r} is not allowed") from err
    except (yaml.YAMLError, OverflowError) as err:
        raise ValueError(getattr(err, "problem", None) or str(err)) from err


def _key_of(node: yaml.Node) -> Any:
    if not isinstance(node, yaml.ScalarNode):
        return None
    try:
        return _scalar_value(node.tag, node.value)
    except (yaml.YAMLError, ValueError, OverflowError, KeyError):
        return node.value
