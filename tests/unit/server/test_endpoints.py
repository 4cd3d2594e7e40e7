"""The scheduler's endpoints over real HTTP: /metrics in Prometheus' text format, /healthz, and
/readyz saying why it is not ready."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kaipolicy.errors import ConfigError
from kaipolicy.server.endpoints import Endpoints, parse_address


@pytest.mark.parametrize(("text", "want"), [
    (":8080", ("0.0.0.0", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9090", ("::1", 9090))])
def test_an_address_is_host_and_port_or_only_a_port(text: str, want: tuple[str, int]) -> None:
    assert parse_address(text) == want


@pytest.mark.parametrize("text", ["8080", "host:", "host:http", ":70000"])
def test_a_bad_address_is_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="--metrics-address"):
        parse_address(text)


class Ready:
    problem: str | None = "listing the cluster's objects"

    def __call__(self) -> str | None:
        return self.problem


@pytest.fixture
def served() -> Iterator[tuple[Endpoints, Ready]]:
    ready = Ready()
    endpoints = Endpoints("127.0.0.1:0", ready)
    endpoints.start()
    yield endpoints, ready
    endpoints.stop()


def _get(endpoints: Endpoints, path: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://{endpoints.address}{path}", timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], e.read().decode()


def test_readyz_says_why_until_the_scheduler_is_ready(served: tuple[Endpoints, Ready]) -> None:
    endpoints, ready = served
    assert _get(endpoints, "/readyz")[::2] == (503, "listing the cluster's objects\n")
    assert _get(endpoints, "/healthz")[::2] == (200, "ok\n")
    ready.problem = None
    assert _get(endpoints, "/readyz")[::2] == (200, "ok\n")


def test_metrics_are_served_in_the_text_format(served: tuple[Endpoints, Ready]) -> None:
    status, content_type, text = _get(served[0], "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"kai_e2e_scheduling_latency_milliseconds", "kaipolicy_rule_errors", "kaipolicy_bundle_reloads",
            "kaipolicy_malformed_objects"} <= names


def test_an_unknown_path_is_404(served: tuple[Endpoints, Ready]) -> None:
    assert _get(served[0], "/nope")[0] == 404


def test_an_address_in_use_is_a_clear_error(served: tuple[Endpoints, Ready]) -> None:
    with pytest.raises(ConfigError, match="cannot listen there"):
        Endpoints(served[0].address, Ready())
