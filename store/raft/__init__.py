"""A pure Raft core: a deterministic state machine with no I/O, no clock, no threads.

Inputs are ticks and messages; outputs are `Ready` batches the application must carry out
(persist, then send, then apply, then `advance`).  See `rawnode` for the contract and
`raft` for the protocol.  Because nothing here touches the outside world, `tests/store/sim`
can run many nodes over a simulated network and disk from a single seed.
"""

from store.raft.errors import ProposalDroppedError
from store.raft.raft import Canary, Config
from store.raft.rawnode import RawNode, Ready, Status
from store.raft.storage import MemoryStorage, Storage
from store.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    ReadState,
    Snapshot,
    SnapshotMetadata,
    SoftState,
    StateType,
)

__all__ = [
    "Canary",
    "ConfChange",
    "ConfChangeType",
    "ConfState",
    "Config",
    "Entry",
    "EntryType",
    "HardState",
    "MemoryStorage",
    "Message",
    "MessageType",
    "ProposalDroppedError",
    "RawNode",
    "ReadState",
    "Ready",
    "Snapshot",
    "SnapshotMetadata",
    "SoftState",
    "StateType",
    "Status",
    "Storage",
]
