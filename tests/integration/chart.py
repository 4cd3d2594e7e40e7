"""The Helm chart on the test apiserver: rendered by the pinned helm and applied with server-side
apply into a namespace (cluster-wide objects get names of their own, the session's CRDs and
priority classes are applied as a dry run), and a kubeconfig with a token of one of its
ServiceAccounts, so that a process runs with exactly the chart's permissions."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes.dynamic import DynamicClient

from tests.deploy.helm import command_line, render
from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster

DRY_RUN = {"CustomResourceDefinition", "PriorityClass"}


@dataclass(frozen=True)
class Installed:
    release: str
    namespace: str
    docs: list[dict[str, Any]]

    def service_account(self, component: str) -> str:
        return f"{self.release}-kaipolicy-{component}"

    def args(self, component: str) -> list[str]:
        """The command line the chart gives `component` (scheduler, binder)."""
        return command_line(self.docs, component)


def install(cluster: Cluster, namespace: str, *sets: str) -> Installed:
    """The chart applied into `namespace` as release `kp<random>` (`--set` for each of `sets`)."""
    release = f"kp{secrets.token_hex(3)}"
    docs = render(namespace, release, *sets, crds=True)
    dynamic = DynamicClient(cluster.api)
    order = {"CustomResourceDefinition": 0, "Namespace": 1}
    for doc in sorted(docs, key=lambda d: order.get(d["kind"], 2)):
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        options: dict[str, Any] = {"field_manager": "helm-test", "force_conflicts": True}
        if doc["kind"] in DRY_RUN:
            options["dry_run"] = "All"
        dynamic.server_side_apply(resource, body=doc, namespace=doc["metadata"].get("namespace"), **options)
    return Installed(release, namespace, docs)


def service_account_kubeconfig(apiserver: ApiServer, cluster: Cluster, namespace: str, name: str,
                               path: Path) -> Path:
    """A kubeconfig that authenticates as ServiceAccount namespace/name (a TokenRequest token, an
    hour long), at the test apiserver."""
    answer = cluster.core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}})
    admin = apiserver.kubeconfig.read_text()
    path.write_text(admin.replace(f'token: "{apiserver.token}"', f'token: "{answer.status.token}"'))
    assert answer.status.token in path.read_text()
    return path
