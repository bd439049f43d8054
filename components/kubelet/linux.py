"""The few Linux calls the process runtime needs and Python 3.11 lacks (unshare, setns, mount, umount2),
through libc, raising OSError with the errno as the os module does."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUTS = 0x04000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def set_no_new_privs() -> None:
    """From now on no exec gains privileges (setuid bits and file capabilities are ignored);
    inherited by every child, and never undone."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def drop_from_bounding_set(capabilities: list[int]) -> None:
    """Take `capabilities` out of this process's bounding set: no exec gives them back (a root
    process's permitted set after exec is its bounding set).  Needs CAP_SETPCAP."""
    for cap in capabilities:
        _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")


def bounding_set(pid: int | str = "self") -> frozenset[int]:
    """The capabilities in process `pid`'s bounding set (its /proc status's CapBnd)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapBnd:"):
            mask = int(line.split()[1], 16)
            return frozenset(cap for cap in range(mask.bit_length()) if mask >> cap & 1)
    raise OSError(f"/proc/{pid}/status has no CapBnd")


def setns(path: str, nstype: int) -> None:
    """Join the namespace that `path` (a /proc/PID/ns/* or bind-mounted namespace file) is."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")
