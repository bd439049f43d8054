"""Python 3.11's socket transports outlive their connections in a reference cycle.

asyncio's `_SelectorSocketTransport` keeps a bound method of itself in `_read_ready_cb` and
does not let go of it when the connection is lost (CPython gh-100348, mended in 3.12), so
every closed connection's transport, socket and a few dicts (7 objects, about 1 KB) wait for
the cyclic collector.  The apiserver freezes its heap between full collections
(apiserver.heap): a connection open across a freeze would stay until the next thaw, ten
minutes later, and a flood of connections could pile them up.  `install` makes the transport
drop that reference once its connection is lost, which ends the cycle, so it dies by
reference counting; on Python 3.12 and later there is nothing to mend and it does nothing.
"""

from __future__ import annotations

import sys
from asyncio import selector_events
from typing import Any

MENDED = "_raftkube_drops_read_callback"
"""Marks the installed `_call_connection_lost`, so that installing twice wraps it once."""


def install() -> bool:
    """Mend the transport class in this process; whether it needed mending."""
    if sys.version_info >= (3, 12):
        return False
    transport: Any = selector_events._SelectorSocketTransport  # type: ignore[attr-defined]  # private: typeshed omits it
    lost = transport._call_connection_lost
    if getattr(lost, MENDED, False):
        return True

    def _call_connection_lost(self: Any, exc: BaseException | None) -> None:
        try:
            lost(self, exc)
        finally:
            # the selector no longer calls it (the reader went before the loss was scheduled)
            self._read_ready_cb = None

    setattr(_call_connection_lost, MENDED, True)
    transport._call_connection_lost = _call_connection_lost
    return True
