"""A test-only record of every entry a member applies: the chaos checker's evidence.

etcd's robustness suite reads members' WALs to learn what was really committed; ours
keeps a plain side file instead, because a WAL is released behind snapshots.  Enabled by
`RAFTKUBE_APPLY_LOG=1` in the member's environment, it appends one msgpack record per
applied entry to `<data dir>/apply.log`:

    [index, term, entry type, data, revision after apply, time.monotonic()]

(entry type is raft's, or SNAPSHOT_INSTALLED / SNAPSHOT_LOADED for a state replaced whole).

It is opened with `machinery.process.disk.open_log` (private, but untracked) and written with plain
`os.write`, so a simulated crash that cuts store files back to their fsynced length leaves
it whole: it says what was applied, even by a process that then lost it.  A member
re-applying entries after a restart logs them again; the checker requires every copy of an
index to agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

from machinery.process import disk

ENV = "RAFTKUBE_APPLY_LOG"
SNAPSHOT_INSTALLED = -1
"""Entry type of a record saying: state replaced by the leader's snapshot at this index."""
SNAPSHOT_LOADED = -2
"""Entry type of a record saying: restarted from our own snapshot at this index."""
FILE = "apply.log"


class ApplyLog:
    """Buffers one Ready's records and writes them with one syscall."""

    def __init__(self, data_dir: Path) -> None:
        self.fd = disk.open_log(data_dir / FILE)
        self._buf: list[bytes] = []
        self._packer = msgpack.Packer(use_bin_type=True)

    @classmethod
    def from_env(cls, data_dir: Path) -> ApplyLog | None:
        return cls(data_dir) if os.environ.get(ENV) else None

    def record(self, index: int, term: int, entry_type: int, data: bytes, revision: int, at: float) -> None:
        self._buf.append(self._packer.pack([index, term, entry_type, data, revision, at]))

    def flush(self) -> None:
        if self._buf:
            os.write(self.fd, b"".join(self._buf))
            self._buf.clear()

    def close(self) -> None:
        self.flush()
        os.close(self.fd)


def read_apply_log(path: Path) -> Iterator[list[Any]]:
    """The records of one member's log; a torn last record (killed mid-write) is ignored."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            unpacker.feed(chunk)
            yield from unpacker
