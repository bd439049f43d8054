"""Segment files: `<seq>-<first index>.wal`, both 16 hex digits.

The index in the name is the log's last index + 1 when the segment was started: every
entry still live in earlier segments is below it, so a reader that needs the entries after
index S can start at the last segment named <= S + 1 and skip everything before.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from store.wal.errors import WALCorruptError

SUFFIX = ".wal"
TMP_SUFFIX = ".wal.tmp"
_NAME = re.compile(r"^([0-9a-f]{16})-([0-9a-f]{16})\.wal$")


@dataclass(frozen=True, slots=True)
class Segment:
    seq: int
    first_index: int
    path: Path


def segment_name(seq: int, first_index: int) -> str:
    return f"{seq:016x}-{first_index:016x}{SUFFIX}"


def list_segments(wal_dir: Path) -> list[Segment]:
    """The segments in `wal_dir`, by sequence number; other files are ignored."""
    found = []
    for name in os.listdir(wal_dir):
        m = _NAME.match(name)
        if m:
            found.append(Segment(int(m[1], 16), int(m[2], 16), wal_dir / name))
    found.sort(key=lambda s: s.seq)
    for a, b in itertools.pairwise(found):
        if a.seq == b.seq:
            raise WALCorruptError(str(b.path), 0, f"two segments with sequence number {a.seq}: {a.path.name}")
    return found


def list_temporaries(wal_dir: Path) -> list[Path]:
    """Half-created segments left by a crash (a segment is written as .tmp, then renamed)."""
    return sorted(wal_dir / n for n in os.listdir(wal_dir) if n.endswith(TMP_SUFFIX))
