"""Plain data straight from libyaml's events, within `Limits`: no node graph is built, a key
may appear once per mapping, and an alias becomes an independent copy counted against a budget
(merge keys `<<` merge such copies)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from yaml import events as ev

from kaipolicy.errors import YamlError
from kaipolicy.yamlsafe.events import (
    INT,
    MAX_DIGITS,
    MERGE,
    STR,
    alias_refused,
    check_collection,
    check_document,
    check_scalar,
    events,
    refuse,
    resolve,
    scalar_text_value,
    too_long,
    where,
)
from kaipolicy.yamlsafe.text import Limits

_CACHE_SIZE = 65536


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
        return refuse(event, self.name, code, message)

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
            check_document(event, self.documents, self.name, self.limits)

    # -- scalars
    def scalar(self, event: ev.ScalarEvent) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            plain = bool(event.implicit[0])
            key = (event.value, plain)
            if key in self.scalars:
                return self.scalars[key]
            value = self.construct(resolve(event.value) if plain else STR, event)
            if len(self.scalars) >= _CACHE_SIZE:
                self.scalars.clear()
            self.scalars[key] = value
            return value
        check_scalar(event, self.name, self.limits)
        return self.construct(tag, event)

    def construct(self, tag: str, event: ev.ScalarEvent) -> Any:
        if tag == STR:
            return event.value
        if tag == MERGE:
            return _MERGE_KEY
        if tag == INT and len(event.value) > MAX_DIGITS:
            raise self.fail(event, "value", too_long(event.value))
        try:
            return scalar_text_value(tag, event.value)
        except (yaml.YAMLError, ValueError, OverflowError, KeyError) as err:
            problem = getattr(err, "problem", None) or str(err)
            raise self.fail(event, "value", f"cannot read {event.value[:40]!r} as {tag.rsplit(':', 1)[-1]}: "
                                            f"{problem}") from err

    # -- collections
    def open(self, event: ev.CollectionStartEvent) -> None:
        check_collection(event, len(self.stack), self.name, self.limits)
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
            raise alias_refused(event, self.name, self.limits)
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
            line, _ = where(top.start)
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
    for event in events(text, name, limits):
        builder.feed(event)
    return builder.root
