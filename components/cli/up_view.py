"""What `raftkube up` shows while it runs in the foreground: a status table printed again
whenever a part's role or health changes (a new store leader, a component down, a node
NotReady), and the lines every part writes to its log, merged and prefixed with the part's
name (as docker compose shows them).  Both are polled from `up`'s watch loop; nothing here
blocks for long or holds more than a bounded piece of any log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

MAX_READ = 64 * 1024  # per log and poll: a chatty part cannot flood the terminal at once
MAX_LINE = 2000


class MergedLog:
    """New lines of several log files, each prefixed with its part's name."""

    def __init__(self, parts: dict[str, Path], out: TextIO) -> None:
        self.out = out
        self._parts = dict(parts)
        self._offsets = {name: _size(path) for name, path in self._parts.items()}  # what was there is not news
        self._partial: dict[str, bytes] = {}
        self._width = max((len(n) for n in self._parts), default=0)

    def poll(self) -> None:
        for name, path in self._parts.items():
            size = _size(path)
            offset = self._offsets.get(name, 0)
            if size < offset:
                offset = self._offsets[name] = 0  # truncated or replaced: from its start
                self._partial.pop(name, None)
            if size == offset:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read(min(size - offset, MAX_READ))
            except OSError:
                continue
            self._offsets[name] = offset + len(chunk)
            lines = (self._partial.pop(name, b"") + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > MAX_LINE:
                lines.append(rest)
            elif rest:
                self._partial[name] = rest
            for line in lines:
                text = line[:MAX_LINE].decode("utf-8", "replace").rstrip()
                if text:
                    self.out.write(f"{name:<{self._width}} | {text}\n")
        self.out.flush()


class LiveStatus:
    """The status table again whenever what it says changes (checked every `every` seconds)."""

    def __init__(
        self,
        rows: Callable[[], list[dict[str, Any]]],
        show: Callable[[list[dict[str, Any]]], None],
        every: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rows, self.show, self.every, self.clock = rows, show, every, clock
        self._last: list[tuple[Any, ...]] | None = None
        self._due = 0.0

    def seen(self, rows: list[dict[str, Any]]) -> None:
        """The table as it was last shown (by `up` itself)."""
        self._last = _key(rows)

    def poll(self) -> None:
        now = self.clock()
        if now < self._due:
            return
        self._due = now + self.every
        rows = self.rows()
        key = _key(rows)
        if key != self._last:
            self._last = key
            self.show(rows)


def _key(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r.get("part"), r.get("role"), r.get("healthy"), r.get("pid")) for r in rows]


def _size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
