"""Continue tokens: opaque to clients, base64 of JSON {"v", "rv", "start"}.

`rv` is the revision of the first page, so every page shows the same snapshot; `start` is the
next key, relative to the resource's key prefix (clients never see storage keys).  `rv` -1
(LATEST) is the token a 410 hands out when the first page's revision was compacted away: the
rest of the list at the newest revision, inconsistent with the pages before (kube's etcd3
store does the same).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import orjson

from apiserver.errors import StatusError, bad_request

_VERSION = "meta.k8s.io/v1"
LATEST = -1
TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue token in this response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


@dataclass(frozen=True, slots=True)
class Continue:
    revision: int
    start: str  # relative to the resource's key prefix


def expired(token: Continue) -> Continue:
    """Where a list goes on from when `token`'s revision was compacted: the same key, now."""
    return Continue(LATEST, token.start)


def encode(token: Continue) -> str:
    raw = orjson.dumps({"v": _VERSION, "rv": token.revision, "start": token.start})
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _bad(why: str) -> StatusError:
    return bad_request(f"invalid continue token: {why}")


def decode(text: str) -> Continue:
    """The token's content, or 400 BadRequest saying what is wrong with it."""
    if len(text) > 16_384:
        raise _bad("too long")
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise _bad("not base64") from exc
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _bad("not JSON") from exc
    if not isinstance(data, dict):
        raise _bad("not a JSON object")
    if data.get("v") != _VERSION:
        raise _bad(f"unsupported version {data.get('v')!r}")
    rv, start = data.get("rv"), data.get("start")
    if not isinstance(rv, int) or isinstance(rv, bool) or (rv <= 0 and rv != LATEST):
        raise _bad("rv must be a positive integer (or -1: the latest)")
    if not isinstance(start, str) or not start:
        raise _bad("start must be a non-empty string")
    return Continue(rv, start)
