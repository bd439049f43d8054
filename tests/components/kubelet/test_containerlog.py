"""The CRI log format on a real disk: lines from any chunking, partial pieces of huge lines,
rotation by size, and reading back with --since-time and --tail."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.containerlog import MAX_LINE, LogWriter, parse_timestamp, read, timestamp

T0 = 1_700_000_000 * 1_000_000_000


def test_lines_in_the_cri_format(tmp_path: Path) -> None:
    log = tmp_path / "c" / "0.log"
    w = LogWriter(log)
    w.write("stdout", b"hello\nwor", T0)
    w.write("stderr", b"oops\n", T0 + 1)
    w.write("stdout", b"ld\nno newline", T0 + 2)
    w.close(T0 + 3)
    assert log.read_bytes().splitlines() == [
        b"2023-11-14T22:13:20.000000000Z stdout F hello",
        b"2023-11-14T22:13:20.000000001Z stderr F oops",
        b"2023-11-14T22:13:20.000000002Z stdout F world",
        b"2023-11-14T22:13:20.000000003Z stdout F no newline",
    ]
    assert [(e.stream, e.text) for e in read(log)] == [
        ("stdout", b"hello"),
        ("stderr", b"oops"),
        ("stdout", b"world"),
        ("stdout", b"no newline"),
    ]


def test_a_huge_line_is_written_in_partial_pieces_and_read_back_whole(tmp_path: Path) -> None:
    w = LogWriter(tmp_path / "0.log")
    big = b"x" * (2 * MAX_LINE + 5)
    w.write("stdout", big + b"\nafter\n", T0)
    w.close()
    tags = [line.split(b" ")[2] for line in (tmp_path / "0.log").read_bytes().splitlines()]
    assert tags == [b"P", b"P", b"F", b"F"]
    assert [e.text for e in read(tmp_path / "0.log")] == [big, b"after"]


def test_rotation_keeps_the_newest_and_bounds_the_disk(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    w = LogWriter(log, max_bytes=2048, files=2)
    for i in range(200):
        w.write("stdout", f"line {i:04d}\n".encode(), T0 + i)
    w.close()
    assert log.stat().st_size <= 2048 and (tmp_path / "0.log.1").stat().st_size <= 2048
    assert not (tmp_path / "0.log.2").exists()
    texts = [e.text for e in read(log, files=2)]
    assert texts[-1] == b"line 0199" and texts == sorted(texts)  # the newest kept, in order
    assert len(texts) < 200


def test_since_and_tail(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    w = LogWriter(log)
    for i in range(10):
        w.write("stdout", f"{i}\n".encode(), T0 + i * 1_000_000_000)
    w.close()
    since = parse_timestamp("2023-11-14T22:13:25Z")  # whole seconds, as kubectl sends
    assert [e.text for e in read(log, since_ns=since)] == [b"5", b"6", b"7", b"8", b"9"]
    assert [e.text for e in read(log, tail=2)] == [b"8", b"9"]
    assert read(log, tail=0) == []


def test_timestamps_round_trip_and_bad_ones_are_refused() -> None:
    assert parse_timestamp(timestamp(T0 + 123)) == T0 + 123
    assert parse_timestamp("2023-11-14T22:13:20.5Z") == T0 + 500_000_000
    for bad in ("2023-11-14 22:13:20Z", "2023-11-14T22:13:20", "2023-11-14T22:13:20.x1Z"):
        with pytest.raises(ValueError, match="not an RFC 3339 UTC time"):
            parse_timestamp(bad)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=300).filter(lambda b: b"\n" not in b), max_size=20), st.integers(1, 50))
def test_any_chunking_gives_back_the_same_lines(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], cut: int
) -> None:
    log = tmp_path_factory.mktemp("chunks") / "0.log"
    data = b"".join(line + b"\n" for line in lines)
    w = LogWriter(log)
    for i in range(0, len(data), cut):
        w.write("stdout", data[i : i + cut], T0)
    w.close()
    assert [e.text for e in read(log)] == lines


def test_a_follower_reads_history_then_new_lines_across_rotations(tmp_path: Path) -> None:
    """`kubectl logs -f`: nothing read twice or lost while the log rotates under the reader."""
    from components.kubelet.containerlog import Follower

    log = tmp_path / "0.log"
    w = LogWriter(log, max_bytes=1024, files=3)
    w.write("stdout", b"one\ntwo\n", T0)
    follower = Follower(log, files=3)
    assert [e.text for e in follower.history()] == [b"one", b"two"]
    assert follower.poll() == []
    w.write("stdout", b"thr", T0 + 1)
    assert follower.poll() == []  # no newline yet
    w.write("stdout", b"ee\n", T0 + 2)
    assert [e.text for e in follower.poll()] == [b"three"]
    lines = [f"line {i:04d} ".encode() + b"x" * 40 for i in range(60)]  # several rotations
    polled: list[bytes] = []
    for i, line in enumerate(lines):
        w.write("stderr", line + b"\n", T0 + 10 + i)
        if i % 7 == 0:
            polled += [e.text for e in follower.poll()]
    polled += [e.text for e in follower.poll()]
    assert polled == lines
    follower2 = Follower(log, files=3)
    got = [e.text for e in follower2.history()]
    assert got == lines[-len(got) :]  # what rotation kept, in order
    follower.close()
    follower2.close()


def test_a_follower_misses_nothing_written_between_polls(tmp_path: Path) -> None:
    from components.kubelet.containerlog import Follower

    log = tmp_path / "0.log"
    w = LogWriter(log, max_bytes=2048, files=2)
    follower = Follower(log, files=2)
    assert follower.history() == []
    seen: list[bytes] = []
    for i in range(200):
        w.write("stdout", f"{i}\n".encode(), T0 + i)
        seen += [e.text for e in follower.poll()]
    assert seen == [str(i).encode() for i in range(200)]
    follower.close()


def test_a_follower_honours_since_and_tail(tmp_path: Path) -> None:
    from components.kubelet.containerlog import Follower

    log = tmp_path / "0.log"
    w = LogWriter(log)
    for i in range(10):
        w.write("stdout", f"{i}\n".encode(), T0 + i)
    assert [e.text for e in Follower(log, since_ns=T0 + 7).history()] == [b"7", b"8", b"9"]
    assert [e.text for e in Follower(log).history(tail=2)] == [b"8", b"9"]
    assert Follower(log).history(tail=0) == []
