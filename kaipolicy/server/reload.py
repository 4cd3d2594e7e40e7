"""The policy a cycle runs: the rule bundle (the shard's ConfigMaps, else the bundled rules) and the
scheduler configuration, swapped only for a pair that works.

Each cycle offers the current ConfigMap contents and configuration. When they differ from what
was last tried, they are compiled with every stage and limit of `kaipolicy lint` and checked
against each other (every configured plugin in the bundle, its arguments valid). A pair that
fails is refused once: the last good pair keeps deciding, and the refusal is logged, counted
and sent as Events on the shard and on the ConfigMaps its diagnostics name (file:line:col).
Before any good pair exists there is nothing to run: the scheduler is not ready, and says why.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kaipolicy import metrics
from kaipolicy.cycle import ACTIONS
from kaipolicy.errors import ConfigError, RuleError
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.rules import Bundle
from kaipolicy.rules.bundle import TEST_SUFFIXES, load_texts
from kaipolicy.rules.standard import VOCABULARY

log = logging.getLogger("kaipolicy.reload")

#: the shard's rule ConfigMaps: (namespace, name) -> data, None for one that does not exist
ConfigMaps = Mapping[tuple[str, str], Mapping[str, str] | None]
#: where a refusal is reported: (kind "SchedulingShard" | "ConfigMap", namespace, name), message
Report = Callable[[str, str, str, str], None]
PREFIX = "configmap"


@dataclass(frozen=True)
class Policy:
    bundle: Bundle
    config: SchedulerConfig
    source: str                   # "bundled rules" or "configmap/ns/a, configmap/ns/b"


def file_name(namespace: str, name: str, key: str) -> str:
    """How diagnostics name a rule file kept in a ConfigMap: configmap/<namespace>/<name>/<key>."""
    return f"{PREFIX}/{namespace}/{name}/{key}"


class Reloader:
    def __init__(self, default: Bundle, default_source: str, report: Report) -> None:
        self.default, self.default_source, self.report = default, default_source, report
        self.current: Policy | None = None
        self.problem = "no scheduling cycle has run yet"    # why there is no policy (while current is None)
        self._tried: tuple[str, str] | None = None
        self._compiled: dict[str, Bundle | RuleError] = {}

    def select(self, maps: ConfigMaps | None, config: SchedulerConfig) -> Policy | None:
        """The policy for this cycle: a new one when `maps` and `config` work together, else the
        last good one (None before there is one)."""
        missing = sorted(f"{ns}/{name}" for (ns, name), data in (maps or {}).items() if data is None)
        files = _files(maps) if maps is not None else {}
        fingerprint = _fingerprint(files, missing) if maps is not None else "bundled"
        key = (fingerprint, repr(config))
        if key == self._tried:
            return self.current
        self._tried = key
        source = ", ".join(f"{PREFIX}/{ns}/{name}" for ns, name in sorted(maps)) if maps else self.default_source
        try:
            if missing:
                raise ConfigError(f"the shard's rule bundle names ConfigMap(s) that do not exist: {', '.join(missing)}")
            bundle = self._bundle(fingerprint, files) if maps is not None else self.default
            _check(bundle, config)
        except (RuleError, ConfigError) as e:
            self._refuse(source, e)
            return self.current
        changed = self.current is None or self.current.bundle.hash != bundle.hash
        self.current = Policy(bundle, config, source)
        if changed:
            metrics.BUNDLE_RELOADS.labels(result="success").inc()
            metrics.BUNDLE_INFO.clear()
            metrics.BUNDLE_INFO.labels(hash=bundle.hash, source=source).set(1)
            log.info("rule bundle %s from %s decides from the next cycle on", bundle.hash[:12], source,
                     extra={"bundle": bundle.hash, "bundleSource": source})
        return self.current

    def _bundle(self, fingerprint: str, files: dict[str, str]) -> Bundle:
        compiled = self._compiled.get(fingerprint)
        if compiled is None:
            try:
                compiled = load_texts(files, VOCABULARY)
            except RuleError as e:
                compiled = e
            self._compiled = {fingerprint: compiled}     # only the latest content is worth keeping
        if isinstance(compiled, RuleError):
            raise compiled
        return compiled

    def _refuse(self, source: str, error: RuleError | ConfigError) -> None:
        metrics.BUNDLE_RELOADS.labels(result="failure").inc()
        keeps = (f"the last good bundle {self.current.bundle.hash[:12]} from {self.current.source} keeps deciding"
                 if self.current else "no bundle is loaded: the scheduler is not ready and schedules nothing")
        text = str(error)
        log.error("rule bundle from %s refused (%s):\n%s", source, keeps, text,
                  extra={"bundleSource": source, "diagnostics": text.splitlines()})
        if self.current is None:
            self.problem = f"the rule bundle from {source} was refused: {text.splitlines()[0] if text else ''}"
        message = f"rule bundle refused, {keeps}:\n{text}"
        self.report("SchedulingShard", "", "", message)
        for namespace, name in _named_configmaps(error):
            self.report("ConfigMap", namespace, name, message)


def _check(bundle: Bundle, config: SchedulerConfig) -> None:
    """What open_session would refuse: an action that cannot run, a plugin the bundle lacks, an
    argument a plugin does not take."""
    for action in config.actions:
        if action not in ACTIONS:
            raise ConfigError(f"action {action!r} cannot run (known: {', '.join(ACTIONS)})")
    for option in config.plugins():
        if option.name not in bundle.plugins:
            raise ConfigError(f"the configuration names plugin {option.name!r}, which the rule bundle does not have "
                              f"(it has: {', '.join(sorted(bundle.plugins)) or 'none'})")
        bundle.instantiate(option.name, option.arguments)


def _files(maps: ConfigMaps) -> dict[str, str]:
    """Every rule file of the ConfigMaps: keys ending in .yaml or .yml, test suites left out."""
    return {file_name(ns, name, key): text for (ns, name), data in sorted(maps.items()) if data is not None
            for key, text in sorted(data.items())
            if key.endswith((".yaml", ".yml")) and not key.endswith(TEST_SUFFIXES)}


def _fingerprint(files: dict[str, str], missing: list[str]) -> str:
    digest = hashlib.sha256()
    for name, text in sorted(files.items()):
        digest.update(f"{len(name)}:{name}{len(text)}:{text}".encode("utf-8", "surrogatepass"))
    digest.update(repr(missing).encode())
    return digest.hexdigest()


def _named_configmaps(error: RuleError | ConfigError) -> list[tuple[str, str]]:
    """The ConfigMaps that the diagnostics point into (a ConfigError points at none)."""
    found: set[tuple[str, str]] = set()
    for d in getattr(error, "diagnostics", ()):
        parts = str(getattr(d, "file", "")).split("/")
        if len(parts) >= 4 and parts[0] == PREFIX:
            found.add((parts[1], parts[2]))
    return sorted(found)
