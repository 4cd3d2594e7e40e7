"""An API server in memory for unit tests of what kaipolicy writes: objects with uids and increasing
resourceVersions, every call recorded, and a failure injected for any verb, kind and name."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from kaipolicy.cache.kubeapi import Kind, Obj
from kaipolicy.errors import ClusterError

Key = tuple[str, str, str]     # kind, namespace, name


class FakeApi:
    host = "https://fake"

    def __init__(self) -> None:
        self.objects: dict[Key, Obj] = {}
        self.calls: list[tuple[str, str, str]] = []          # verb, kind, namespace/name
        self.events: list[dict[str, Any]] = []
        self._failures: dict[tuple[str, str, str], list[ClusterError]] = {}
        self._versions = itertools.count(100)
        self._uids = itertools.count(1)

    # ---- set-up -------------------------------------------------------------------------------
    def fail(self, verb: str, kind: str, name: str, status: int | None = 500, message: str = "injected failure",
             times: int = 1) -> None:
        """The next `times` calls of `verb` on kind/name fail with `status` (None: unreachable)."""
        error = ClusterError(f"{verb} {kind}/{name}: {status} {message}", status)
        self._failures.setdefault((verb, kind, name), []).extend([error] * times)

    def put(self, kind: Kind, obj: Obj) -> Obj:
        """Store an object as if created earlier (no call recorded)."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(kind.kind, meta.get("namespace") or "", meta["name"])] = copy.deepcopy(obj)
        return obj

    def verbs(self, kind: str) -> list[str]:
        return [f"{verb} {name}" for verb, k, name in self.calls if k == kind]

    # ---- the KubeApi surface the writers use -----------------------------------------------------
    def create(self, kind: Kind, obj: Obj, namespace: str | None = None) -> Obj:
        meta = obj.get("metadata") or {}
        key = (kind.kind, namespace or meta.get("namespace") or "", meta["name"])
        self._call("create", key)
        if key in self.objects:
            raise ClusterError(f"create {kind.kind}/{key[2]}: 409 AlreadyExists", 409, "AlreadyExists")
        stored = copy.deepcopy(obj)
        stored["metadata"] = dict(meta) | {"uid": f"uid-{next(self._uids)}",
                                           "resourceVersion": str(next(self._versions))}
        self.objects[key] = stored
        return copy.deepcopy(stored)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        key = (kind.kind, namespace or "", name)
        self._call("get", key)
        return copy.deepcopy(self._existing(key))

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        meta = obj["metadata"]
        key = (kind.kind, meta.get("namespace") or "", meta["name"])
        self._call("replace", key)
        if self._existing(key)["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            raise ClusterError(f"replace {kind.kind}/{key[2]}: 409 Conflict", 409, "Conflict")
        return self.put(kind, copy.deepcopy(obj))

    def patch(self, kind: Kind, name: str, patch: Obj, namespace: str | None = None, status: bool = False) -> Obj:
        key = (kind.kind, namespace or "", name)
        self._call("patch status" if status else "patch", key)
        obj = self._existing(key)
        _merge(obj, patch)
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(obj)

    def patch_strategic(self, kind: Kind, name: str, patch: Obj, namespace: str | None = None,
                        status: bool = False) -> Obj:
        return self.patch(kind, name, patch, namespace, status)

    def delete_exact(self, kind: Kind, name: str, namespace: str | None, uid: str) -> bool:
        key = (kind.kind, namespace or "", name)
        self._call("delete", key)
        obj = self.objects.get(key)
        if obj is None or obj["metadata"]["uid"] != uid:
            return False
        del self.objects[key]
        return True

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None,
              uid: str | None = None) -> None:
        key = ("Pod", namespace, name)
        self._call("evict", key)
        obj = self._existing(key)
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"

    def create_event(self, kind: Kind, involved: Obj, reason: str, message: str, type_: str = "Warning",
                     component: str = "kaipolicy", annotations: dict[str, str] | None = None) -> Obj:
        meta = involved.get("metadata") or {}
        self._call("create", ("Event", meta.get("namespace") or "", str(meta.get("name"))))
        event = {"kind": kind.kind, "name": meta.get("name"), "reason": reason, "message": message,
                 "type": type_, "annotations": dict(annotations or {})}
        self.events.append(event)
        return event

    # ---- plumbing -------------------------------------------------------------------------------
    def _call(self, verb: str, key: Key) -> None:
        self.calls.append((verb, key[0], f"{key[1]}/{key[2]}" if key[1] else key[2]))
        waiting = self._failures.get((verb, key[0], key[2]))
        if waiting:
            raise waiting.pop(0)

    def _existing(self, key: Key) -> Obj:
        obj = self.objects.get(key)
        if obj is None:
            raise ClusterError(f"{key[0]}/{key[2]}: 404 NotFound", 404, "NotFound")
        return obj


def _merge(target: Obj, patch: Obj) -> None:
    """A JSON merge patch (RFC 7396): maps merge, None deletes, anything else replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
