"""Warnings a request collects on its way (admission plugins, mostly) and the response carries
as `Warning: 299 - "..."` headers, as kube's request-scoped warning recorder does.

The list lives in a context variable, so each request (its own asyncio task, or the caller's
task under an in-process transport) sees only what it added; `drain` empties it, and the HTTP
layer drains once per response, so nothing carries over to the next request.
"""

from __future__ import annotations

import contextvars

_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("raftkube_warnings", default=None)

MAX_WARNINGS = 50  # bounded: a hostile object cannot grow the response headers without limit


def add_warning(text: str) -> None:
    """Record a warning for the response of the request being served (duplicates once)."""
    found = _warnings.get()
    if found is None:
        found = []
        _warnings.set(found)
    if text not in found and len(found) < MAX_WARNINGS:
        found.append(text)


def drain() -> list[str]:
    """The warnings recorded so far, forgotten as they are returned."""
    found = _warnings.get()
    if not found:
        return []
    out = list(found)
    found.clear()
    return out
