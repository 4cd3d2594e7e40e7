"""Fixtures of the integration tests: a real etcd + kube-apiserver per test session (per xdist
worker), the CRDs of crds/ installed once, and per test a fresh namespace and partition.

Without the binaries (tools/kube-apiserver/build.sh) the tests fail under CI=true and are skipped
elsewhere, saying why.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from kaipolicy.cache.informer import Backoff
from kaipolicy.cache.k8s_source import K8sSource
from kaipolicy.cache.kubeapi import KubeApi
from tests.integration.apiserver import ApiServer, binaries, reason_unavailable
from tests.integration.cluster import Cluster


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    why = reason_unavailable()
    if why is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"integration tests cannot run: {why}", pytrace=False)
        pytest.skip(why)
    bin_dir = binaries()
    assert bin_dir is not None
    server = ApiServer(bin_dir, tmp_path_factory.mktemp("apiserver"))
    try:
        server.start()
        Cluster(server.kubeconfig).install_crds()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cluster(apiserver: ApiServer) -> Cluster:
    return Cluster(apiserver.kubeconfig)


def _fresh_namespace(cluster: Cluster, prefix: str) -> str:
    # no namespace controller runs: a deleted namespace would stay Terminating, so each test has its own
    name = f"{prefix}-{secrets.token_hex(4)}"
    cluster.core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def namespace(cluster: Cluster) -> str:
    return _fresh_namespace(cluster, "t")


@pytest.fixture
def partition() -> str:
    """A node-pool label value of this test's own: its shard sees only what carries it."""
    return f"p-{secrets.token_hex(4)}"


@pytest.fixture
def scheduler() -> str:
    """A schedulerName of this test's own: a binder started for it leaves other tests' pods alone."""
    return f"kai-{secrets.token_hex(3)}"


@pytest.fixture
def reserved(cluster: Cluster) -> str:
    """A namespace of this test's own for the binder's GPU-sharing reservation pods."""
    return _fresh_namespace(cluster, "rr")


@pytest.fixture
def api(apiserver: ApiServer) -> Iterator[KubeApi]:
    api = KubeApi(str(apiserver.kubeconfig))
    yield api
    api.close()


@pytest.fixture
def source(cluster: Cluster, api: KubeApi, partition: str) -> Iterator[K8sSource]:
    """A started cluster source serving this test's partition (through a shard named after it)."""
    cluster.shard(partition, partition)
    src = K8sSource(api, shard_name=partition, backoff=lambda: Backoff(0.2, 1.0))
    src.start(timeout=30)
    yield src
    src.stop()

