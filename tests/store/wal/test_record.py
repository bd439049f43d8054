"""Framing: what `scan` accepts, where it stops, and how `find_frame` finds valid data after damage."""

from __future__ import annotations

import msgpack
import pytest

from store.raft.types import Entry, EntryType, HardState
from store.wal import WALCorruptError
from store.wal.record import (
    FRAME_SIZE,
    SnapshotMarker,
    decode_batch,
    encode_batch,
    find_frame,
    frame,
    scan,
)


def test_scan_reads_frames_and_stops_cleanly() -> None:
    buf = frame(msgpack.packb([1])) + frame(msgpack.packb("two"))
    s = scan(buf, "f")
    assert [body for _, body in s.records] == [[1], "two"]
    assert s.records[1][0] == FRAME_SIZE + 2
    assert (s.end, s.problem) == (len(buf), None)


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (b"\x05\x00", "incomplete frame header"),
        (b"\x05\x00\x00\x00\x00\x00\x00\x00ab", "incomplete record"),
        (b"\x02\x00\x00\x00\x00\x00\x00\x00ab", "CRC mismatch"),
        (b"\x00" * 20, "zero-filled tail"),
        (b"\x00\x00\x00\x00\x00\x00\x00\x00\x01", "zero-length record"),
    ],
)
def test_scan_reports_the_first_problem(tail: bytes, problem: str) -> None:
    good = frame(msgpack.packb([1, 2, 3]))
    s = scan(good + tail, "f")
    assert len(s.records) == 1
    assert s.end == len(good)
    assert s.problem is not None and s.problem.startswith(problem)


def test_find_frame_finds_the_next_valid_frame() -> None:
    a, b = frame(msgpack.packb(list(range(50)))), frame(msgpack.packb(b"x" * 300))
    assert find_frame(a + b, 1) == len(a)
    assert find_frame(a + b"junk" + b, 1) == len(a) + 4
    assert find_frame(a + bytes(range(256)) * 4, 1) is None
    assert find_frame(b"", 0) is None


def test_batch_round_trip_keeps_types_and_skips_what_is_not_asked_for() -> None:
    entries = [Entry(2, 5, EntryType.NORMAL, b"a"), Entry(2, 6, EntryType.CONF_CHANGE, b"cc"), Entry(3, 7)]
    rec = encode_batch(SnapshotMarker(4, 2), True, entries, HardState(3, 1, 6))
    (_, body), *_ = scan(rec, "f").records
    b = decode_batch(body, "f", 0)
    assert (b.snapshot, b.reset, b.hard_state) == (SnapshotMarker(4, 2), True, HardState(3, 1, 6))
    assert b.entries_from(0) == entries
    assert b.entries_from(7) == entries[2:]
    with pytest.raises(WALCorruptError, match="differ in length"):
        decode_batch([2, None, False, 1, [1, 1], b"\x00", [b"", b""], None], "f", 9)
