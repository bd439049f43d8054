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
    certificate: 0644), as "path mode" lines (empty when all are private)."""
    bad = []
    if include_root and mode(root) != 0o700:
        bad.append(f"{root} {mode(root):04o}")
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            p = Path(dirpath) / name
            if mode(p) != 0o700:
                bad.append(f"{p} {mode(p):04o}")
        for name in filenames:
            p = Path(dirpath) / name
            if mode(p) != (0o644 if p.suffix in PUBLIC_SUFFIXES else 0o600):
                bad.append(f"{p} {mode(p):04o}")
    return bad
