"""The watch-side canaries (see store/canaries.py): deliberate watch bugs, applied to the
responses of one dispatch round just before they are encoded.

Events are shared between watchers (and with the hub), so nothing here mutates an Event:
a changed response gets new lists and new Event objects.
"""

from __future__ import annotations

import dataclasses

from store.api.kv import Event, EventType
from store.api.watch import WatchResponse


def strip_delete_prev_kv(resp: WatchResponse) -> WatchResponse:
    """skip-prev-kv: the response with every DELETE event's prev_kv left out."""
    if not any(e.type == EventType.DELETE and e.prev_kv is not None for e in resp.events):
        return resp
    events = [Event(e.type, e.kv, None) if e.type == EventType.DELETE else e for e in resp.events]
    return dataclasses.replace(resp, events=events)


def drop_after_compaction(responses: list[WatchResponse], armed: dict[int, None]) -> None:
    """drop-watch-event-at-compaction: the first event of each armed watcher is silently
    removed (its response keeps its revision, so the client cannot tell); it is then disarmed."""
    if not armed:
        return
    for i, resp in enumerate(responses):
        if resp.events and resp.watch_id in armed:
            del armed[resp.watch_id]
            responses[i] = dataclasses.replace(resp, events=resp.events[1:])
