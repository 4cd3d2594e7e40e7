"""The Helm chart on a real apiserver: everything it renders applies with server-side apply (the
CRDs and priority classes as a dry run: the session's own are in use), the shard and rule bundle
it installs are what the scheduler accepts, and each component's ServiceAccount can do what it
needs and nothing the other does: SubjectAccessReviews, asked of the apiserver's RBAC."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from kaipolicy.cache.shard import shard as shard_view
from kaipolicy.cli.main import main as kaipolicy
from tests.deploy.helm import render
from tests.integration.cluster import Cluster

DRY_RUN = {"CustomResourceDefinition", "PriorityClass"}


@pytest.fixture
def installed(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The chart applied into this test's namespace, with names of its own for cluster-wide objects."""
    release, tag = f"kp{secrets.token_hex(3)}", secrets.token_hex(3)
    docs = render(namespace, release, f"resourceReservation.namespace=rr-{tag}", f"defaultShard.name=shard-{tag}",
                  f"defaultQueues.parentName=parent-{tag}", f"defaultQueues.childName=queue-{tag}", crds=True)
    dynamic = DynamicClient(cluster.api)
    order = {"CustomResourceDefinition": 0, "Namespace": 1}
    for doc in sorted(docs, key=lambda d: order.get(d["kind"], 2)):
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        resource_args: dict[str, Any] = {"field_manager": "helm-test", "force_conflicts": True}
        if doc["kind"] in DRY_RUN:
            resource_args["dry_run"] = "All"
        dynamic.server_side_apply(resource, body=doc, namespace=doc["metadata"].get("namespace"), **resource_args)
    return {"release": release, "tag": tag, "docs": docs, "namespace": namespace}


def test_every_rendered_object_applies_server_side(installed: dict[str, Any], cluster: Cluster) -> None:
    kinds = {d["kind"] for d in installed["docs"]}
    assert {"Deployment", "ClusterRole", "Role", "SchedulingShard", "ConfigMap", "Queue", "Namespace"} <= kinds
    deployments = cluster.api.sanitize_for_serialization(
        client.AppsV1Api(cluster.api).list_namespaced_deployment(installed["namespace"]))["items"]
    assert sorted(d["metadata"]["name"] for d in deployments) == [f"{installed['release']}-kaipolicy-binder",
                                                                  f"{installed['release']}-kaipolicy-scheduler"]


def test_the_installed_shard_and_rule_bundle_are_what_the_scheduler_accepts(
        installed: dict[str, Any], cluster: Cluster, tmp_path: Path) -> None:
    obj = cluster.custom.get_cluster_custom_object("kai.scheduler", "v1", "schedulingshards", f"shard-{installed['tag']}")
    view = shard_view(obj)
    ((namespace, name),) = view.bundle
    data = cluster.core.read_namespaced_config_map(name, namespace).data
    for file, text in data.items():
        (tmp_path / file).write_text(text)
    assert kaipolicy(["lint", str(tmp_path)]) == 0


def allowed(cluster: Cluster, user: str, verb: str, group: str, resource: str, namespace: str = "",
            subresource: str = "") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": user, "groups": ["system:serviceaccounts"],
                       "resourceAttributes": {"verb": verb, "group": group, "resource": resource,
                                              "subresource": subresource, "namespace": namespace}}}
    answer = client.AuthorizationV1Api(cluster.api).create_subject_access_review(review)
    return bool(answer.status.allowed)


# (component, verb, group, resource, subresource, where, allowed): "here" is the release's
# namespace, "reserved" the reservation namespace, "elsewhere" any other.
PERMISSIONS = [
    # the scheduler: what a cycle reads and commits, and never a binding or a queue write
    ("scheduler", "list", "", "pods", "", "elsewhere", True),
    ("scheduler", "watch", "scheduling.run.ai", "podgroups", "", "elsewhere", True),
    ("scheduler", "create", "scheduling.run.ai", "bindrequests", "", "elsewhere", True),
    ("scheduler", "delete", "scheduling.run.ai", "bindrequests", "", "elsewhere", True),
    ("scheduler", "create", "", "pods", "eviction", "elsewhere", True),
    ("scheduler", "patch", "scheduling.run.ai", "podgroups", "status", "elsewhere", True),
    ("scheduler", "create", "", "events", "", "elsewhere", True),
    ("scheduler", "list", "kai.scheduler", "schedulingshards", "", "", True),
    ("scheduler", "watch", "", "configmaps", "", "here", True),
    ("scheduler", "update", "coordination.k8s.io", "leases", "", "here", True),
    ("scheduler", "create", "", "pods", "binding", "elsewhere", False),
    ("scheduler", "patch", "scheduling.run.ai", "bindrequests", "status", "elsewhere", False),
    ("scheduler", "update", "scheduling.run.ai", "queues", "", "", False),
    ("scheduler", "delete", "", "pods", "", "elsewhere", False),
    ("scheduler", "watch", "", "configmaps", "", "elsewhere", False),
    ("scheduler", "update", "coordination.k8s.io", "leases", "", "elsewhere", False),
    # the binder: bind, label, report; pods made only as reservations; no queues, no decisions
    ("binder", "create", "", "pods", "binding", "elsewhere", True),
    ("binder", "patch", "", "pods", "", "elsewhere", True),
    ("binder", "patch", "", "pods", "status", "elsewhere", True),
    ("binder", "patch", "scheduling.run.ai", "bindrequests", "status", "elsewhere", True),
    ("binder", "watch", "scheduling.run.ai", "bindrequests", "", "elsewhere", True),
    ("binder", "get", "", "nodes", "", "", True),
    ("binder", "create", "", "pods", "", "reserved", True),
    ("binder", "delete", "", "pods", "", "reserved", True),
    ("binder", "update", "coordination.k8s.io", "leases", "", "here", True),
    ("binder", "create", "", "pods", "", "elsewhere", False),
    ("binder", "delete", "", "pods", "", "elsewhere", False),
    ("binder", "create", "scheduling.run.ai", "queues", "", "", False),
    ("binder", "update", "scheduling.run.ai", "queues", "", "", False),
    ("binder", "patch", "scheduling.run.ai", "queues", "", "", False),
    ("binder", "create", "scheduling.run.ai", "bindrequests", "", "elsewhere", False),
    ("binder", "patch", "scheduling.run.ai", "podgroups", "status", "elsewhere", False),
    ("binder", "delete", "", "nodes", "", "", False),
]


def test_each_component_may_do_what_it_needs_and_nothing_the_other_does(
        installed: dict[str, Any], cluster: Cluster) -> None:
    where = {"here": installed["namespace"], "reserved": f"rr-{installed['tag']}", "elsewhere": "team-a", "": ""}
    wrong = []
    for component, verb, group, resource, sub, place, expected in PERMISSIONS:
        user = f"system:serviceaccount:{installed['namespace']}:{installed['release']}-kaipolicy-{component}"
        got = allowed(cluster, user, verb, group, resource, where[place], sub)
        if got != expected:
            wrong.append(f"{component} {verb} {group or 'core'}/{resource}{'/' + sub if sub else ''} in "
                         f"{place or 'cluster'}: {'allowed' if got else 'denied'}, expected {'allowed' if expected else 'denied'}")
    assert not wrong, "\n".join(wrong)


def test_the_reservation_pods_may_only_annotate_pods_of_their_own_namespace(
        installed: dict[str, Any], cluster: Cluster) -> None:
    user = f"system:serviceaccount:rr-{installed['tag']}:kai-resource-reservation"
    assert allowed(cluster, user, "patch", "", "pods", f"rr-{installed['tag']}")
    assert not allowed(cluster, user, "patch", "", "pods", installed["namespace"])
    assert not allowed(cluster, user, "create", "", "pods", f"rr-{installed['tag']}")
