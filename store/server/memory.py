"""Giving memory back to the system after slow clients are gone.

What a connection that did not read cost the member (its unsent frames, the TLS buffers
holding them encrypted) is freed when the connection goes, but freed into the C allocator,
not to the system: glibc's malloc keeps freed heap memory for reuse, and pieces still in use
above it keep the heap from shrinking.  101 never-reading watch connections left a member at
690 MiB after they closed (41 MiB before).  `malloc_trim` hands every free page back (it
walks the heap and releases whole free pages wherever they are, not only at the top), so the
member calls it, shortly after such connections go, at most once per RELEASE_DELAY.

Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger("raftkube.memory")

RELEASE_DELAY = 1.0
"""Seconds after the first request before memory is trimmed: connections aborted meanwhile
(their transports free their buffers on the next loop turns) are covered by one trim."""


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to do
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    f: Callable[[int], int] = trim
    return f


class _Releaser:
    def __init__(self) -> None:
        self.trim = _malloc_trim()
        self.scheduled = False
        self.trims = 0

    def soon(self) -> None:
        if self.trim is None or self.scheduled:
            return
        self.scheduled = True
        asyncio.get_running_loop().call_later(RELEASE_DELAY, self.now)

    def now(self) -> None:
        self.scheduled = False
        if self.trim is not None:
            self.trim(0)
            self.trims += 1


_releaser = _Releaser()


def release_soon() -> None:
    """Trim the heap RELEASE_DELAY from now (once, however often this is called meanwhile)."""
    _releaser.soon()


def release_now() -> None:
    """Trim the heap at once."""
    _releaser.now()
