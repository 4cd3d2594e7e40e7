"""Puts the CEL conformance suite in .cache/cel-spec/ (`python -m tests.conformance.fetch`; .ci/run does).

cel-spec publishes the suite inside its own Go module, `cel.dev/expr` (`tests/simple/testdata`),
which the Go module proxy serves: `go mod download` fetches the pinned version, Go's checksum
database vouches for it, and its `h1:` hash must also equal the one pinned here. Where `go` is
missing, the fallback is the older copy inside cel-python's source distribution on PyPI
(`features/*.textproto`), pinned by version and sha256. The folder's SOURCE file says which
copy it holds; `$KAIPOLICY_CEL_SPEC` points the tests at another copy instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.conformance.suite import CACHE, MARKER

GO_MODULE = "cel.dev/expr@v0.26.0"
GO_SUM = "h1:oLXvOF0jiYA5A/tmzU91pLEWZkKynhLJlC9Gw7PrKvs="
GO_TESTDATA = Path("tests") / "simple" / "testdata"
PYPI_PACKAGE = "cel-python==0.5.0"
PYPI_SHA256 = "3eb0a619e8df0f338d0430cda01427a742e77e3c433a1c7c3ebd409cd804c45a"
GO_SOURCE = f"Go module {GO_MODULE} {GO_SUM}"
PYPI_SOURCE = f"PyPI {PYPI_PACKAGE} sha256:{PYPI_SHA256} (fallback: no go command)"


def fetch(dest: Path = CACHE) -> Path:
    """The folder holding the suite's .textproto files, downloaded once (again when the pin moves)."""
    go = go_command()
    marker = dest / MARKER
    held = marker.read_text(encoding="utf-8").strip() if marker.exists() else ""
    if held == GO_SOURCE or (held == PYPI_SOURCE and go is None):
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp) / "testdata"
        staging.mkdir()
        if go is not None:
            _from_go_module(go, Path(tmp), staging)
        else:
            _from_pypi(Path(tmp), staging)
        if not any(staging.glob("*.textproto")):
            raise SystemExit("the downloaded suite holds no .textproto files")
        (staging / MARKER).write_text((GO_SOURCE if go is not None else PYPI_SOURCE) + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, dest)
    return dest


def go_command() -> str | None:
    """`go` on the PATH, else where Go's own installer puts it (a non-login shell, such as the
    one running .ci/run, may not have it on the PATH)."""
    found = shutil.which("go")
    if found is not None:
        return found
    for root in (os.environ.get("GOROOT", ""), "/usr/local/go"):
        candidate = Path(root, "bin", "go") if root else None
        if candidate is not None and candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _from_go_module(go: str, workdir: Path, staging: Path) -> None:
    """`go mod download -json` (run outside any module, so no go.mod around us takes part)."""
    done = subprocess.run([go, "mod", "download", "-json", GO_MODULE], cwd=workdir, capture_output=True, text=True,
                          check=False)
    try:
        info = json.loads(done.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"go mod download {GO_MODULE} failed: {done.stderr.strip() or done.stdout.strip()}") from None
    if done.returncode != 0 or "Error" in info:
        raise SystemExit(f"go mod download {GO_MODULE} failed: {info.get('Error') or done.stderr.strip()}")
    if info.get("Sum") != GO_SUM:
        raise SystemExit(f"{GO_MODULE}: checksum {info.get('Sum')}, expected {GO_SUM}; refusing to use it")
    for path in sorted((Path(info["Dir"]) / GO_TESTDATA).glob("*.textproto")):
        # the module cache is read-only: copy the bytes, not the file modes
        (staging / path.name).write_bytes(path.read_bytes())


def _from_pypi(workdir: Path, staging: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                    "--dest", str(workdir), PYPI_PACKAGE], check=True)
    (archive,) = workdir.glob("*.tar.gz")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != PYPI_SHA256:
        raise SystemExit(f"{archive.name}: sha256 {digest}, expected {PYPI_SHA256}; refusing to use it")
    with tarfile.open(archive) as sdist:
        for member in sdist.getmembers():
            path = Path(member.name)
            if member.isfile() and path.parent.name == "features" and path.suffix == ".textproto":
                source = sdist.extractfile(member)
                assert source is not None  # a regular file always has content
                (staging / path.name).write_bytes(source.read())


if __name__ == "__main__":
    folder = fetch()
    source = (folder / MARKER).read_text(encoding="utf-8").strip()
    print(f"{len(list(folder.glob('*.textproto')))} conformance files in {folder}, from {source}")
