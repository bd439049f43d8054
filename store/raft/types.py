"""Wire and state types of the Raft core (the equivalent of etcd's raftpb).

Everything here is plain data.  Messages are treated as immutable once built: the core
never mutates a message it has handed out, and callers must not mutate one they pass in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

NONE = 0
"""The "no node" id: no vote cast, no leader known."""


class EntryType(IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1


@dataclass(slots=True)
class Entry:
    term: int
    index: int
    type: EntryType = EntryType.NORMAL
    data: bytes = b""


class ConfChangeType(IntEnum):
    ADD_NODE = 0
    """Add a voter, or promote an existing learner to voter."""
    ADD_LEARNER = 1
    """Add a non-voting member that receives the log but does not count for quorum."""
    REMOVE_NODE = 2


@dataclass(frozen=True, slots=True)
class ConfChange:
    """A single-server membership change, carried in an `EntryType.CONF_CHANGE` entry."""

    type: ConfChangeType
    node_id: int
    context: bytes = b""

    def encode(self) -> bytes:
        return bytes([int(self.type)]) + self.node_id.to_bytes(8, "big") + self.context

    @staticmethod
    def decode(data: bytes) -> ConfChange:
        if len(data) < 9:
            raise ValueError(f"conf change payload too short: {len(data)} bytes")
        return ConfChange(ConfChangeType(data[0]), int.from_bytes(data[1:9], "big"), bytes(data[9:]))


@dataclass(frozen=True, slots=True)
class ConfState:
    """The membership at some log index: who votes and who only learns."""

    voters: tuple[int, ...] = ()
    learners: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class HardState:
    """State that must be durable before any message that depends on it is sent."""

    term: int = 0
    vote: int = NONE
    commit: int = 0


EMPTY_HARD_STATE = HardState()


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    index: int = 0
    term: int = 0
    conf_state: ConfState = ConfState()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The application state as of `metadata.index`, opaque to the core."""

    metadata: SnapshotMetadata = SnapshotMetadata()
    data: bytes = b""

    @property
    def is_empty(self) -> bool:
        return self.metadata.index == 0


EMPTY_SNAPSHOT = Snapshot()


class MessageType(IntEnum):
    # Local messages: never sent over the network, built by RawNode methods.
    HUP = 0  # start an election (or pre-election)
    BEAT = 1  # leader: broadcast a heartbeat
    PROP = 2  # propose entries (may be forwarded to the leader: then it is a network message)
    SNAP_STATUS = 3  # transport reports the outcome of sending a snapshot
    UNREACHABLE = 4  # transport reports that a peer could not be reached
    CHECK_QUORUM = 5  # leader: check that a quorum was recently active
    TRANSFER_LEADER = 6  # ask the leader to hand leadership to `frm`
    # Network messages.
    APP = 10
    APP_RESP = 11
    VOTE = 12
    VOTE_RESP = 13
    PRE_VOTE = 14
    PRE_VOTE_RESP = 15
    SNAP = 16
    HEARTBEAT = 17
    HEARTBEAT_RESP = 18
    READ_INDEX = 19
    READ_INDEX_RESP = 20
    TIMEOUT_NOW = 21


LOCAL_MESSAGES = frozenset(
    {
        MessageType.HUP,
        MessageType.BEAT,
        MessageType.SNAP_STATUS,
        MessageType.UNREACHABLE,
        MessageType.CHECK_QUORUM,
    }
)

RESPONSE_MESSAGES = frozenset(
    {
        MessageType.APP_RESP,
        MessageType.VOTE_RESP,
        MessageType.PRE_VOTE_RESP,
        MessageType.HEARTBEAT_RESP,
        MessageType.READ_INDEX_RESP,
    }
)


def vote_response_type(t: MessageType) -> MessageType:
    if t == MessageType.VOTE:
        return MessageType.VOTE_RESP
    if t == MessageType.PRE_VOTE:
        return MessageType.PRE_VOTE_RESP
    raise ValueError(f"not a vote message: {t.name}")


@dataclass(slots=True)
class Message:
    """One protocol message.  Fields unused by a message type keep their defaults.

    `log_term`/`index` name the entry that precedes `entries` (APP) or the candidate's
    last entry (VOTE, PRE_VOTE).  On a rejected APP_RESP, `reject_hint` is the index and
    `log_term` the term of the follower's best guess at a matching entry (fast backtracking).
    """

    type: MessageType
    to: int = NONE
    frm: int = NONE
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: list[Entry] = field(default_factory=list)
    commit: int = 0
    snapshot: Snapshot | None = None
    reject: bool = False
    reject_hint: int = 0
    context: bytes = b""


@dataclass(frozen=True, slots=True)
class ReadState:
    """A linearizable read may be served once the state machine has applied `index`."""

    index: int
    request_ctx: bytes


class StateType(IntEnum):
    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2
    PRE_CANDIDATE = 3


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state worth reporting but not persisting."""

    lead: int = NONE
    raft_state: StateType = StateType.FOLLOWER
