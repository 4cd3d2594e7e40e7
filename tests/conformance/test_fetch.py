"""Fetching the suite from the Go module: pinned by its h1 hash, errors said plainly, done once.
A stand-in `go` prints what `go mod download -json` prints, so no network is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance import fetch


def _fake_go(tmp_path: Path, answer: dict[str, str]) -> str:
    script = tmp_path / "go"
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(answer)}\nEOF\n", encoding="utf-8")
    script.chmod(0o755)
    return str(script)


def _module(tmp_path: Path) -> Path:
    testdata = tmp_path / "module" / "tests" / "simple" / "testdata"
    testdata.mkdir(parents=True)
    (testdata / "basic.textproto").write_text('name: "basic"\n', encoding="utf-8")
    (testdata / "basic.textproto").chmod(0o444)      # the module cache is read-only
    return tmp_path / "module"


def test_the_pinned_module_is_copied_with_its_source_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _fake_go(tmp_path, {"Dir": str(_module(tmp_path)), "Sum": fetch.GO_SUM})
    monkeypatch.setattr(fetch, "go_command", lambda: go)
    folder = fetch.fetch(tmp_path / "cache")
    assert (folder / "basic.textproto").read_text(encoding="utf-8") == 'name: "basic"\n'
    assert (folder / "SOURCE").read_text(encoding="utf-8").strip() == fetch.GO_SOURCE


def test_a_module_with_another_hash_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _fake_go(tmp_path, {"Dir": str(_module(tmp_path)), "Sum": "h1:something-else="})
    monkeypatch.setattr(fetch, "go_command", lambda: go)
    with pytest.raises(SystemExit, match="checksum h1:something-else=, expected"):
        fetch.fetch(tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_gos_own_error_is_passed_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = _fake_go(tmp_path, {"Path": "cel.dev/expr", "Error": "verifying module: checksum mismatch"})
    monkeypatch.setattr(fetch, "go_command", lambda: go)
    with pytest.raises(SystemExit, match="go mod download cel.dev/expr@.*: verifying module: checksum mismatch"):
        fetch.fetch(tmp_path / "cache")


def test_a_fetched_suite_is_not_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "SOURCE").write_text(fetch.GO_SOURCE + "\n", encoding="utf-8")
    monkeypatch.setattr(fetch, "go_command", lambda: _fake_go(tmp_path, {"Error": "must not run"}))
    assert fetch.fetch(cache) == cache
