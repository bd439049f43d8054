"""The one storage seam under the registry and the watch cache.

Keys are strings such as `/registry/pods/default/p`; values are the object's JSON bytes.
A `revision` is the backend's global revision (the store's or etcd's), which the API shows
as `metadata.resourceVersion`.  Two backends implement it: the raftkube store
(`raftkube.py`, the default) and a real etcd v3 cluster (`etcd.py`).

Errors are the typed ones below, so the registry maps them to Status codes without
knowing the backend: KeyExists -> 409 AlreadyExists, RevisionConflict -> 409 Conflict,
KeyNotFound -> 404, Compacted -> 410, Unavailable -> 503, Ambiguous -> 504.
"""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol


@dataclass(frozen=True, slots=True)
class Stored:
    key: str
    value: bytes
    revision: int  # the key's mod revision = the object's resourceVersion


@dataclass(frozen=True, slots=True)
class StorageEvent:
    """One change of one key.  `value` is the new value for a put, the last value for a delete."""

    type: Literal["put", "delete"]
    key: str
    value: bytes
    revision: int  # the revision of this change
    prev_value: bytes | None = None  # the value before a put that updated (None for a create)


@dataclass(frozen=True, slots=True)
class Progress:
    """A watch's notice that every change under its prefix up to `revision` has been delivered
    (yielded before this notice).  It lets a reader of an idle prefix, whose events never come,
    learn that the store moved on: the watch cache follows it so that consistent reads do not
    wait for an unrelated write."""

    revision: int


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Stored]
    revision: int  # the revision the list was read at
    more: bool  # more keys follow the last item (paging)


class StorageError(Exception):
    """Base of every storage failure."""


class KeyExistsError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key} already exists")
        self.key = key


class KeyNotFoundError(StorageError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key} not found")
        self.key = key


class RevisionConflictError(StorageError):
    """The key's mod revision was not the expected one; `current` is what is there now (None if gone)."""

    def __init__(self, key: str, current: Stored | None) -> None:
        super().__init__(f"key {key} was modified")
        self.key = key
        self.current = current


class CompactedError(StorageError):
    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"required revision has been compacted (compacted at {compact_revision})")
        self.compact_revision = compact_revision


class TooLargeError(StorageError):
    """The store refused a write for its size (its request limit: raftkube's and etcd's 1.5 MiB),
    which an object within the apiserver's 3 MiB request limit can still pass."""


class UnavailableError(StorageError):
    """No quorum or no reachable member, and the request was not applied."""


class AmbiguousError(StorageError):
    """A write whose outcome is unknown (connection lost or timeout after it was sent)."""


class Storage(Protocol):
    async def get(self, key: str) -> Stored | None: ...

    async def list(self, prefix: str, *, start_key: str = "", limit: int = 0, revision: int = 0) -> Page:
        """Keys under `prefix` from `start_key` (inclusive) in key order, at `revision` (0 = now)."""
        ...

    async def create(self, key: str, value: bytes) -> int:
        """Put only if the key does not exist (create_revision == 0); returns the new revision."""
        ...

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        """Put only if the key's mod revision is `expected_revision`; returns the new revision."""
        ...

    async def delete(self, key: str, expected_revision: int = 0) -> Stored:
        """Delete (only if at `expected_revision` when it is not 0); returns the deleted value and the
        revision of the delete."""
        ...

    def watch(self, prefix: str, start_revision: int) -> AsyncIterator[builtins.list[StorageEvent] | Progress]:
        """Every change under `prefix` from `start_revision` on, one batch per revision, in order,
        without gaps.  Raises CompactedError when `start_revision` is compacted, and ends (or raises
        UnavailableError) only if the backend gives up; the caller then re-lists.

        Between batches it may yield `Progress(r)`: every change up to `r` has been yielded.  A
        Progress never precedes a batch of a revision <= its own, and each is newer than the
        last batch or Progress before it."""
        ...

    async def request_progress(self) -> None:
        """Ask every open watch of this storage to report progress soon: each then yields, within a
        bounded time, a Progress (or a batch) at or past the newest revision this storage returned
        before the call (from current_revision, a list, a write).  Cheap and coalesced, so any
        number of callers may ask at once; a backend that cannot tell progress truthfully does
        nothing (its callers then wait for events)."""
        ...

    async def progress_supported(self) -> bool:
        """Whether `request_progress` works here; when it does not, consistent reads are served
        from storage rather than from a watch cache that cannot prove it is fresh."""
        ...

    async def current_revision(self) -> int:
        """The backend's current revision, read linearizably (for consistent LISTs)."""
        ...

    async def compact(self, revision: int) -> None: ...

    async def close(self) -> None: ...
