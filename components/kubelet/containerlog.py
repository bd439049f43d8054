"""A container's log file in the CRI format kube's kubelet reads, with rotation.

Each line: `<RFC 3339 time with nanoseconds> <stdout|stderr> <F|P> <text>`; a line longer than
`MAX_LINE` is cut into partial (`P`) pieces ended by a full (`F`) one, so one huge line never
has to fit in memory.  When the file passes `max_bytes` it becomes `<name>.1` (the older ones
move up, `files` are kept in all) and a new one starts: a chatty container cannot fill the disk.
`read` gives the entries back for `kubectl logs` (`--since-time`, `--tail`, `--timestamps`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

MAX_LINE = 16 * 1024
DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_FILES = 2


def timestamp(epoch_ns: int) -> str:
    seconds, nanos = divmod(epoch_ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def parse_timestamp(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 UTC time, with or without a fraction
    (`kubectl logs --since-time` sends whole seconds; we write nanoseconds)."""
    if not text.endswith("Z") or len(text) < 20:
        raise ValueError(f"not an RFC 3339 UTC time: {text!r}")
    try:
        base = datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"not an RFC 3339 UTC time: {text!r}") from None
    fraction = text[19:-1]
    if fraction and (fraction[0] != "." or not fraction[1:].isdigit() or len(fraction) > 10):
        raise ValueError(f"not an RFC 3339 UTC time: {text!r}")
    nanos = int((fraction[1:] + "000000000")[:9]) if fraction else 0
    return int(base.timestamp()) * 1_000_000_000 + nanos


class LogWriter:
    """Appends one container's output to its log, rotating it by size."""

    def __init__(self, path: Path, max_bytes: int = DEFAULT_MAX_BYTES, files: int = DEFAULT_FILES) -> None:
        if max_bytes < 1024 or files < 1:
            raise ValueError(f"a log needs max_bytes >= 1024 and files >= 1, got {max_bytes} and {files}")
        self.path, self.max_bytes, self.files = path, max_bytes, files
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        self._size = os.fstat(self._fd).st_size
        self._pending: dict[str, bytes] = {"stdout": b"", "stderr": b""}

    def write(self, stream: str, data: bytes, now_ns: int | None = None) -> None:
        """Output of `stream` as it arrives (any chunking): complete lines are written, the rest
        waits for its newline (or is written as partial pieces once over MAX_LINE)."""
        stamp = timestamp(now_ns if now_ns is not None else time.time_ns())
        buf = self._pending[stream] + data
        while True:
            end = buf.find(b"\n")
            if 0 <= end <= MAX_LINE:
                self._emit(stamp, stream, b"F", buf[:end])
                buf = buf[end + 1 :]
            elif len(buf) > MAX_LINE:
                self._emit(stamp, stream, b"P", buf[:MAX_LINE])
                buf = buf[MAX_LINE:]
            else:
                break
        self._pending[stream] = buf

    def close(self, now_ns: int | None = None) -> None:
        """Write what is left of unterminated lines, then close."""
        stamp = timestamp(now_ns if now_ns is not None else time.time_ns())
        for stream, rest in self._pending.items():
            if rest:
                self._emit(stamp, stream, b"F", rest)
        self._pending = {"stdout": b"", "stderr": b""}
        os.close(self._fd)

    def _emit(self, stamp: str, stream: str, tag: bytes, text: bytes) -> None:
        line = stamp.encode() + b" " + stream.encode() + b" " + tag + b" " + text + b"\n"
        if self._size + len(line) > self.max_bytes and self._size > 0:
            self._rotate()
        os.write(self._fd, line)
        self._size += len(line)

    def _rotate(self) -> None:
        os.close(self._fd)
        for i in range(self.files - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            newer = self.path if i == 1 else self.path.with_name(f"{self.path.name}.{i - 1}")
            if newer.exists():
                os.replace(newer, older)
        if self.files == 1:
            self.path.unlink(missing_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o640)
        self._size = 0


@dataclass(frozen=True, slots=True)
class Entry:
    time: str
    stream: str
    text: bytes  # a whole line: partial pieces joined


def _older_lines(path: Path, files: int) -> Iterator[bytes]:
    """The lines of the rotated files, oldest first (split on newlines only: a `\r` is text)."""
    for i in range(files - 1, 0, -1):
        older = path.with_name(f"{path.name}.{i}")
        if older.exists():
            yield from older.read_bytes().split(b"\n")


def _lines(path: Path, files: int) -> Iterator[bytes]:
    yield from _older_lines(path, files)
    if path.exists():
        yield from path.read_bytes().split(b"\n")


class _Parser:
    """Log lines to entries: partial pieces joined, foreign lines skipped, `since_ns` applied."""

    def __init__(self, since_ns: int | None) -> None:
        self.since_ns = since_ns
        self._partial: dict[str, bytes] = {}

    def feed(self, raw: bytes) -> Entry | None:
        parts = raw.split(b" ", 3)
        if len(parts) < 3:
            return None  # not a line we wrote
        stamp, stream, tag = parts[0].decode(errors="replace"), parts[1].decode(errors="replace"), parts[2]
        text = parts[3] if len(parts) == 4 else b""
        if tag == b"P":
            self._partial[stream] = self._partial.get(stream, b"") + text
            return None
        whole = self._partial.pop(stream, b"") + text
        if self.since_ns is not None:
            try:
                if parse_timestamp(stamp) < self.since_ns:
                    return None
            except ValueError:
                return None
        return Entry(stamp, stream, whole)


def read(path: Path, files: int = DEFAULT_FILES, since_ns: int | None = None, tail: int | None = None) -> list[Entry]:
    """The log's entries, oldest first, from every kept file: those written at or after
    `since_ns`, the last `tail` of them."""
    out: deque[Entry] = deque(maxlen=tail if tail is not None and tail >= 0 else None)
    parser = _Parser(since_ns)
    for raw in _lines(path, files):
        if (entry := parser.feed(raw)) is not None:
            out.append(entry)
    return list(out)


class Follower:
    """`kubectl logs -f`: the entries a log had and then those written to it, across rotations.

    It keeps the file it reads open: a rotation renames that file, so what was written to it
    before the rename is still read from the same descriptor, then the file written after it
    from its start.  Nothing is read twice; nothing is skipped unless the writer rotated more
    files away than are kept between two polls.  An unfinished last line waits for its newline."""

    def __init__(self, path: Path, files: int = DEFAULT_FILES, since_ns: int | None = None) -> None:
        self.path, self.files = path, files
        self._parser = _Parser(since_ns)
        self._fd: int | None = None
        self._rest = b""

    def history(self, tail: int | None = None) -> list[Entry]:
        """What the log holds now (call once, first): the rotated files, then the current one."""
        out: deque[Entry] = deque(maxlen=tail if tail is not None and tail >= 0 else None)
        for raw in _older_lines(self.path, self.files):
            if (entry := self._parser.feed(raw)) is not None:
                out.append(entry)
        out.extend(self.poll())
        return list(out)

    def poll(self, limit: int = 1 << 20) -> list[Entry]:
        """The entries written since the last call (about `limit` bytes of them at most)."""
        out: list[Entry] = []
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return out
        read = 0
        while read < limit:
            data = os.read(self._fd, limit - read)
            if not data:
                successor = self._successor()
                if successor is None:
                    break
                os.close(self._fd)
                self._fd = successor
                continue
            read += len(data)
            lines = (self._rest + data).split(b"\n")
            self._rest = lines.pop()
            for raw in lines:
                if (entry := self._parser.feed(raw)) is not None:
                    out.append(entry)
        return out

    def _successor(self) -> int | None:
        """When the open file has been rotated away (and read to its end): the file written
        after it, opened; None while it is still the current one."""
        assert self._fd is not None
        mine = os.fstat(self._fd).st_ino
        names = [self.path] + [self.path.with_name(f"{self.path.name}.{i}") for i in range(1, self.files)]
        inodes: list[int | None] = []
        for name in names:
            try:
                inodes.append(os.stat(name).st_ino)
            except FileNotFoundError:
                inodes.append(None)
        if inodes[0] == mine or inodes[0] is None:
            return None
        # ours is now names[k]: the next one is names[k - 1]; dropped off the end: the oldest kept
        k = inodes.index(mine) if mine in inodes else len(names)
        for name in reversed(names[:k]):
            try:
                return os.open(name, os.O_RDONLY)
            except FileNotFoundError:
                continue
        return None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
