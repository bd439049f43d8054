"""A store and a hub wired as the member server wires them: every write is notified."""

from __future__ import annotations

from collections import defaultdict

from store.api.kv import DeleteRangeRequest, Event, PutRequest, TxnRequest
from store.api.watch import WatchCreateRequest, WatchResponse
from store.mvcc import KVStore
from store.watch import WatchHub


class Rig:
    def __init__(self, buffer_events: int = 1000, sync_revisions: int = 1000) -> None:
        self.kv = KVStore()
        self.hub = WatchHub(self.kv, buffer_events=buffer_events, sync_revisions=sync_revisions)
        self.got: dict[int, list[WatchResponse]] = defaultdict(list)

    def _notify(self, events: list[Event]) -> list[Event]:
        self.hub.notify(self.kv.current_revision, events)
        return events

    def put(self, key: bytes, value: bytes = b"v") -> list[Event]:
        return self._notify(self.kv.put(PutRequest(key, value))[1])

    def delete(self, key: bytes, end: bytes = b"") -> list[Event]:
        return self._notify(self.kv.delete_range(DeleteRangeRequest(key, end))[1])

    def txn(self, req: TxnRequest) -> list[Event]:
        return self._notify(self.kv.txn(req)[1])

    def watch(self, key: bytes, end: bytes = b"", **kw: object) -> int:
        return self.hub.create(WatchCreateRequest(key, end, **kw))  # type: ignore[arg-type]

    def drain(self, max_events: int = 1000) -> list[WatchResponse]:
        out = self.hub.drain(max_events)
        for r in out:
            self.got[r.watch_id].append(r)
        return out

    def drain_all(self, max_events: int = 1000) -> None:
        while self.hub.pending():
            self.drain(max_events)

    def settle(self) -> None:
        """Catch everyone up and deliver everything."""
        for _ in range(10_000):
            self.hub.sync_unsynced()
            self.drain_all()
            if not self.hub.unsynced_count() and not self.hub.pending():
                return
        raise AssertionError("the hub did not settle")

    def events(self, wid: int) -> list[tuple[int, bytes, int]]:
        """(revision, key, type) of every event watcher `wid` received, in order."""
        return [(e.kv.mod_revision, e.kv.key, int(e.type)) for r in self.got[wid] for e in r.events]
