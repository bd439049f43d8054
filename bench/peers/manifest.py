"""What `raftkube peers build` built, per version folder: `manifest.json` beside the binaries.

A binary counts as built only when the manifest names it at the folder's version with the
sha256 the file still has: a build interrupted, a binary replaced or truncated by hand, or an
entry for another version is built again rather than trusted.  The manifest is rewritten
(atomically) after each binary, so an interrupted build keeps what it finished.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

MANIFEST = "manifest.json"


class State(Enum):
    PRESENT = "present"
    MISSING = "missing"
    CORRUPT = "corrupt"
    """The file is there but is not what the manifest recorded (or the manifest does not name it)."""


@dataclass(frozen=True)
class Entry:
    peer: str
    version: str
    """The release of the folder it belongs to (v1.33.13, v3.6.17): what the build is keyed by."""
    source: str
    """The Go package and version it was built from (ginkgo's is the one Kubernetes pins), or
    the source tarball and its sha256 (busybox)."""
    sha256: str
    built_at: str
    """UTC, ISO 8601."""
    build_seconds: float
    go: str
    """The toolchain that built it (`go env GOVERSION`; the C compiler's version for busybox)."""
    reports: str
    """The first line it answers its version command with, as checked at build time."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Manifest:
    """The entries of one version folder, read from and written to its manifest.json."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.entries: dict[str, Entry] = {}
        path = folder / MANIFEST
        if path.is_file():
            try:
                raw = json.loads(path.read_text())
                self.entries = {name: Entry(**fields) for name, fields in raw.get("peers", {}).items()}
            except (ValueError, TypeError, AttributeError):
                self.entries = {}  # unreadable: every binary is rebuilt, which rewrites it

    def state(self, peer: str, version: str) -> State:
        """Whether `peer` at `version` is in the folder as recorded."""
        path = self.folder / peer
        if not path.is_file():
            return State.MISSING
        entry = self.entries.get(peer)
        if entry is None or entry.version != version or sha256_of(path) != entry.sha256:
            return State.CORRUPT
        return State.PRESENT

    def record(self, entry: Entry) -> None:
        """Add (or replace) `entry` and write the manifest at once."""
        self.entries[entry.peer] = entry
        self.folder.mkdir(parents=True, exist_ok=True)
        body = {"peers": {name: asdict(e) for name, e in sorted(self.entries.items())}}
        part = self.folder / f".{MANIFEST}.part"
        part.write_text(json.dumps(body, indent=2) + "\n")
        os.replace(part, self.folder / MANIFEST)
