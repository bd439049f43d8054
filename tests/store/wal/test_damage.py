"""Crash damage is repaired (torn tail), real corruption is reported (file + offset), never skipped."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import msgpack
import pytest

from store.wal import WAL, WALCorruptError, replay
from store.wal.record import BATCH, frame
from tests.store.wal.util import ents, flip_bit, hs, record_offsets, segments, truncate, write_wal


def _reopen_append_reopen(d: Path, expect_last: int) -> None:
    """The repaired WAL takes new writes, and they survive another reopen cleanly."""
    w, _ = WAL.open(d)
    with w:
        w.save(hs(commit=expect_last), ents(expect_last + 1, expect_last + 2))
    w, r = WAL.open(d)
    w.close()
    assert r.torn == []
    assert r.entries == ents(1, expect_last + 2)


def test_torn_tail_at_every_byte_offset_of_the_last_record(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever prefix of the last record a crash left, it is cut off and the WAL carries on."""
    src = tmp_path / "src"
    write_wal(src, batches=4)
    seg = segments(src)[0]
    last = record_offsets(seg)[-1]
    size = seg.stat().st_size
    for cut in range(last, size):
        d = tmp_path / f"cut{cut}"
        shutil.copytree(src, d)
        truncate(d / seg.name, cut)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="store.wal"):
            w, r = WAL.open(d)
        w.close()
        assert r.entries == ents(1, 9), cut
        assert (d / seg.name).stat().st_size == last
        if cut > last:
            assert [t.offset for t in r.torn] == [last]
            assert f"truncating a torn tail at byte offset {last}" in caplog.text
        else:
            assert r.torn == []  # cut exactly at a record boundary: nothing is torn
        _reopen_append_reopen(d, expect_last=9)
        shutil.rmtree(d)


def test_flipped_bit_in_the_last_record_is_a_torn_tail(tmp_path: Path) -> None:
    """Any bit of the last record (frame header included) flipped: the record is dropped."""
    src = tmp_path / "src"
    write_wal(src, batches=4)
    seg = segments(src)[0]
    last = record_offsets(seg)[-1]
    size = seg.stat().st_size
    positions = [(off, bit) for off in range(last, last + 8) for bit in range(8)]  # length and CRC fields
    positions += [(off, off % 8) for off in range(last + 8, size)]
    for off, bit in positions:
        d = tmp_path / "d"
        shutil.copytree(src, d)
        flip_bit(d / seg.name, off, bit)
        w, r = WAL.open(d)
        w.close()
        assert r.entries == ents(1, 9), (off, bit)
        assert [t.offset for t in r.torn] == [last], (off, bit)
        shutil.rmtree(d)


def test_flipped_bit_in_a_middle_record_names_file_and_offset(tmp_path: Path) -> None:
    """Damage followed by valid records is corruption: a typed error, and the file is left alone."""
    src = tmp_path / "src"
    write_wal(src, batches=4)
    seg = segments(src)[0]
    offsets = record_offsets(seg)
    for victim in (0, 2):  # the segment header, and a batch in the middle
        start, end = offsets[victim], offsets[victim + 1]
        positions = [(off, bit) for off in range(start, start + 8) for bit in range(8)]
        positions += [(off, off % 8) for off in range(start + 8, end)]
        for off, bit in positions:
            d = tmp_path / "d"
            shutil.copytree(src, d)
            flip_bit(d / seg.name, off, bit)
            damaged = (d / seg.name).read_bytes()
            with pytest.raises(WALCorruptError) as exc:
                WAL.open(d)
            assert exc.value.path == str(d / seg.name), (off, bit)
            assert exc.value.offset == start, (off, bit)
            assert f"{seg.name} at byte offset {start}" in str(exc.value)
            assert (d / seg.name).read_bytes() == damaged
            shutil.rmtree(d)


def _multi_segment(d: Path) -> list[Path]:
    write_wal(d, batches=12, per_batch=4, segment_size=400)
    segs = segments(d)
    assert len(segs) >= 3
    return segs


def test_damage_in_a_segment_that_is_not_the_last_is_an_error(tmp_path: Path) -> None:
    """Only the last segment can have a torn tail; in an earlier one even the tail is corruption."""
    d = tmp_path / "flip"
    segs = _multi_segment(d)
    last_rec = record_offsets(segs[0])[-1]
    flip_bit(segs[0], last_rec + 10, 3)
    with pytest.raises(WALCorruptError, match=segs[0].name) as exc:
        WAL.open(d)
    assert (exc.value.path, exc.value.offset) == (str(segs[0]), last_rec)

    d = tmp_path / "cut"
    segs = _multi_segment(d)
    last_rec = record_offsets(segs[1])[-1]
    truncate(segs[1], segs[1].stat().st_size - 1)
    with pytest.raises(WALCorruptError, match="not the last") as exc:
        WAL.open(d)
    assert (exc.value.path, exc.value.offset) == (str(segs[1]), last_rec)


def test_zero_filled_tail_counts_as_the_end(tmp_path: Path) -> None:
    """Zeros after the last record (what some file systems leave) are trimmed, nothing is lost."""
    write_wal(tmp_path, batches=3)
    seg = segments(tmp_path)[0]
    size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(bytes(5000))
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == ents(1, 9)
    assert [(t.offset, t.reason) for t in r.torn] == [(size, "zero-filled tail")]
    assert seg.stat().st_size == size
    _reopen_append_reopen(tmp_path, expect_last=9)


def test_zeroed_record_in_the_middle_is_an_error(tmp_path: Path) -> None:
    """A zeroed hole followed by valid records is not a tail."""
    write_wal(tmp_path, batches=4)
    seg = segments(tmp_path)[0]
    offsets = record_offsets(seg)
    buf = bytearray(seg.read_bytes())
    buf[offsets[2] : offsets[3]] = bytes(offsets[3] - offsets[2])
    seg.write_bytes(bytes(buf))
    with pytest.raises(WALCorruptError, match="zero-length record, followed by a valid record") as exc:
        WAL.open(tmp_path)
    assert exc.value.offset == offsets[2]


def test_garbage_tail_is_truncated(tmp_path: Path) -> None:
    """Non-zero junk after the last record, with no valid frame in it, is a torn tail."""
    write_wal(tmp_path, batches=3)
    seg = segments(tmp_path)[0]
    size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(bytes(range(7, 250)) * 10)
    w, r = WAL.open(tmp_path)
    w.close()
    assert r.entries == ents(1, 9)
    assert seg.stat().st_size == size


def test_a_record_that_passes_its_crc_but_does_not_decode_is_an_error(tmp_path: Path) -> None:
    """Valid CRC means these are bytes we wrote: not a torn write, even at the very end."""
    write_wal(tmp_path, batches=2)
    seg = segments(tmp_path)[0]
    size = seg.stat().st_size
    with seg.open("ab") as f:
        f.write(frame(b"\xc1"))
    with pytest.raises(WALCorruptError, match="does not decode") as exc:
        WAL.open(tmp_path)
    assert exc.value.offset == size


def test_missing_entries_are_an_error(tmp_path: Path) -> None:
    """A batch that starts after a hole in the log cannot be replayed."""
    write_wal(tmp_path, batches=2)
    seg = segments(tmp_path)[0]
    size = seg.stat().st_size
    body = msgpack.packb([BATCH, None, False, 20, [1], b"\x00", [b"x"], None])
    with seg.open("ab") as f:
        f.write(frame(body))
    with pytest.raises(WALCorruptError, match="missing entries") as exc:
        replay(tmp_path)
    assert exc.value.offset == size


def test_last_segment_with_a_torn_header_is_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A last segment without even a whole header holds nothing: it goes, the previous one continues."""
    segs = _multi_segment(tmp_path)
    truncate(segs[-1], 5)
    with caplog.at_level(logging.WARNING, logger="store.wal"):
        w, r = WAL.open(tmp_path)
    assert "dropping the last segment" in caplog.text
    assert not segs[-1].exists()
    expected = r.entries
    with w:
        w.save(None, ents(len(expected) + 1, len(expected) + 1))
    w, r2 = WAL.open(tmp_path)
    w.close()
    assert r2.entries == [*expected, *ents(len(expected) + 1, len(expected) + 1)]


def test_only_segment_with_a_broken_header_is_an_error(tmp_path: Path) -> None:
    write_wal(tmp_path, batches=0)
    seg = segments(tmp_path)[0]
    flip_bit(seg, 12, 0)
    with pytest.raises(WALCorruptError, match="only segment"):
        WAL.open(tmp_path)


def test_missing_segment_in_the_sequence_is_an_error(tmp_path: Path) -> None:
    segs = _multi_segment(tmp_path)
    segs[1].unlink()
    with pytest.raises(WALCorruptError, match="sequence jumps") as exc:
        WAL.open(tmp_path)
    assert exc.value.path == str(segs[2])


def test_leftover_temporary_segment_is_removed(tmp_path: Path) -> None:
    """A crash while creating a segment leaves a .tmp file: it is not part of the log."""
    write_wal(tmp_path, batches=2)
    tmp = tmp_path / "0000000000000001-0000000000000007.wal.tmp"
    tmp.write_bytes(b"half a header")
    w, r = WAL.open(tmp_path)
    w.close()
    assert not tmp.exists()
    assert r.entries == ents(1, 6)
