"""A watch stream against a fake urllib3 response: closing it from another thread only interrupts
the read; the reading thread ends quietly, then closes the connection and gives it back to the
pool itself; a stream that breaks while nobody closed it is a ClusterError, not a traceback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from kaipolicy.cache.kubeapi import WatchEvent, WatchStream
from kaipolicy.errors import ClusterError

ADDED = b'{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "7"}}}\n'


class Response:
    """Yields one event, then blocks until shut down and fails as `failure` says."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.calls: list[tuple[str, str]] = []
        self.cut = threading.Event()

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield ADDED
        self.cut.wait(5)
        if self.failure is not None:
            raise self.failure

    def _record(self, what: str) -> None:
        self.calls.append((what, threading.current_thread().name))

    def shutdown(self) -> None:
        self._record("shutdown")
        self.cut.set()

    def close(self) -> None:
        self._record("close")

    def release_conn(self) -> None:
        self._record("release_conn")


def read_in_a_thread(stream: WatchStream) -> tuple[threading.Thread, list[Any]]:
    seen: list[Any] = []

    def read() -> None:
        try:
            seen.extend(stream)
        except Exception as e:  # noqa: BLE001 - recorded for the test to look at
            seen.append(e)
    thread = threading.Thread(target=read, name="reader")
    thread.start()
    return thread, seen


@pytest.mark.parametrize("failure", [
    None, AttributeError("'NoneType' object has no attribute 'readline'"),
    urllib3.exceptions.ProtocolError("Response ended prematurely"), ValueError("I/O operation on closed file")])
def test_closing_from_another_thread_ends_the_stream_quietly_and_the_reader_releases_the_connection(
        failure: BaseException | None) -> None:
    response = Response(failure)
    stream = WatchStream(response, "Pod")
    thread, seen = read_in_a_thread(stream)
    stream.close()
    thread.join(5)
    assert not thread.is_alive()
    assert seen == [WatchEvent("ADDED", {"metadata": {"name": "a", "resourceVersion": "7"}})]
    assert response.calls == [("shutdown", "MainThread"), ("close", "reader"), ("release_conn", "reader")]


def test_a_stream_that_breaks_while_open_is_a_cluster_error_naming_the_watch() -> None:
    response = Response(urllib3.exceptions.ProtocolError("Connection broken"))
    response.cut.set()
    events = iter(WatchStream(response, "Pod/team-a"))
    next(events)
    with pytest.raises(ClusterError, match="watch Pod/team-a: the stream broke: Connection broken"):
        next(events)
    assert [c for c, _ in response.calls] == ["close", "release_conn"]
