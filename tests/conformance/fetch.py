"""Puts the CEL conformance suite in .cache/cel-spec/ (`python -m tests.conformance.fetch`; .ci/run does).

cel-spec itself is on no package registry, and CI reaches registries only. The one copy of
its `tests/simple/testdata/*.textproto` on PyPI is inside cel-python's source distribution
(`features/`, copied from cel-spec by its maintainers), so pip downloads that sdist, pinned by
version and hash, and the .textproto files are taken out of it. `$KAIPOLICY_CEL_SPEC` points
the tests at a newer cel-spec checkout instead.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.conformance.suite import CACHE

PACKAGE = "cel-python==0.5.0"
SHA256 = "3eb0a619e8df0f338d0430cda01427a742e77e3c433a1c7c3ebd409cd804c45a"
MARKER = "SOURCE"


def fetch(dest: Path = CACHE) -> Path:
    """The folder holding the suite's .textproto files, downloaded once."""
    marker = dest / MARKER
    if marker.exists() and marker.read_text(encoding="utf-8").strip() == _source():
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        "--dest", tmp, PACKAGE], check=True)
        (archive,) = Path(tmp).glob("*.tar.gz")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != SHA256:
            raise SystemExit(f"{archive.name}: sha256 {digest}, expected {SHA256}; refusing to use it")
        staging = Path(tmp) / "testdata"
        staging.mkdir()
        with tarfile.open(archive) as sdist:
            for member in sdist.getmembers():
                path = Path(member.name)
                if member.isfile() and path.parent.name == "features" and path.suffix == ".textproto":
                    source = sdist.extractfile(member)
                    assert source is not None  # a regular file always has content
                    (staging / path.name).write_bytes(source.read())
        if not any(staging.glob("*.textproto")):
            raise SystemExit(f"{archive.name} holds no features/*.textproto files")
        (staging / MARKER).write_text(_source() + "\n", encoding="utf-8")
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(staging, dest)
    return dest


def _source() -> str:
    return f"{PACKAGE} sha256:{SHA256}"


if __name__ == "__main__":
    folder = fetch()
    print(f"{len(list(folder.glob('*.textproto')))} conformance files in {folder}")
