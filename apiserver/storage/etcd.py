"""The Storage seam over a real etcd v3 cluster, through our asyncio gRPC client.

For users who outgrow the raftkube store: the same transactions as `raftkube.py` (create:
create_revision == 0; update/delete: mod_revision == expected, reading the current value in
the failure branch), the same error mapping by outcome.  etcd says less than the store about
what became of a failed request: only "could not connect", "no leader" and "too many
requests" are known not to be applied; any other UNAVAILABLE or a deadline on a write is
AmbiguousError.  Needs grpcio (`pip install grpcio`), imported only with this module.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator

from apiserver.storage import etcd_client as ec
from apiserver.storage.batches import by_revision, event
from apiserver.storage.interface import (
    AmbiguousError,
    CompactedError,
    Page,
    StorageError,
    StorageEvent,
    Stored,
    UnavailableError,
)
from apiserver.storage.interface import KeyExistsError as KeyExists
from apiserver.storage.interface import KeyNotFoundError as KeyNotFound
from apiserver.storage.interface import RevisionConflictError as Conflict

ABSENT_KEY = b"\0"
"""A key no object has (keys start with '/'): ranging over it reads just the revision."""

OP_RANGE, OP_DELETE = 1, 3
"""ResponseOp field numbers: response_range=1, response_delete_range=3."""


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
    return StorageError(f"etcd error: {e}")


class EtcdStorage:
    """Storage over an EtcdClient; `close` closes the client."""

    def __init__(self, client: ec.EtcdClient) -> None:
        self.client = client

    async def _txn(self, compares: list[bytes], success: list[bytes], failure: list[bytes]) -> ec.TxnResult:
        try:
            return await self.client.txn(ec.txn_request(compares, success, failure))
        except ec.EtcdError as e:
            raise storage_error(e) from None

    async def _range(
        self, key: bytes, range_end: bytes = b"", limit: int = 0, revision: int = 0, count_only: bool = False
    ) -> ec.RangeResult:
        try:
            return await self.client.range(key, range_end, limit, revision, count_only)
        except ec.EtcdError as e:
            raise storage_error(e) from None

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

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[builtins.list[StorageEvent]]:
        p = _b(prefix)
        responses = self.client.watch(p, ec.prefix_end(p), start_revision, prev_kv=True)
        try:
            async for resp in responses:
                if resp.canceled:
                    if resp.compact_revision:
                        raise CompactedError(resp.compact_revision)
                    raise UnavailableError(f"etcd cancelled the watch: {resp.cancel_reason or 'no reason'}")
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
        except ec.EtcdError as e:
            raise storage_error(e) from None
        finally:
            await responses.aclose()

    async def current_revision(self) -> int:
        return (await self._range(ABSENT_KEY, count_only=True)).header.revision

    async def compact(self, revision: int) -> None:
        try:
            await self.client.compact(revision)
        except ec.EtcdError as e:
            raise storage_error(e) from None

    async def close(self) -> None:
        await self.client.close()
