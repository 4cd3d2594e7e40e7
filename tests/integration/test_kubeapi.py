"""kaipolicy's thin API layer against a real server: reads, the writes phase 2 builds on, and
errors that name the verb and the object."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kaipolicy.cache import kubeapi
from kaipolicy.cache.kubeapi import KubeApi
from kaipolicy.errors import ClusterError, WatchExpired
from tests.integration.apiserver import ApiServer
from tests.integration.cluster import Cluster
from tests.polling import wait_for


def _pod_group(namespace: str, name: str) -> dict[str, object]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"queue": "q", "minMember": 1}}


def test_custom_objects_are_created_patched_with_status_and_deleted(api: KubeApi, namespace: str) -> None:
    kind = kubeapi.POD_GROUP
    api.create(kind, _pod_group(namespace, "pg"))
    api.patch(kind, "pg", {"spec": {"minMember": 3}}, namespace)
    api.patch(kind, "pg", {"status": {"phase": "Pending"}}, namespace, status=True)
    got = api.get(kind, "pg", namespace)
    assert (got["spec"]["minMember"], got["status"]["phase"]) == (3, "Pending")
    api.delete(kind, "pg", namespace)
    with pytest.raises(ClusterError) as e:
        api.get(kind, "pg", namespace)
    assert e.value.status == 404
    assert str(e.value).startswith(f"get PodGroup/{namespace}/pg: 404 NotFound")


def test_creating_an_object_twice_is_a_conflict_naming_it(api: KubeApi, namespace: str) -> None:
    api.create(kubeapi.POD_GROUP, _pod_group(namespace, "twice"))
    with pytest.raises(ClusterError) as e:
        api.create(kubeapi.POD_GROUP, _pod_group(namespace, "twice"))
    assert e.value.status == 409
    assert f"create PodGroup/{namespace}/twice: 409 AlreadyExists" in str(e.value)


def test_binding_a_pod_sets_its_node_and_a_second_binding_is_a_conflict(
        api: KubeApi, cluster: Cluster, namespace: str, partition: str) -> None:
    cluster.node(f"bind-{partition}", partition)
    pod = cluster.pod(namespace, "p", partition)
    api.bind(namespace, "p", f"bind-{partition}", uid=pod["metadata"]["uid"])
    assert cluster.core.read_namespaced_pod("p", namespace).spec.node_name == f"bind-{partition}"
    with pytest.raises(ClusterError) as e:
        api.bind(namespace, "p", f"bind-{partition}")
    assert e.value.status == 409 and f"bind Pod/{namespace}/p" in str(e.value)


def test_an_eviction_deletes_the_pod_through_the_eviction_api(api: KubeApi, cluster: Cluster, namespace: str,
                                                              partition: str) -> None:
    cluster.pod(namespace, "victim", partition)
    api.evict(namespace, "victim", grace_period_seconds=0)
    wait_for("the evicted pod to go", lambda: not cluster.core.list_namespaced_pod(namespace).items)


def test_an_event_is_recorded_on_the_object_it_is_about(api: KubeApi, cluster: Cluster, namespace: str,
                                                       partition: str) -> None:
    pod = cluster.pod(namespace, "noted", partition)
    api.create_event(kubeapi.POD, pod, "NotSchedulable", "a message for the user")
    (event,) = cluster.events_about(namespace, "noted")
    assert (event["involvedObject"]["kind"], event["involvedObject"]["uid"]) == ("Pod", pod["metadata"]["uid"])
    assert (event["reason"], event["message"], event["type"]) == ("NotSchedulable", "a message for the user", "Warning")


def test_a_watch_reports_changes_after_the_listed_version(api: KubeApi, namespace: str) -> None:
    _, version = api.list(kubeapi.POD_GROUP, namespace)
    stream = api.watch(kubeapi.POD_GROUP, version, namespace, timeout_seconds=10)
    seen: list[tuple[str, str]] = []
    reader = threading.Thread(target=lambda: seen.extend((e.type, e.object["metadata"]["name"]) for e in stream))
    reader.start()
    api.create(kubeapi.POD_GROUP, _pod_group(namespace, "watched"))
    wait_for("the ADDED event", lambda: ("ADDED", "watched") in seen, 10)
    stream.close()
    reader.join(timeout=10)
    assert not reader.is_alive()


def test_a_watch_from_a_version_no_longer_kept_says_list_again(api: KubeApi, namespace: str) -> None:
    api.create(kubeapi.POD_GROUP, _pod_group(namespace, "x"))
    with pytest.raises(WatchExpired) as e:
        list(api.watch(kubeapi.POD_GROUP, "1", namespace, timeout_seconds=5))
    assert e.value.status == 410


def test_an_unreachable_server_is_a_cluster_error_not_a_traceback(apiserver: ApiServer, tmp_path: Path) -> None:
    config = apiserver.kubeconfig.read_text().replace(f":{apiserver.port}", ":1")
    (tmp_path / "kubeconfig").write_text(config)
    api = KubeApi(str(tmp_path / "kubeconfig"))
    with pytest.raises(ClusterError, match="list Node: cannot reach the API server at https://127.0.0.1:1"):
        api.list(kubeapi.NODE)


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=f"cannot load Kubernetes credentials from {tmp_path}/none"):
        KubeApi(str(tmp_path / "none"))


def test_replacing_an_object_changed_since_it_was_read_is_a_conflict(api: KubeApi, namespace: str) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "leader", "namespace": namespace}, "spec": {"holderIdentity": "a"}}
    read = api.create(kubeapi.LEASE, lease)
    first = api.replace(kubeapi.LEASE, read | {"spec": {"holderIdentity": "b"}})
    assert first["spec"]["holderIdentity"] == "b"
    with pytest.raises(ClusterError) as e:
        api.replace(kubeapi.LEASE, read | {"spec": {"holderIdentity": "c"}})   # read's version is stale now
    assert e.value.status == 409 and f"replace Lease/{namespace}/leader: 409 Conflict" in str(e.value)
