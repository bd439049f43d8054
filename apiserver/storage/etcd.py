"""The Storage seam over a real etcd v3 cluster, through our asyncio gRPC client.

For users who outgrow the raftkube store: the same transactions as `raftkube.py` (create:
create_revision == 0; update/delete: mod_revision == expected, reading the current value in
the failure branch), the same error mapping by outcome.  etcd says less than the store about
what became of a failed request: only "could not connect", "no leader" and "too many
requests" are known not to be applied; any other UNAVAILABLE or a deadline on a write is
AmbiguousError.  Needs grpcio (`pip install grpcio`), imported only with this module.

Progress (WatchRequest.progress_request): etcd answers on the watch's stream with a response
without events at its revision.  Before 3.4.25 / 3.5.8 (etcd#15220) that answer may overtake
events it covers, or come while the watcher is still catching up, and a cache that trusted it
would skip those events silently; Kubernetes trusts it only from 3.4.31 / 3.5.13 on, and so do
we: by default every member's version is read (Maintenance/Status) on the first request, and on
an older etcd `request_progress` does nothing and no Progress is yielded.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import re
from collections.abc import AsyncIterator

from apiserver.storage import etcd_client as ec
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

log = logging.getLogger(__name__)

ABSENT_KEY = b"\0"
"""A key no object has (keys start with '/'): ranging over it reads just the revision."""

OP_RANGE, OP_DELETE = 1, 3
"""ResponseOp field numbers: response_range=1, response_delete_range=3."""


TRUSTED_PROGRESS = {(3, 4): (3, 4, 31), (3, 5): (3, 5, 13)}
"""The first release of each minor whose progress notifications come after the events they
cover (Kubernetes' minimum for consistent reads from its cache); any later minor is trusted."""
VERSION_RECHECK = 30.0
"""Seconds before the versions are read again when a member could not say its own."""


def progress_trusted(version: str) -> bool:
    """Whether an etcd of this version tells progress truthfully (see the module docstring)."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None:
        return False
    v = (int(m[1]), int(m[2]), int(m[3]))
    first = TRUSTED_PROGRESS.get(v[:2])
    if first is not None:
        return v >= first
    return v > max(TRUSTED_PROGRESS.values())


def _b(key: str) -> bytes:
    return key.encode("utf-8", errors="surrogateescape")


def _stored(kv: ec.KeyValue) -> Stored:
    return Stored(kv.key.decode("utf-8", errors="surrogateescape"), kv.value, kv.mod_revision)


def storage_error(e: ec.EtcdError) -> StorageError:
    """The typed storage error for an etcd client error."""
    if isinstance(e, ec.EtcdCompacted):
        return CompactedError(e.compact_revision)
    if isinstance(e, ec.EtcdUnavailable):
        return UnavailableError(f"etcd unavailable: {e}")
    if isinstance(e, ec.EtcdAmbiguous):
        return AmbiguousError(f"the write's outcome is unknown: {e}")
    if "request is too large" in e.details:  # etcd's ErrRequestTooLarge (--max-request-bytes)
        return TooLargeError(f"etcd: {e.details}")
    return StorageError(f"etcd error: {e}")


class EtcdStorage:
    """Storage over an EtcdClient; `close` closes the client.

    `progress`: whether to ask for and trust progress notifications; None (the default) decides
    by the members' versions.  True on an etcd older than 3.4.31 / 3.5.13 risks silently missed
    events in the watch cache: for tests of the wire protocol only."""

    def __init__(self, client: ec.EtcdClient, *, progress: bool | None = None) -> None:
        self.client = client
        self.progress = WatchProgress()
        self._trusted = progress
        self._version_check: asyncio.Task[bool] | None = None
        self._checked_at = 0.0
        self._versions_failed = False

    async def progress_supported(self) -> bool:
        """Whether this etcd's progress notifications are trusted.  Every member's version is
        read once, callers waiting for that first reading; when a member could not be asked,
        they are read again, in the background, VERSION_RECHECK seconds later (until then: no)."""
        if self._trusted is not None:
            return self._trusted
        task = self._version_check
        if task is None or (task.done() and asyncio.get_running_loop().time() - self._checked_at >= VERSION_RECHECK):
            task = self._check_versions()
        if task.done() or self._versions_failed:
            return bool(self._trusted)
        return await asyncio.shield(task)

    def _check_versions(self) -> asyncio.Task[bool]:
        loop = asyncio.get_running_loop()
        self._checked_at = loop.time()
        task = self._version_check = loop.create_task(self._read_versions())
        return task

    async def _read_versions(self) -> bool:
        versions = []
        for ep in list(self.client.endpoints):
            try:
                versions.append((await self.client.status(ep)).version)
            except ec.EtcdError as e:
                log.info("etcd %s does not say its version (%s): no progress requests for now", ep, e)
                self._versions_failed = True
                return False
        self._trusted = all(progress_trusted(v) for v in versions)
        if not self._trusted:
            log.warning(
                "etcd %s: progress notifications are not trusted before 3.4.31 / 3.5.13 (etcd#15220); "
                "consistent reads of idle resources wait for the watch cache's timeout",
                ", ".join(versions),
            )
        return self._trusted

    async def _txn(self, compares: list[bytes], success: list[bytes], failure: list[bytes]) -> ec.TxnResult:
        try:
            r = await self.client.txn(ec.txn_request(compares, success, failure))
        except ec.EtcdError as e:
            raise storage_error(e) from None
        self.progress.saw(r.header.revision)
        return r

    async def _range(
        self, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0, count_only: bool = False
    ) -> ec.RangeResult:
        try:
            r = await self.client.range(key, range_end, limit, revision, count_only)
        except ec.EtcdError as e:
            raise storage_error(e) from None
        self.progress.saw(r.header.revision)
        return r

    async def get(self, key: str) -> Stored | None:
        r = await self._range(_b(key))
        return _stored(r.kvs[0]) if r.kvs else None

    async def list(self, prefix: str, *, start_key: str = "", limit: int = 0, revision: int = 0) -> Page:
        p, end = _b(prefix), ec.prefix_end(_b(prefix))
        start = max(p, _b(start_key))
        if start >= end and end != b"\0":  # a start past the prefix: nothing
            return Page([], revision or await self.current_revision(), False)
        r = await self._range(start, end, limit=limit, revision=revision)
        # The header revision is etcd's current one even when reading the past.
        return Page([_stored(kv) for kv in r.kvs], revision or r.header.revision, r.more)

    async def create(self, key: str, value: bytes) -> int:
        k = _b(key)
        r = await self._txn(
            [ec.compare(k, ec.TARGET_CREATE, ec.COMPARE_EQUAL, 0)], [ec.op_put(ec.put_request(k, value))], []
        )
        if not r.succeeded:
            raise KeyExists(key)
        return r.header.revision

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        k = _b(key)
        r = await self._txn(
            [ec.compare(k, ec.TARGET_MOD, ec.COMPARE_EQUAL, expected_revision)],
            [ec.op_put(ec.put_request(k, value))],
            [ec.op_range(ec.range_request(k))],
        )
        if not r.succeeded:
            raise Conflict(key, self._current(r))
        return r.header.revision

    async def delete(self, key: str, expected_revision: int = 0) -> Stored:
        k = _b(key)
        guard = (
            ec.compare(k, ec.TARGET_MOD, ec.COMPARE_EQUAL, expected_revision)
            if expected_revision
            else ec.compare(k, ec.TARGET_CREATE, ec.COMPARE_GREATER, 0)
        )
        r = await self._txn(
            [guard], [ec.op_delete(ec.delete_request(k, prev_kv=True))], [ec.op_range(ec.range_request(k))]
        )
        if r.succeeded:
            deleted = [ec.DeleteResult.decode(b) for n, b in r.responses if n == OP_DELETE]
            if not deleted or not deleted[0].prev_kvs:
                raise StorageError(f"etcd deleted {key} but returned no previous value")
            return Stored(key, deleted[0].prev_kvs[0].value, r.header.revision)
        current = self._current(r)
        if current is None:
            raise KeyNotFound(key)
        raise Conflict(key, current)

    @staticmethod
    def _current(r: ec.TxnResult) -> Stored | None:
        """The value the failure branch's range read, if the key exists."""
        for n, b in r.responses:
            if n == OP_RANGE:
                kvs = ec.RangeResult.decode(b).kvs
                return _stored(kvs[0]) if kvs else None
        return None

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[builtins.list[StorageEvent] | Progress]:
        if self._trusted is None and self._version_check is None:
            self._check_versions()  # decided before the first consistent read needs it
        p = _b(prefix)
        responses = self.client.watch(p, ec.prefix_end(p), start_revision, prev_kv=True)

        async def ask() -> None:
            responses.request_progress()

        asker = self.progress.open(ask, start_revision)
        try:
            async for resp in responses:
                if resp.canceled:
                    if resp.compact_revision:
                        raise CompactedError(resp.compact_revision)
                    raise UnavailableError(f"etcd cancelled the watch: {resp.cancel_reason or 'no reason'}")
                if resp.events:
                    asker.delivered(resp.events[-1].kv.mod_revision)
                    events = (
                        event(
                            e.type == 1,
                            e.kv.key,
                            e.kv.value,
                            e.kv.mod_revision,
                            e.prev_kv.value if e.prev_kv is not None else None,
                        )
                        for e in resp.events
                    )
                    for batch in by_revision(events):
                        yield batch
                elif resp.is_progress and self._trusted and asker.delivered(resp.header.revision):
                    yield Progress(resp.header.revision)
        except ec.EtcdError as e:
            raise storage_error(e) from None
        finally:
            await self.progress.close(asker)
            await responses.aclose()

    async def request_progress(self) -> None:
        """Each open watch is asked (coalesced, see progress.py) until it covers the newest
        revision this storage has returned; nothing on an etcd whose answers are not trusted."""
        if not self.progress.watches or not await self.progress_supported():
            return
        if not self.progress.seen:
            await self.current_revision()
        self.progress.request()

    async def current_revision(self) -> int:
        return (await self._range(ABSENT_KEY, count_only=True)).header.revision

    async def compact(self, revision: int) -> None:
        try:
            await self.client.compact(revision)
        except ec.EtcdError as e:
            raise storage_error(e) from None

    async def close(self) -> None:
        task, self._version_check = self._version_check, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()
