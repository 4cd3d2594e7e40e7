"""The Kubernetes API, and the only module that imports `kubernetes`.

Objects travel as plain JSON dicts (the API's own shape): the client's typed models cost a lot
to build for thousands of pods and would only be turned back into dicts. The client is used for
what it does well: loading kubeconfig or in-cluster credentials, TLS, tokens. Every failure is a
`ClusterError` naming the verb and kind/namespace/name; a 410 on list or watch is `WatchExpired`.
"""

from __future__ import annotations

import builtins
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.utils.quantity import parse_quantity

from kaipolicy.errors import ClusterError, WatchExpired

Obj = dict[str, Any]
REQUEST_TIMEOUT = (5.0, 30.0)   # connect, read (seconds)


@dataclass(frozen=True)
class Kind:
    """One API resource: where it is served and whether it lives in namespaces."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}" + (f"/{sub}" if sub else "")
        return base


POD = Kind("Pod", "", "v1", "pods", True)
NODE = Kind("Node", "", "v1", "nodes", False)
CONFIG_MAP = Kind("ConfigMap", "", "v1", "configmaps", True)
EVENT = Kind("Event", "", "v1", "events", True)
NAMESPACE = Kind("Namespace", "", "v1", "namespaces", False)
PRIORITY_CLASS = Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
QUEUE = Kind("Queue", "scheduling.run.ai", "v2", "queues", False)
POD_GROUP = Kind("PodGroup", "scheduling.run.ai", "v2alpha2", "podgroups", True)
BIND_REQUEST = Kind("BindRequest", "scheduling.run.ai", "v1alpha2", "bindrequests", True)
SCHEDULING_SHARD = Kind("SchedulingShard", "kai.scheduler", "v1", "schedulingshards", False)
TOPOLOGY = Kind("Topology", "kai.scheduler", "v1alpha1", "topologies", False)
LEASE = Kind("Lease", "coordination.k8s.io", "v1", "leases", True)


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity ("100m", "250M", "4Gi", 2) as a Decimal; ValueError when it is not one."""
    try:
        return Decimal(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation) as e:
        raise ValueError(f"{value!r} is not a quantity") from e


def object_name(kind: Kind, namespace: str | None, name: str | None) -> str:
    """kind/namespace/name as messages print it (kind/name for cluster-scoped objects)."""
    parts = [kind.kind] + ([namespace] if kind.namespaced and namespace else []) + ([name] if name else [])
    return "/".join(parts)


@dataclass(frozen=True)
class WatchEvent:
    type: str        # ADDED, MODIFIED, DELETED, BOOKMARK
    object: Obj


class WatchStream:
    """The events of one watch request; `close()` (from any thread) ends the iteration."""

    def __init__(self, response: Any, what: str) -> None:
        self._response = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[WatchEvent]:
        buffer = b""
        try:
            for chunk in self._response.stream(65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield self._event(json.loads(line))
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            if not self._closed:  # a stream closed on purpose just ends
                raise ClusterError(f"watch {self._what}: the stream broke: {e}") from e
        finally:
            self.close()

    def _event(self, doc: Obj) -> WatchEvent:
        if doc.get("type") == "ERROR":
            status = doc.get("object") or {}
            code = status.get("code")
            message = f"watch {self._what}: {status.get('message', 'error')}"
            if code == 410:
                raise WatchExpired(message, 410, str(status.get("reason", "")))
            raise ClusterError(message, code, str(status.get("reason", "")))
        return WatchEvent(str(doc.get("type")), doc.get("object") or {})

    def close(self) -> None:
        self._closed = True
        try:
            # shutdown() (urllib3 >= 2.3) interrupts a read blocked in another thread; close() may not
            self._response.shutdown()
        except (AttributeError, ValueError, RuntimeError, OSError):
            pass  # too old a urllib3, or the connection is already closed or released
        try:
            self._response.release_conn()
        except (urllib3.exceptions.HTTPError, OSError):
            pass


class KubeApi:
    """Calls to one API server with the credentials of a kubeconfig or of the pod it runs in."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, *,
                 request_timeout: tuple[float, float] = REQUEST_TIMEOUT, pool_size: int | None = None) -> None:
        configuration = client.Configuration()
        try:
            if kubeconfig:
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                config.load_incluster_config(client_configuration=configuration)
            else:
                config.load_kube_config(context=context, client_configuration=configuration)
        except (ConfigException, OSError, TypeError, ValueError) as e:
            where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
            raise ClusterError(f"cannot load Kubernetes credentials from {where}: {e}") from e
        # Reconnect at once on a dropped connection, but never sleep through a Retry-After in a
        # call that cannot be interrupted: an overloaded or starting server is the caller's to
        # wait for (informers back off, and stop at once).
        configuration.retries = urllib3.Retry(total=3, backoff_factor=0.1, respect_retry_after_header=False)
        if pool_size:   # one connection per concurrent caller (the client's default is 5 per CPU)
            configuration.connection_pool_maxsize = pool_size
        self.request_timeout = request_timeout
        self._client = client.ApiClient(configuration)
        self.host = configuration.host

    def close(self) -> None:
        self._client.close()

    # ---- reads ------------------------------------------------------------------------------
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> Obj:
        return self._json("GET", kind.path(namespace, name), object_name(kind, namespace, name), "get")

    def list(self, kind: Kind, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None, page_size: int = 500) -> tuple[list[Obj], str]:
        """Every object (paged); with the list's resourceVersion, where a watch resumes."""
        items: list[Obj] = []
        query = _selectors(label_selector, field_selector) + [("limit", str(page_size))]
        token = ""
        while True:
            page = self._json("GET", kind.path(namespace), object_name(kind, namespace, None), "list",
                              query=query + ([("continue", token)] if token else []))
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    def watch(self, kind: Kind, resource_version: str, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int = 300) -> WatchStream:
        """Changes after `resource_version`, with bookmarks; the server ends it after `timeout_seconds`."""
        query = _selectors(label_selector, field_selector) + [
            ("watch", "true"), ("resourceVersion", resource_version), ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds))]
        response = self._call("GET", kind.path(namespace), object_name(kind, namespace, None), "watch",
                              query=query, timeout=(self.request_timeout[0], timeout_seconds + 30.0))
        return WatchStream(response.response, object_name(kind, namespace, None))

    # ---- writes -----------------------------------------------------------------------------
    def create(self, kind: Kind, obj: Obj, namespace: str | None = None) -> Obj:
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        name = (obj.get("metadata") or {}).get("name")
        return self._json("POST", kind.path(ns), object_name(kind, ns, name), "create", body=obj)

    def replace(self, kind: Kind, obj: Obj) -> Obj:
        """PUT the whole object. With its metadata.resourceVersion set this is compare-and-swap:
        409 Conflict when the object changed since (what a Lease for leader election needs)."""
        meta = obj.get("metadata") or {}
        name, ns = meta.get("name"), meta.get("namespace")
        return self._json("PUT", kind.path(ns, name), object_name(kind, ns, name), "replace", body=obj)

    def patch(self, kind: Kind, name: str, patch: Obj, namespace: str | None = None, status: bool = False) -> Obj:
        """A JSON merge patch of the object, or of its status subresource."""
        return self._json("PATCH", kind.path(namespace, name, "status" if status else None),
                          object_name(kind, namespace, name), "patch status of" if status else "patch", body=patch,
                          content_type="application/merge-patch+json")

    def delete(self, kind: Kind, name: str, namespace: str | None = None,
               grace_period_seconds: int | None = None) -> None:
        body = {} if grace_period_seconds is None else {"gracePeriodSeconds": grace_period_seconds}
        self._json("DELETE", kind.path(namespace, name), object_name(kind, namespace, name), "delete", body=body)

    def evict(self, namespace: str, name: str, grace_period_seconds: int | None = None, uid: str | None = None) -> None:
        """Through the Eviction API, so PodDisruptionBudgets are honoured (429 when one forbids it).
        With `uid`, only that pod (not a newer one of the same name) is evicted (409 otherwise)."""
        body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        options: Obj = {"gracePeriodSeconds": grace_period_seconds} if grace_period_seconds is not None else {}
        if uid:
            options["preconditions"] = {"uid": uid}
        if options:
            body["deleteOptions"] = options
        self._json("POST", POD.path(namespace, name, "eviction"), object_name(POD, namespace, name), "evict", body=body)

    def bind(self, namespace: str, name: str, node: str, uid: str | None = None) -> None:
        """pods/binding. The API answers with a Status, not a Binding; the typed client's
        create_namespaced_pod_binding fails reading it after binding, so this reads plain JSON."""
        meta: Obj = {"name": name, "namespace": namespace} | ({"uid": uid} if uid else {})
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        self._json("POST", POD.path(namespace, name, "binding"), object_name(POD, namespace, name), "bind", body=body)

    def create_event(self, kind: Kind, involved: Obj, reason: str, message: str, type_: str = "Warning",
                     component: str = "kaipolicy", annotations: dict[str, str] | None = None) -> Obj:
        """A core/v1 Event on `involved`; cluster-scoped objects get theirs in namespace `default`.
        `annotations` go on the Event itself (the reference's eviction events carry some)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ref = {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta.get("name", ""),
               "uid": meta.get("uid", ""), "resourceVersion": meta.get("resourceVersion", "")}
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace}
                 | ({"annotations": dict(annotations)} if annotations else {}),
                 "involvedObject": ref, "reason": reason, "message": message[:1024], "type": type_,
                 "source": {"component": component}, "reportingComponent": component,
                 "reportingInstance": os.environ.get("HOSTNAME", component),
                 "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        return self.create(EVENT, event, namespace)

    # ---- what a committing scheduler and the binder need -------------------------------------
    def patch_strategic(self, kind: Kind, name: str, patch: Obj, namespace: str | None = None,
                        status: bool = False) -> Obj:
        """A strategic merge patch (built-in kinds only): lists such as a pod's conditions merge
        by their key instead of being replaced whole, as a JSON merge patch would."""
        return self._json("PATCH", kind.path(namespace, name, "status" if status else None),
                          object_name(kind, namespace, name), "patch status of" if status else "patch", body=patch,
                          content_type="application/strategic-merge-patch+json")

    def delete_exact(self, kind: Kind, name: str, namespace: str | None, uid: str) -> bool:
        """Delete the object only if it is still the one with this uid (a precondition, so that a
        newer object of the same name is never deleted by mistake); False when it is already gone
        (404, or 409: the name now belongs to another object)."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        try:
            self._json("DELETE", kind.path(namespace, name), object_name(kind, namespace, name), "delete", body=body)
        except ClusterError as e:
            if e.status in (404, 409):
                return False
            raise
        return True

    # ---- plumbing ---------------------------------------------------------------------------
    def _json(self, method: str, path: str, what: str, verb: str, *, query: builtins.list[tuple[str, str]] | None = None,
              body: Obj | None = None, content_type: str = "application/json") -> Obj:
        response = self._call(method, path, what, verb, query=query, body=body, content_type=content_type)
        try:
            data = response.read()
            out: Obj = json.loads(data) if data else {}
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as e:
            raise ClusterError(f"{verb} {what}: unreadable answer: {e}") from e
        return out

    def _call(self, method: str, path: str, what: str, verb: str, *, query: builtins.list[tuple[str, str]] | None = None,
              body: Obj | None = None, content_type: str = "application/json",
              timeout: tuple[float, float] | None = None) -> Any:
        """One request; `what` names the object in errors ("Pod/team-a/p")."""
        try:
            request = self._client.param_serialize(
                method, path, query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body, auth_settings=["BearerToken"])
            response = self._client.call_api(*request, _request_timeout=timeout or self.request_timeout)
        except ApiException as e:
            raise ClusterError(f"{verb} {what}: {e.reason or e}", e.status or None) from e
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise ClusterError(f"{verb} {what}: cannot reach the API server at {self.host}: {e}") from e
        if not 200 <= response.status < 300:
            raise _refusal(response, verb, what)
        return response


def _selectors(label_selector: str | None, field_selector: str | None) -> list[tuple[str, str]]:
    query = []
    if label_selector:
        query.append(("labelSelector", label_selector))
    if field_selector:
        query.append(("fieldSelector", field_selector))
    return query


def _refusal(response: Any, verb: str, what: str) -> ClusterError:
    """The API's Status answer as an error: 'create Pod/ns/p: 409 AlreadyExists: pods "p" already exists'."""
    try:
        status = json.loads(response.read() or b"{}")
    except (urllib3.exceptions.HTTPError, OSError, ValueError):
        status = {}
    reason = str(status.get("reason", "") or response.reason or "")
    message = str(status.get("message", "") or "")
    text = f"{verb} {what}: {response.status} {reason}" + (f": {message}" if message else "")
    cls = WatchExpired if response.status == 410 else ClusterError
    return cls(text, response.status, reason)
