"""Typed errors raised by the Raft core and its storage."""

from __future__ import annotations


class RaftError(Exception):
    """Base of every error the core raises."""


class ProposalDroppedError(RaftError):
    """The proposal was not accepted: no leader known, leadership transfer under way,
    this node is a learner, or a membership change is still pending."""


class CompactedError(RaftError):
    """The requested index lies before the first index still held by the log."""


class UnavailableError(RaftError):
    """The requested index is beyond the last entry of storage."""


class SnapshotOutOfDateError(RaftError):
    """A snapshot older than the one already held was offered."""


class SnapshotTemporarilyUnavailableError(RaftError):
    """Storage cannot produce a snapshot right now; the leader retries later."""


class StepLocalMessageError(RaftError):
    """A local-only message type was passed to `RawNode.step` from the network."""


class StepPeerNotFoundError(RaftError):
    """A response came from a node that is not (or no longer) a member."""
