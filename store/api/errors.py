"""Typed store errors.  Each has a stable `code` that crosses the wire, so the client
re-raises the same type the server raised; messages follow etcd's wording where etcd has one.

Each error also says what became of the request (`outcome`), and that alone decides what a
caller may do next: the client's retries (`may_retry`) and the CLI's exit status both read
it, so "is this retryable" is answered here and nowhere else.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, ClassVar


class Outcome(Enum):
    REFUSED = "refused"
    """The request itself is wrong (bad argument, compacted, not found...): nothing changed,
    and sending it again cannot help."""
    NOT_APPLIED = "not-applied"
    """Refused before it was proposed (not the leader, no leader, cannot connect): nothing
    changed, and any member may be asked again."""
    UNKNOWN = "unknown"
    """It may or may not have been applied (timeout, leader changed, connection lost after
    sending): only a request that is safe to repeat may be sent again."""
    FAILED = "failed"
    """The member could not serve it (disk full or failing, an internal error)."""


class StoreError(Exception):
    """Base of every error the store reports to a client."""

    code: ClassVar[str] = "internal"
    outcome: ClassVar[Outcome] = Outcome.FAILED

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details

    def to_wire(self) -> list[Any]:
        return [self.code, self.message, self.details]


class RefusedError(StoreError):
    """Base of the errors that refuse the request itself."""

    outcome = Outcome.REFUSED


class KeyEmptyError(RefusedError):
    code = "key-empty"


class RequestTooLargeError(RefusedError):
    code = "request-too-large"


class TooManyOpsError(RefusedError):
    code = "too-many-ops"


class DuplicateKeyError(RefusedError):
    code = "duplicate-key"


class KeyNotFoundError(RefusedError):
    """A put with ignore_value or ignore_lease names a key that does not exist (etcd's ErrKeyNotFound)."""

    code = "key-not-found"


class InvalidRangeError(RefusedError):
    """range_end sorts before key (and is not one of the special values "" or "\\0")."""

    code = "invalid-range"


class InvalidArgumentError(RefusedError):
    code = "invalid-argument"


class CompactedError(RefusedError):
    """The revision asked for was compacted away; `compact_revision` says where history starts."""

    code = "compacted"

    def __init__(self, compact_revision: int, message: str = "") -> None:
        super().__init__(message or "mvcc: required revision has been compacted", compact_revision=compact_revision)
        self.compact_revision = compact_revision


class FutureRevisionError(RefusedError):
    code = "future-revision"

    def __init__(self, current_revision: int, message: str = "") -> None:
        super().__init__(message or "mvcc: required revision is a future revision", current_revision=current_revision)
        self.current_revision = current_revision


class LeaseNotFoundError(RefusedError):
    code = "lease-not-found"

    def __init__(self, lease_id: int, message: str = "") -> None:
        super().__init__(message or f"requested lease not found: {lease_id:x}", lease_id=lease_id)
        self.lease_id = lease_id


class LeaseExistsError(RefusedError):
    code = "lease-exists"


class LeaseTTLTooLargeError(RefusedError):
    code = "lease-ttl-too-large"


class MemberNotFoundError(RefusedError):
    code = "member-not-found"


class MemberExistsError(RefusedError):
    code = "member-exists"


class PeerURLExistsError(RefusedError):
    """Another member already has that peer URL (etcd's ErrPeerURLExist)."""

    code = "peer-url-exists"


class LastVoterError(RefusedError):
    """Removing this member would leave the cluster with no voter."""

    code = "last-voter"


class LearnerNotReadyError(RefusedError):
    code = "learner-not-ready"


class NotLeaderError(StoreError):
    """This member is not the leader; `leader` names the one it knows, if any."""

    code = "not-leader"
    outcome = Outcome.NOT_APPLIED


class NoLeaderError(StoreError):
    """No leader is known (election under way, or this member is cut off)."""

    code = "no-leader"
    outcome = Outcome.NOT_APPLIED


class UnavailableError(StoreError):
    """The member or the client cannot take requests (cannot connect, shutting down)."""

    code = "unavailable"
    outcome = Outcome.NOT_APPLIED


class LeaderChangedError(StoreError):
    """The leader changed while the request waited to be applied: it may or may not be."""

    code = "leader-changed"
    outcome = Outcome.UNKNOWN


class TimeoutError_(StoreError):
    """The request was not answered in time; a write may or may not have been applied."""

    code = "timeout"
    outcome = Outcome.UNKNOWN


class ProtocolError(StoreError):
    """The peer sent bytes that are not a valid frame or request; the connection is closed."""

    code = "protocol"


class TooManyRequestsError(StoreError):
    """The member has as many writes waiting to commit as it takes (etcd's "too many
    requests"): nothing was proposed; any member may be asked again a little later."""

    code = "too-many-requests"
    outcome = Outcome.NOT_APPLIED


class TooManyWatchesError(RefusedError):
    """The connection (or the member) holds as many watches as it allows."""

    code = "too-many-watches"


class WatchNotFoundError(RefusedError):
    """No such watch on this connection (watches belong to the connection that made them)."""

    code = "watch-not-found"


class ConnectionLost(UnavailableError):
    """The connection closed with this request possibly delivered: a write's outcome is unknown."""

    code = "connection-lost"
    outcome = Outcome.UNKNOWN


class DiskError(StoreError):
    code = "disk"


class NoSpaceError(DiskError):
    """The member's disk is full: writes are refused before they are proposed (never
    half-applied) until space returns."""

    code = "no-space"
    outcome = Outcome.NOT_APPLIED


ERRORS: dict[str, type[StoreError]] = {
    cls.code: cls
    for cls in (
        StoreError,
        KeyEmptyError,
        RequestTooLargeError,
        TooManyOpsError,
        DuplicateKeyError,
        KeyNotFoundError,
        InvalidRangeError,
        InvalidArgumentError,
        CompactedError,
        FutureRevisionError,
        LeaseNotFoundError,
        LeaseExistsError,
        LeaseTTLTooLargeError,
        MemberNotFoundError,
        MemberExistsError,
        PeerURLExistsError,
        LastVoterError,
        LearnerNotReadyError,
        NotLeaderError,
        NoLeaderError,
        UnavailableError,
        LeaderChangedError,
        TimeoutError_,
        ProtocolError,
        WatchNotFoundError,
        TooManyRequestsError,
        TooManyWatchesError,
        ConnectionLost,
        DiskError,
        NoSpaceError,
    )
}


def may_retry(err: StoreError, idempotent: bool) -> bool:
    """Whether a request that failed with `err` may be sent again (to any member): always when
    it was never proposed, and when its outcome is unknown only if repeating it is harmless."""
    return err.outcome is Outcome.NOT_APPLIED or (err.outcome is Outcome.UNKNOWN and idempotent)


def error_from_wire(w: Any) -> StoreError:
    """The error a member sent; a malformed error frame is itself a protocol error."""
    if type(w) is not list or len(w) != 3 or type(w[0]) is not str or type(w[1]) is not str:
        return ProtocolError(f"malformed error frame: {str(w)[:200]}")
    code, message, details = w[0], w[1], w[2]
    if type(details) is not dict or not all(type(k) is str for k in details):
        details = {}
    cls = ERRORS.get(code, StoreError)

    def number(name: str) -> int:
        v = details.get(name, 0)
        return v if type(v) is int else 0

    if cls is CompactedError:
        return CompactedError(number("compact_revision"), message)
    if cls is FutureRevisionError:
        return FutureRevisionError(number("current_revision"), message)
    if cls is LeaseNotFoundError:
        return LeaseNotFoundError(number("lease_id"), message)
    return cls(message, **details)
