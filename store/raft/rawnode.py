"""RawNode: the synchronous API of the core, and the Ready batch it hands out.

The application loop, for every node, is:

    1. feed inputs: `tick()` on a timer, `step(msg)` for every message received, and the
       user's `propose`, `read_index`, `transfer_leader`, `propose_conf_change`;
    2. `if node.has_ready(): rd = node.ready()`, then, in this order:
       a. persist `rd.snapshot` (if any), then `rd.entries`, then `rd.hard_state` (if any),
          and fsync when `rd.must_sync` — then tell the storage (append / apply_snapshot);
       b. send `rd.messages` (only now: votes and append acknowledgements promise that the
          state they report is durable);
       c. install `rd.snapshot` into the state machine, apply `rd.committed_entries` in
          order (calling `apply_conf_change` for conf-change entries), and serve the
          `rd.read_states` whose index has been applied;
       d. `node.advance(rd)`.

One Ready is processed completely before the next `ready()` call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from store.raft.errors import ProposalDroppedError, StepLocalMessageError, StepPeerNotFoundError
from store.raft.raft import Config, Raft
from store.raft.types import (
    LOCAL_MESSAGES,
    NONE,
    RESPONSE_MESSAGES,
    ConfChange,
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


@dataclass(slots=True)
class Ready:
    """Work for the application; see the module docstring for the order."""

    soft_state: SoftState | None = None
    """Set when leader or role changed since the last Ready."""
    hard_state: HardState | None = None
    """Set when term, vote or commit changed; persist it with the entries."""
    read_states: list[ReadState] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    """Entries to append to stable storage (they may overwrite a conflicting suffix)."""
    snapshot: Snapshot | None = None
    committed_entries: list[Entry] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    must_sync: bool = False
    """Entries or term/vote changed: the write must reach the disk before sending."""

    def contains_updates(self) -> bool:
        return bool(
            self.soft_state is not None
            or self.hard_state is not None
            or self.snapshot is not None
            or self.entries
            or self.committed_entries
            or self.messages
            or self.read_states
        )


@dataclass(frozen=True, slots=True)
class PeerProgress:
    """What a leader knows of one member's replication (a copy: it does not change later)."""

    match: int
    next: int
    state: str
    """probe, replicate or snapshot."""
    is_learner: bool

    def __str__(self) -> str:
        learner = " learner" if self.is_learner else ""
        return f"{self.state} match={self.match} next={self.next}{learner}"


@dataclass(frozen=True, slots=True)
class Status:
    """A consistent copy of the node's state, for the application to read: it never needs
    to look inside the core."""

    id: int
    hard_state: HardState
    soft_state: SoftState
    applied: int
    last_index: int
    conf_state: ConfState
    lead_transferee: int
    progress: dict[int, PeerProgress]
    """For a leader: every member's replication progress (its own included); else empty."""

    @property
    def term(self) -> int:
        return self.hard_state.term

    @property
    def commit(self) -> int:
        return self.hard_state.commit

    @property
    def lead(self) -> int:
        return self.soft_state.lead

    @property
    def state(self) -> StateType:
        return self.soft_state.raft_state

    @property
    def is_learner(self) -> bool:
        return self.id in self.conf_state.learners


class RawNode:
    """A Raft node driven step by step by the caller.  Not thread-safe."""

    def __init__(self, config: Config) -> None:
        self.raft = Raft(config)
        self._prev_soft = self.raft.soft_state()
        self._prev_hard = self.raft.hard_state()

    # ------------------------------------------------------------------ bootstrap
    def bootstrap(self, voters: list[int], data: bytes = b"") -> None:
        """Start a brand-new cluster with `voters`; storage must be empty.

        The initial membership becomes a snapshot at index 1 (term 1) holding `data`, the
        application's initial state, handed out in the first Ready.  A snapshot is atomic:
        a member can never run with half of the initial configuration, as it could if the
        voters were added by one log entry each and only some of them had been persisted
        or applied.  Every member must bootstrap with the same `data`.
        """
        r = self.raft
        if r.log.last_index() != 0 or r.term != 0:
            raise ValueError("bootstrap needs empty storage")
        if not voters or NONE in voters or len(set(voters)) != len(voters):
            raise ValueError(f"bootstrap needs distinct non-zero voter ids, got {voters}")
        snap = Snapshot(SnapshotMetadata(index=1, term=1, conf_state=ConfState(voters=tuple(sorted(voters)))), data)
        r.become_follower(1, NONE)
        r.restore(snap)

    # ------------------------------------------------------------------ inputs
    def tick(self) -> None:
        self.raft.tick()

    def campaign(self) -> None:
        self.raft.step(Message(type=MessageType.HUP, frm=self.raft.id))

    def propose(self, data: bytes) -> None:
        """Propose one entry; raises ProposalDroppedError when it cannot be taken."""
        self.propose_many([data])

    def propose_many(self, datas: list[bytes]) -> None:
        """Propose several entries in one message: one append, one broadcast."""
        self.raft.step(
            Message(type=MessageType.PROP, frm=self.raft.id, entries=[Entry(term=0, index=0, data=d) for d in datas])
        )

    def propose_conf_change(self, cc: ConfChange) -> None:
        self.raft.step(
            Message(
                type=MessageType.PROP,
                frm=self.raft.id,
                entries=[Entry(term=0, index=0, type=EntryType.CONF_CHANGE, data=cc.encode())],
            )
        )

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        return self.raft.apply_conf_change(cc)

    def step(self, m: Message) -> None:
        """Feed a message received from the network."""
        if m.type in LOCAL_MESSAGES:
            raise StepLocalMessageError(f"{m.type.name} is a local message and cannot arrive from the network")
        if m.type in RESPONSE_MESSAGES and m.frm not in self.raft.prs and self.raft.state == StateType.LEADER:
            raise StepPeerNotFoundError(f"response from {m.frm}, which is not a member")
        self.raft.step(m)

    def read_index(self, ctx: bytes) -> None:
        """Ask for a linearizable read; a ReadState with `ctx` appears in a later Ready."""
        if not ctx:
            raise ValueError("read_index needs a non-empty request context")
        self.raft.step(Message(type=MessageType.READ_INDEX, context=ctx))

    def transfer_leader(self, transferee: int) -> None:
        self.raft.step(Message(type=MessageType.TRANSFER_LEADER, frm=transferee))

    def report_unreachable(self, node_id: int) -> None:
        self.raft.step(Message(type=MessageType.UNREACHABLE, frm=node_id))

    def report_snapshot(self, node_id: int, failed: bool) -> None:
        self.raft.step(Message(type=MessageType.SNAP_STATUS, frm=node_id, reject=failed))

    # ------------------------------------------------------------------ outputs
    def has_ready(self) -> bool:
        r = self.raft
        # Compare fields rather than build state objects: this runs once per event.
        soft, hard = self._prev_soft, self._prev_hard
        if r.lead != soft.lead or r.state != soft.raft_state:
            return True
        if r.term != hard.term or r.vote != hard.vote or r.log.committed != hard.commit:
            return True
        if r.log.unstable.snapshot is not None:
            return True
        return bool(r.msgs or r.log.unstable.entries or r.read_states or r.log.has_next_committed_ents())

    def ready(self) -> Ready:
        """The pending work; the messages and read states are handed over (not repeated)."""
        r = self.raft
        rd = Ready(
            entries=list(r.log.unstable_entries()),
            committed_entries=r.log.next_committed_ents(),
            messages=r.msgs,
            snapshot=r.log.unstable.snapshot,
            read_states=r.read_states,
        )
        r.msgs = []
        r.read_states = []
        soft = r.soft_state()
        if soft != self._prev_soft:
            rd.soft_state = soft
            self._prev_soft = soft
        hs = r.hard_state()
        if hs != self._prev_hard:
            rd.hard_state = hs
            rd.must_sync = hs.term != self._prev_hard.term or hs.vote != self._prev_hard.vote
        rd.must_sync = rd.must_sync or bool(rd.entries) or rd.snapshot is not None
        return rd

    def advance(self, rd: Ready) -> None:
        """The application finished `rd` (persisted, sent, applied)."""
        r = self.raft
        if rd.hard_state is not None:
            self._prev_hard = rd.hard_state
        if rd.snapshot is not None:
            r.log.stable_snap_to(rd.snapshot.metadata.index)
            r.log.applied = max(r.log.applied, rd.snapshot.metadata.index)
        if rd.entries:
            last = rd.entries[-1]
            r.log.stable_to(last.index, last.term)
        if rd.committed_entries:
            r.log.applied_to(rd.committed_entries[-1].index)

    # ------------------------------------------------------------------ inspection
    def status(self) -> Status:
        r = self.raft
        progress = {}
        if r.state == StateType.LEADER:
            progress = {
                pid: PeerProgress(pr.match, pr.next, pr.state.name.lower(), pr.is_learner) for pid, pr in r.prs.items()
            }
        return Status(
            id=r.id,
            hard_state=r.hard_state(),
            soft_state=r.soft_state(),
            applied=r.log.applied,
            last_index=r.log.last_index(),
            conf_state=r.conf_state(),
            lead_transferee=r.lead_transferee,
            progress=progress,
        )


__all__ = ["PeerProgress", "ProposalDroppedError", "RawNode", "Ready", "Status"]
