"""Checking that the store keeps its files private: directories 0700, files 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """Run the body (and the processes it starts) with this umask; the old one comes back."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


PUBLIC_SUFFIXES = (".crt",)
"""Certificates are public: machinery.process.pki writes them 0644 (by design, its keys 0600), and the
0700 directories around them keep other users out anyway."""


def not_private(root: Path, include_root: bool = True) -> list[str]:
    """Every directory under `root` that is not 0700 and every file that is not 0600 (a
    certificate: 0644), as "path mode" lines (empty when all are private).  A path gone between
    the listing and its look (a running member purging an old snapshot or WAL file: seen in a
    clean run) has no mode to be wrong about and is passed over."""
    bad = []
    if include_root and mode(root) != 0o700:
        bad.append(f"{root} {mode(root):04o}")
    for dirpath, dirnames, filenames in os.walk(root):
        wanted = [(name, 0o700) for name in dirnames]
        wanted += [(name, 0o644 if Path(name).suffix in PUBLIC_SUFFIXES else 0o600) for name in filenames]
        for name, expected in wanted:
            p = Path(dirpath) / name
            try:
                got = mode(p)
            except FileNotFoundError:
                continue
            if got != expected:
                bad.append(f"{p} {got:04o}")
    return bad
