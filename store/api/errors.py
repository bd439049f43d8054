"""Typed store errors.  Each has a stable `code` that crosses the wire, so the client
re-raises the same type the server raised; messages follow etcd's wording where etcd has one."""

from __future__ import annotations

from typing import Any, ClassVar


class StoreError(Exception):
    """Base of every error the store reports to a client."""

    code: ClassVar[str] = "internal"
    retryable: ClassVar[bool] = False
    """Safe to retry on another member without risking a double write."""

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details

    def to_wire(self) -> list[Any]:
        return [self.code, self.message, self.details]


class KeyEmptyError(StoreError):
    code = "key-empty"


class RequestTooLargeError(StoreError):
    code = "request-too-large"


class TooManyOpsError(StoreError):
    code = "too-many-ops"


class DuplicateKeyError(StoreError):
    code = "duplicate-key"


class KeyNotFoundError(StoreError):
    """A put with ignore_value or ignore_lease names a key that does not exist (etcd's ErrKeyNotFound)."""

    code = "key-not-found"


class InvalidRangeError(StoreError):
    """range_end sorts before key (and is not one of the special values "" or "\\0")."""

    code = "invalid-range"


class InvalidArgumentError(StoreError):
    code = "invalid-argument"


class CompactedError(StoreError):
    """The revision asked for was compacted away; `compact_revision` says where history starts."""

    code = "compacted"

    def __init__(self, compact_revision: int, message: str = "") -> None:
        super().__init__(message or "mvcc: required revision has been compacted", compact_revision=compact_revision)
        self.compact_revision = compact_revision


class FutureRevisionError(StoreError):
    code = "future-revision"

    def __init__(self, current_revision: int, message: str = "") -> None:
        super().__init__(message or "mvcc: required revision is a future revision", current_revision=current_revision)
        self.current_revision = current_revision


class LeaseNotFoundError(StoreError):
    code = "lease-not-found"

    def __init__(self, lease_id: int, message: str = "") -> None:
        super().__init__(message or f"requested lease not found: {lease_id:x}", lease_id=lease_id)
        self.lease_id = lease_id


class LeaseExistsError(StoreError):
    code = "lease-exists"


class LeaseTTLTooLargeError(StoreError):
    code = "lease-ttl-too-large"


class MemberNotFoundError(StoreError):
    code = "member-not-found"


class MemberExistsError(StoreError):
    code = "member-exists"


class LastVoterError(StoreError):
    """Removing this member would leave the cluster with no voter."""

    code = "last-voter"


class LearnerNotReadyError(StoreError):
    code = "learner-not-ready"


class NotLeaderError(StoreError):
    """This member is not the leader; `leader` names the one it knows, if any."""

    code = "not-leader"
    retryable = True


class NoLeaderError(StoreError):
    """No leader is known (election under way, or this member is cut off)."""

    code = "no-leader"
    retryable = True


class UnavailableError(StoreError):
    code = "unavailable"
    retryable = True


class LeaderChangedError(StoreError):
    """The leader changed while the request waited to be applied: it may or may not be."""

    code = "leader-changed"


class TimeoutError_(StoreError):
    """The request was not answered in time; a write may or may not have been applied."""

    code = "timeout"


class ProtocolError(StoreError):
    """The peer sent bytes that are not a valid frame or request."""

    code = "protocol"


class DiskError(StoreError):
    code = "disk"


class NoSpaceError(DiskError):
    """The member's disk is full: writes are refused (never half-applied) until space returns."""

    code = "no-space"


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
        LastVoterError,
        LearnerNotReadyError,
        NotLeaderError,
        NoLeaderError,
        UnavailableError,
        LeaderChangedError,
        TimeoutError_,
        ProtocolError,
        DiskError,
        NoSpaceError,
    )
}


def error_from_wire(w: list[Any]) -> StoreError:
    code, message, details = w[0], w[1], w[2] or {}
    cls = ERRORS.get(code, StoreError)
    if cls is CompactedError:
        return CompactedError(int(details.get("compact_revision", 0)), message)
    if cls is FutureRevisionError:
        return FutureRevisionError(int(details.get("current_revision", 0)), message)
    if cls is LeaseNotFoundError:
        return LeaseNotFoundError(int(details.get("lease_id", 0)), message)
    err = cls(message, **details)
    return err
