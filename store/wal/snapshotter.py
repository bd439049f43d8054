"""Snapshot files: `<data_dir>/snap/<term>-<index>.snap` (16 hex digits each).

File: `magic "RKSNAP01" | u32 meta length | u64 data length | u32 crc32(meta + data) | meta | data`
(little endian), meta = msgpack `[index, term, voters, learners]`, data = the state
machine's bytes, written as they are (no copy into a msgpack buffer: snapshots can be big).

A snapshot is written to `<name>.tmp`, fsynced, renamed into place and the directory
fsynced: a `.snap` file is whole or absent.  One that fails its checks anyway (bit rot) is
renamed to `.broken`, as etcd does, so it is kept for inspection but never loaded again.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import zlib
from pathlib import Path

import msgpack

from machinery.process import disk
from store.raft.types import ConfState, Snapshot, SnapshotMetadata
from store.wal.errors import SnapshotCorruptError

log = logging.getLogger(__name__)

MAGIC = b"RKSNAP01"
HEADER = struct.Struct("<8sIQI")
SUFFIX = ".snap"
_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.snap$")


def snapshot_name(term: int, index: int) -> str:
    return f"{term:016x}-{index:016x}{SUFFIX}"


def encode_meta(m: SnapshotMetadata) -> bytes:
    packed: bytes = msgpack.packb([m.index, m.term, list(m.conf_state.voters), list(m.conf_state.learners)])
    return packed


class Snapshotter:
    def __init__(self, snap_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(snap_dir)
        if not self.dir.is_dir():
            disk.make_dirs(self.dir)
            disk.fsync_dir(self.dir.parent)

    def files(self) -> list[tuple[int, int, Path]]:
        """(index, term, path) of every `.snap` file, newest first."""
        found = []
        for name in os.listdir(self.dir):
            m = _NAME.match(name)
            if m:
                found.append((int(m[2], 16), int(m[1], 16), self.dir / name))
        found.sort(reverse=True)
        return found

    def save(self, snapshot: Snapshot) -> Path:
        """Write `snapshot` durably; returns its path.  Call before the WAL records it."""
        md = snapshot.metadata
        if md.index <= 0:
            raise ValueError("an empty snapshot (index 0) is not saved")
        meta = encode_meta(md)
        data = snapshot.data
        crc = zlib.crc32(data, zlib.crc32(meta))
        path = self.dir / snapshot_name(md.term, md.index)
        tmp = path.with_name(path.name + ".tmp")
        fd = disk.open_new(tmp)
        try:
            disk.write(fd, HEADER.pack(MAGIC, len(meta), len(data), crc))
            disk.write(fd, meta)
            disk.write(fd, data)
            disk.fsync(fd)
        except BaseException:
            disk.close(fd)
            disk.remove(tmp)
            raise
        disk.close(fd)
        disk.rename(tmp, path)
        disk.fsync_dir(self.dir)
        return path

    def load(self, path: Path) -> Snapshot:
        """Read and check one snapshot file; raises SnapshotCorruptError."""
        buf = path.read_bytes()
        where = str(path)
        if len(buf) < HEADER.size:
            raise SnapshotCorruptError(where, f"{len(buf)} bytes, shorter than the {HEADER.size}-byte header")
        magic, meta_len, data_len, crc = HEADER.unpack_from(buf)
        if magic != MAGIC:
            raise SnapshotCorruptError(where, f"bad magic {magic!r}")
        if HEADER.size + meta_len + data_len != len(buf):
            raise SnapshotCorruptError(
                where, f"header says {HEADER.size + meta_len + data_len} bytes, the file has {len(buf)}"
            )
        view = memoryview(buf)
        meta = view[HEADER.size : HEADER.size + meta_len]
        data = view[HEADER.size + meta_len :]
        computed = zlib.crc32(data, zlib.crc32(meta))
        if computed != crc:
            raise SnapshotCorruptError(where, f"CRC mismatch (stored {crc:08x}, computed {computed:08x})")
        try:
            index, term, voters, learners = msgpack.unpackb(meta)
            md = SnapshotMetadata(int(index), int(term), ConfState(tuple(voters), tuple(learners)))
        except Exception as e:
            raise SnapshotCorruptError(where, f"metadata does not decode: {e}") from e
        m = _NAME.match(path.name)
        if m is None or (int(m[1], 16), int(m[2], 16)) != (md.term, md.index):
            raise SnapshotCorruptError(where, f"contents are term {md.term} index {md.index}, the name says otherwise")
        return Snapshot(md, bytes(data))

    def load_newest(self, max_index: int | None = None) -> Snapshot | None:
        """The newest readable snapshot (at most `max_index`); corrupt ones become `.broken`.

        `max_index` is the WAL's newest snapshot marker: a newer file was saved but never
        recorded (crash in between), so nothing was acknowledged on its strength: ignore it.
        """
        self._remove_temporaries()
        for index, _term, path in self.files():
            if max_index is not None and index > max_index:
                continue
            try:
                return self.load(path)
            except SnapshotCorruptError as e:
                broken = path.with_name(path.name + ".broken")
                log.warning("%s; renaming it to %s", e, broken.name)
                disk.rename(path, broken)
                disk.fsync_dir(self.dir)
        return None

    def purge(self, keep: int = 5, needed: int | None = None) -> list[Path]:
        """Delete all but the `keep` newest snapshots (and leftover temporaries).

        `needed`: the index of the WAL's durable snapshot marker, when it is older than the
        newest marker (written without fsync): the snapshot a restart after a crash would
        load for it (`load_newest(max_index=needed)`) is kept too.
        """
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        removed = self._remove_temporaries()
        files = self.files()
        protected = None
        if needed is not None:
            protected = next((path for index, _term, path in files if index <= needed), None)
        for _index, _term, path in files[keep:]:
            if path != protected:
                disk.remove(path)
                removed.append(path)
        return removed

    def _remove_temporaries(self) -> list[Path]:
        removed = []
        for name in os.listdir(self.dir):
            if name.endswith(SUFFIX + ".tmp"):
                disk.remove(self.dir / name)
                removed.append(self.dir / name)
        return removed
