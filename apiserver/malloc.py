"""Giving memory back to the system when connections close (glibc's malloc, tuned once at start).

Every TLS connection costs the apiserver a 256 KiB read buffer (asyncio's SSLProtocol allocates
one per connection) besides its parser and request state: 400 open watches took it from 93 to
214 MiB.  When they closed, RSS stayed at 217 MiB: glibc serves a request of 128 KiB or more
with its own mmap and unmaps it on free, but after the first such block is freed it raises
that threshold to the block's size (the "dynamic mmap threshold"), so from then on every 256 KiB
buffer comes from the heap, and a heap riddled with live small objects between freed buffers
cannot shrink.  Fixing the threshold (mallopt M_MMAP_THRESHOLD, which also turns the dynamic
adjustment off) keeps big buffers in their own mappings, returned whole when freed: after the
same 400 watches closed RSS was back at 116 MiB (measured with tests/apiserver/edge_support.py).
The cost is an mmap and munmap per big allocation, which is small beside the TLS handshake that
comes with each connection.

On a C library other than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("raftkube.apiserver")

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own initial threshold, kept fixed


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Whether glibc took the fixed threshold (False when this is not glibc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, threshold))
    if not ok:
        log.warning("mallopt(M_MMAP_THRESHOLD, %d) failed: freed connection buffers may stay in RSS", threshold)
    return ok
