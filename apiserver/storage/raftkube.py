"""The Storage seam over the raftkube store (the default backend), through its async client.

Writes are single transactions guarded by a compare (create: create_revision == 0;
update/delete: mod_revision == expected), so that a lost race is a typed error carrying what
won, read in the same transaction.  Store errors are mapped by what became of the request:
refused before it was proposed (no leader, not leader, cannot connect) is retried by the
client on every member until its deadline, then UnavailableError; a write whose outcome is
unknown (connection lost, timeout, leader changed) is never sent again: AmbiguousError.
Reads are safe to repeat, so the client retries them whatever happened.

Progress: the store answers a watch's progress request (WATCH_PROGRESS) with an empty response
only when that watcher is synced and has nothing queued, at the revision it has delivered
everything up to (store/watch/hub.py `request_progress`), and otherwise not at all; so every
empty response is a truthful Progress, and `progress.ProgressAsker` asks again when none came.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator

from apiserver.storage.batches import by_revision, event
from apiserver.storage.interface import (
    AmbiguousError,
    CompactedError,
    Page,
    Progress,
    StorageError,
    StorageEvent,
    Stored,
    TooLargeError,
    UnavailableError,
)
from apiserver.storage.interface import KeyExistsError as KeyExists
from apiserver.storage.interface import KeyNotFoundError as KeyNotFound
from apiserver.storage.interface import RevisionConflictError as Conflict
from apiserver.storage.progress import WatchProgress
from store.api import errors as E
from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    EventType,
    KeyValue,
    PutRequest,
    RangeRequest,
    RangeResponse,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.client.client import Client

ABSENT_KEY = b"\0"
"""A key no object has (keys start with '/'): ranging over it reads just the revision."""


def _b(key: str) -> bytes:
    return key.encode("utf-8", errors="surrogateescape")


def _stored(kv: KeyValue) -> Stored:
    return Stored(kv.key.decode("utf-8", errors="surrogateescape"), kv.value, kv.mod_revision)


def storage_error(e: E.StoreError, write: bool) -> StorageError:
    """The typed storage error for a store error (`write`: the request changes the store)."""
    if isinstance(e, E.CompactedError):
        return CompactedError(e.compact_revision)
    if isinstance(e, E.RequestTooLargeError):
        return TooLargeError(e.message)
    if e.outcome is E.Outcome.NOT_APPLIED:
        return UnavailableError(f"store unavailable: {e.message}")
    if e.outcome is E.Outcome.UNKNOWN:
        if write:
            return AmbiguousError(f"the write's outcome is unknown: {e.message}")
        return UnavailableError(f"store unavailable: {e.message}")
    return StorageError(f"store error ({e.code}): {e.message}")


class RaftkubeStorage:
    """Storage over a store client; `close` closes the client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.progress = WatchProgress()

    async def _txn(self, req: TxnRequest) -> TxnResponse:
        try:
            r = await self.client.txn(req)
        except E.StoreError as e:
            raise storage_error(e, write=True) from None
        self.progress.saw(r.revision)
        return r

    async def _range(self, req: RangeRequest) -> RangeResponse:
        try:
            r = await self.client.range(req)
        except E.StoreError as e:
            raise storage_error(e, write=False) from None
        self.progress.saw(r.revision)
        return r

    async def get(self, key: str) -> Stored | None:
        r = await self._range(RangeRequest(_b(key)))
        return _stored(r.kvs[0]) if r.kvs else None

    async def list(self, prefix: str, *, start_key: str = "", limit: int = 0, revision: int = 0) -> Page:
        p, end = _b(prefix), prefix_end(_b(prefix))
        start = max(p, _b(start_key))
        if start >= end and end != b"\0":  # a start past the prefix: nothing (the store would refuse it)
            return Page([], revision or await self.current_revision(), False)
        r = await self._range(RangeRequest(start, end, limit=limit, revision=revision))
        # The header revision is the store's current one even when reading the past.
        return Page([_stored(kv) for kv in r.kvs], revision or r.revision, r.more)

    async def create(self, key: str, value: bytes) -> int:
        k = _b(key)
        r = await self._txn(
            TxnRequest([Compare(CompareResult.EQUAL, CompareTarget.CREATE, k, 0)], [PutRequest(k, value)])
        )
        if not r.succeeded:
            raise KeyExists(key)
        return r.revision

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        k = _b(key)
        r = await self._txn(
            TxnRequest(
                [Compare(CompareResult.EQUAL, CompareTarget.MOD, k, expected_revision)],
                [PutRequest(k, value)],
                [RangeRequest(k)],
            )
        )
        if not r.succeeded:
            raise Conflict(key, self._current(r))
        return r.revision

    async def delete(self, key: str, expected_revision: int = 0) -> Stored:
        k = _b(key)
        guard = (
            Compare(CompareResult.EQUAL, CompareTarget.MOD, k, expected_revision)
            if expected_revision
            else Compare(CompareResult.GREATER, CompareTarget.CREATE, k, 0)
        )
        r = await self._txn(TxnRequest([guard], [DeleteRangeRequest(k, prev_kv=True)], [RangeRequest(k)]))
        if r.succeeded:
            d = r.responses[0] if r.responses else None
            if not isinstance(d, DeleteRangeResponse) or not d.prev_kvs:
                raise StorageError(f"the store deleted {key} but returned no previous value")
            return Stored(key, d.prev_kvs[0].value, r.revision)
        current = self._current(r)
        if current is None:
            raise KeyNotFound(key)
        raise Conflict(key, current)

    @staticmethod
    def _current(r: TxnResponse) -> Stored | None:
        """The value the failure branch's range read, if the key exists."""
        got = r.responses[0] if r.responses else None
        return _stored(got.kvs[0]) if isinstance(got, RangeResponse) and got.kvs else None

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[builtins.list[StorageEvent] | Progress]:
        """The client's Watch already resumes on another member after a lost connection, from
        one past the last revision it delivered; here responses become one batch per revision,
        and the store's progress notices (empty responses) become Progress."""
        w = self.client.watch(_b(prefix), prefix=True, start_revision=start_revision, prev_kv=True)
        asker = self.progress.open(w.progress, start_revision)
        responses = aiter(w)
        try:
            async for resp in responses:
                if resp.canceled:
                    if resp.compact_revision:
                        raise CompactedError(resp.compact_revision)
                    raise UnavailableError(f"the store cancelled the watch: {resp.cancel_reason or 'no reason'}")
                if resp.events:
                    asker.delivered(resp.events[-1].kv.mod_revision)
                    events = (
                        event(
                            e.type is EventType.DELETE,
                            e.kv.key,
                            e.kv.value,
                            e.kv.mod_revision,
                            e.prev_kv.value if e.prev_kv is not None else None,
                        )
                        for e in resp.events
                    )
                    for batch in by_revision(events):
                        yield batch
                elif resp.is_progress_notify and asker.delivered(resp.revision):
                    yield Progress(resp.revision)
        except E.StoreError as e:
            raise storage_error(e, write=False) from None
        finally:
            await self.progress.close(asker)
            await w.cancel()
            close = getattr(responses, "aclose", None)
            if close is not None:
                await close()

    async def progress_supported(self) -> bool:
        return True  # the store answers progress only for watchers that have delivered everything

    async def request_progress(self) -> None:
        """Each open watch is asked (coalesced, see progress.py) until it covers the newest
        revision this storage has returned; one read first if it has returned none yet."""
        if not self.progress.seen and self.progress.watches:
            await self.current_revision()
        self.progress.request()

    async def current_revision(self) -> int:
        return (await self._range(RangeRequest(ABSENT_KEY, count_only=True))).revision

    async def compact(self, revision: int) -> None:
        try:
            await self.client.compact(revision)
        except E.StoreError as e:
            raise storage_error(e, write=False) from None

    async def close(self) -> None:
        await self.client.close()
