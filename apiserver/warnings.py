"""Warnings raised deep in a request (an admission webhook's `warnings`), for the response's
`Warning: 299 - "..."` headers.

The HTTP layer opens a collector per request (`collect(list)`); code anywhere under it calls
`add_warning(text)`.  The list is shared by reference, so warnings added in tasks that copy
the context (validating webhooks run concurrently) land in the same list.  As kube's
recorder: empty and duplicate texts are dropped, and past 4096 characters in all every
warning is cut to 256 characters.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

MAX_WARNINGS = 50  # bounded: a hostile object cannot grow the response headers without limit
TOTAL_CHARS = 4 * 1024
ITEM_CHARS = 256

_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("raftkube_request_warnings", default=None)


@contextlib.contextmanager
def collect(found: list[str]) -> Iterator[list[str]]:
    """Collect the warnings of what runs inside into `found` (read it once the work is done)."""
    token = _warnings.set(found)
    try:
        yield found
    finally:
        _warnings.reset(token)


def add_warning(text: str) -> None:
    """Record a warning for the current request (dropped when no request collects them)."""
    found = _warnings.get()
    if found is not None and text and text not in found and len(found) < MAX_WARNINGS:
        found.append(text)


def header_values(texts: list[str]) -> list[str]:
    """The `Warning` header values for `texts`: `299 - "<text>"`, quoted as Go's strconv.Quote
    quotes but ASCII only (`\\uXXXX` beyond; control characters cannot split headers), truncated
    as kube truncates."""
    if sum(len(t) for t in texts) > TOTAL_CHARS:
        texts = [t[:ITEM_CHARS] for t in texts]
    return [f"299 - {_quote(t)}" for t in texts]


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) > 0x7E:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
