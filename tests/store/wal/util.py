"""Helpers shared by the WAL tests."""

from __future__ import annotations

from pathlib import Path

from store.raft.types import Entry, HardState
from store.wal import WAL
from store.wal.record import scan


def ents(lo: int, hi: int, term: int = 1, size: int = 32) -> list[Entry]:
    """Entries lo..hi inclusive whose payload names them (so mix-ups show)."""
    return [Entry(term=term, index=i, data=f"{term}:{i}:".encode().ljust(size, b"x")) for i in range(lo, hi + 1)]


def hs(term: int = 1, vote: int = 1, commit: int = 0) -> HardState:
    return HardState(term=term, vote=vote, commit=commit)


def write_wal(wal_dir: Path, batches: int, per_batch: int = 3, segment_size: int = 1 << 20) -> None:
    """A WAL with `batches` saves of `per_batch` entries each (indexes from 1)."""
    with WAL.create(wal_dir, {"member_id": 7}, segment_size=segment_size) as w:
        for b in range(batches):
            lo = b * per_batch + 1
            w.save(hs(commit=lo - 1), ents(lo, lo + per_batch - 1))


def record_offsets(segment: Path) -> list[int]:
    """Where each record of a (valid) segment starts; [0] is the segment header."""
    return [off for off, _ in scan(segment.read_bytes(), str(segment)).records]


def segments(wal_dir: Path) -> list[Path]:
    return sorted(wal_dir.glob("*.wal"))


def flip_bit(path: Path, offset: int, bit: int) -> None:
    buf = bytearray(path.read_bytes())
    buf[offset] ^= 1 << bit
    path.write_bytes(bytes(buf))


def truncate(path: Path, length: int) -> None:
    with path.open("r+b") as f:
        f.truncate(length)
