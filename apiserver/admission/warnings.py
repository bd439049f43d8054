"""Warnings for the client of the request being served (`Warning: 299 - "..."` headers).

Admission plugins deep in a write add them (a ValidatingAdmissionPolicy binding with the
Warn action, as kube's `warning.AddWarning(ctx, ...)`); the HTTP layer drains them into the
response.  A request's handler runs in one task, so a context variable holds its list.
"""

from __future__ import annotations

import contextvars

_pending: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("raftkube_warnings", default=None)


def add_warning(text: str) -> None:
    """Queue one warning for the current request's response (repeats are sent once)."""
    pending = _pending.get()
    if pending is None:
        pending = []
        _pending.set(pending)
    if text not in pending:
        pending.append(text)


def drain() -> list[str]:
    """The warnings queued so far in this request, in order; the queue is left empty."""
    pending = _pending.get()
    if not pending:
        return []
    out = list(pending)
    pending.clear()
    return out
