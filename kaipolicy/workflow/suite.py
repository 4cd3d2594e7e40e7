"""Policy test suites (`*_test.yaml`): read, checked against `schemas/policytest.schema.json`,
their scenarios and bundles resolved relative to the suite file.

A problem is a `SuiteError` naming the file, the line and column, and the key path; nothing is
run from a suite that does not load. Bundles are built once per distinct description.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kaipolicy import yamlsafe
from kaipolicy.cache.scenario_source import LIMITS as SCENARIO_LIMITS
from kaipolicy.cache.scenario_source import Scenario, scenario_from_doc
from kaipolicy.errors import InputError, ScenarioError, YamlError
from kaipolicy.paths import data_dir

KeyPath = tuple[str | int, ...]

SCHEMA_PATH = data_dir("schemas") / "policytest.schema.json"
SUFFIXES = ("_test.yaml", "_test.yml")
SUITE_LIMITS = yamlsafe.Limits(max_bytes=8 * 2**20, max_depth=40, alias_values=200_000, what="policy test suite")


class SuiteError(InputError):
    """A test suite that cannot be loaded: names the file, line:column and key path."""


@dataclass(frozen=True)
class BundleSpec:
    """Which rules a test runs with: the default bundle or not, more rule paths, argument
    defaults per plugin and modes per rule."""

    default: bool = True
    policies: tuple[str, ...] = ()
    arguments: str = "{}"     # JSON, so that the spec is hashable and compares by value
    modes: tuple[tuple[str, str], ...] = ()

    def merged(self, override: dict[str, Any]) -> BundleSpec:
        args = json.loads(self.arguments)
        for plugin, values in (override.get("arguments") or {}).items():
            args[plugin] = {**args.get(plugin, {}), **values}
        modes = dict(self.modes) | dict(override.get("modes") or {})
        return BundleSpec(self.default, self.policies, json.dumps(args, sort_keys=True),
                          tuple(sorted(modes.items())))


@dataclass(frozen=True)
class PolicyTest:
    suite: str
    name: str
    line: int
    scenario_doc: dict[str, Any]
    scenario_file: str          # where the scenario came from, for its error messages
    bundle: BundleSpec
    expect: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.suite}::{self.name}"

    def scenario(self) -> Scenario:
        """A fresh scenario (a run changes the one it is given)."""
        return scenario_from_doc(copy.deepcopy(self.scenario_doc), self.scenario_file)


@dataclass
class Suite:
    path: str
    title: str
    bundle: BundleSpec
    tests: list[PolicyTest] = field(default_factory=list)


def find_suites(paths: list[str]) -> list[Path]:
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found += sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES))
        elif p.is_file():
            found.append(p)
        else:
            raise SuiteError(f"{p}: no such file or folder")
    if not found:
        raise SuiteError(f"no test suites (*_test.yaml) under {', '.join(paths)}")
    return found


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


@dataclass
class SourceFile:
    """A suite's data (YAML anchors and merge keys resolved) and its node tree, for line numbers."""

    path: str
    data: Any
    root: yaml.Node | None

    def place(self, path: KeyPath, key: bool = False) -> tuple[int, int]:
        """Line and column of the value (or key) at `path`, or of its nearest parent."""
        node, found = self.root, self.root
        for part in path:
            node = _child(node, part, key and part == path[-1])
            if node is None:
                break
            found = node
        mark = found.start_mark if found is not None else None
        return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _child(node: yaml.Node | None, part: str | int, key: bool) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == str(part):
                return k if key else v
        for k, v in node.value:   # a merge key: look in the mapping(s) merged in
            if isinstance(k, yaml.ScalarNode) and k.tag.endswith(":merge"):
                for merged in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                    found = _child(merged, part, key)
                    if found is not None:
                        return found
    return None


def read_suite(path: str | Path) -> SourceFile:
    """A suite file is untrusted YAML like a scenario (it holds scenarios): same size, depth and
    alias limits, anchors and merge keys allowed within them."""
    name = str(path)
    try:
        text = yamlsafe.read_text(path, SUITE_LIMITS)
        data = yamlsafe.load(text, name, SUITE_LIMITS)
    except YamlError as e:
        raise SuiteError(str(e)) from None
    # the text passed every limit above; composing it is linear in its size (an alias stays one
    # shared node), and the graph is only walked along key paths to place messages
    return SourceFile(name, data, yaml.compose(text.encode("utf-8"), Loader=yaml.CSafeLoader))


def load_suite(path: str | Path) -> Suite:
    src = read_suite(path)
    errors = sorted(_validator().iter_errors(src.data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise _schema_error(src, errors[0])
    doc: dict[str, Any] = src.data
    here = Path(src.path).parent
    bundle = _bundle(src, here, doc.get("bundle") or {})
    named = doc.get("scenarios") or {}
    suite = Suite(src.path, doc.get("suite") or Path(src.path).name, bundle)
    for i, test in enumerate(doc["tests"]):
        where: KeyPath = ("tests", i)
        scenario_doc, scenario_file = _scenario(src, here, named, test["scenario"], where + ("scenario",))
        override = test.get("bundle") or {}
        if "default" in override or "policies" in override:
            raise _error(src, where + ("bundle",), "a test may change arguments and modes only; "
                                                    "`default` and `policies` belong to the suite")
        suite.tests.append(PolicyTest(suite.title, test["name"], src.place(where)[0], scenario_doc, scenario_file,
                                      bundle.merged(override), test["expect"]))
    return suite


def _bundle(src: SourceFile, here: Path, raw: dict[str, Any]) -> BundleSpec:
    policies = []
    for i, p in enumerate(raw.get("policies") or []):
        full = (here / p).resolve()
        if not full.exists():
            raise _error(src, ("bundle", "policies", i), f"no such rule file or folder: {p}")
        policies.append(str(full))
    return BundleSpec(bool(raw.get("default", True)), tuple(policies)).merged(raw)


def _scenario(src: SourceFile, here: Path, named: dict[str, Any], ref: Any,
              where: KeyPath) -> tuple[dict[str, Any], str]:
    line = src.place(where)[0]
    label = f"{src.path}:{line} ({'.'.join(map(str, where))})"
    if isinstance(ref, str) and ref in named:
        return _scenario(src, here, {}, named[ref], ("scenarios", ref))
    if isinstance(ref, str):
        path = here / ref
        try:
            doc = yamlsafe.load(yamlsafe.read_text(path, SCENARIO_LIMITS), str(path), SCENARIO_LIMITS)
        except YamlError as e:
            raise _error(src, where, f"cannot load scenario {ref!r}: {e}") from None
        ref, label = doc, str(path)
    try:
        scenario_from_doc(copy.deepcopy(ref), label)   # checked now, run later
    except ScenarioError as e:
        raise SuiteError(str(e)) from e
    return ref, label


def _schema_error(src: SourceFile, err: jsonschema.ValidationError) -> SuiteError:
    path: KeyPath = tuple(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {})) if isinstance(err.schema, dict) else set()
        unknown = sorted(str(k) for k in err.instance if k not in allowed)
        return _error(src, path + (unknown[0],) if unknown else path, f"unknown key {unknown[0]!r}" if unknown
                      else err.message, key=bool(unknown))
    return _error(src, path, err.message)


def _error(src: SourceFile, path: KeyPath, message: str, key: bool = False) -> SuiteError:
    line, col = src.place(path, key=key)
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "the file"
    return SuiteError(f"{src.path}:{line}:{col}: {where}: {message}")
