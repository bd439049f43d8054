"""A minimal in-memory network of RawNodes for the Raft unit tests.

Each member has a `MemoryStorage` written only while processing a Ready, in the order of the
Ready contract (persist snapshot + entries + hard state, then send, then apply, then
advance).  Messages sent by a member wait in `Network.inflight` until a test delivers
them, so a test can look at (or drop) every message on the wire.  Links can be cut.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from store.raft import Config, MemoryStorage, RawNode
from store.raft.errors import ProposalDroppedError, StepPeerNotFoundError
from store.raft.raft import Raft
from store.raft.types import (
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
    StateType,
)

MessageFilter = Callable[[Message], bool]
"""A predicate over messages: which ones to drop, hold, take or peek at."""


class FixedRng:
    """A RandomSource that always returns `start + offset` (clamped into the range)."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset

    def randrange(self, start: int, stop: int) -> int:
        return min(start + self.offset, stop - 1)


def make_config(node_id: int, storage: MemoryStorage, **overrides: object) -> Config:
    """A Config with deterministic defaults; keyword arguments override any field."""
    cfg = Config(id=node_id, storage=storage, rng=FixedRng(node_id - 1), election_tick=10, heartbeat_tick=1)
    for key, value in overrides.items():
        setattr(cfg, key, value)
    return cfg


def storage_with_log(
    voters: Iterable[int],
    terms: list[int],
    hard_state: HardState | None = None,
    learners: Iterable[int] = (),
) -> MemoryStorage:
    """Storage holding the bootstrap snapshot (index 1, term 1) followed by one entry per term in `terms`.

    Entry i of `terms` lands at log index i + 2.  The hard state defaults to the last term
    with commit 1 (only the snapshot is known committed).
    """
    storage = MemoryStorage()
    conf = ConfState(voters=tuple(sorted(voters)), learners=tuple(sorted(learners)))
    storage.apply_snapshot(Snapshot(SnapshotMetadata(index=1, term=1, conf_state=conf)))
    storage.append([Entry(term=t, index=i + 2, data=b"e%d" % (i + 2)) for i, t in enumerate(terms)])
    if hard_state is None:
        hard_state = HardState(term=max([1, *terms]), vote=0, commit=1)
    storage.set_hard_state(hard_state)
    return storage


def drain_ready(node: RawNode, storage: MemoryStorage) -> list[Message]:
    """Process every pending Ready of a single node per the contract; returns the messages it sent."""
    sent: list[Message] = []
    while node.has_ready():
        rd = node.ready()
        if rd.snapshot is not None:
            storage.apply_snapshot(rd.snapshot)
        storage.append(rd.entries)
        if rd.hard_state is not None:
            storage.set_hard_state(rd.hard_state)
        sent.extend(rd.messages)
        for e in rd.committed_entries:
            if e.type == EntryType.CONF_CHANGE:
                node.apply_conf_change(ConfChange.decode(e.data))
        node.advance(rd)
    return sent


@dataclass
class Member:
    id: int
    raw: RawNode
    storage: MemoryStorage
    applied: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    applied_index: int = 0

    @property
    def raft(self) -> Raft:
        return self.raw.raft


class Network:
    """Members by id, the messages in flight between them, and the links that are cut."""

    def __init__(self, ids: Iterable[int] = (), *, bootstrap: bool = True, **config: object) -> None:
        self.config = config
        self.members: dict[int, Member] = {}
        self.inflight: list[Message] = []
        self.cut: set[tuple[int, int]] = set()
        """Directed links (from, to) that lose every message."""
        self.sent: list[Message] = []
        """Every message put on the wire, in order (including ones lost on a cut link)."""
        self.report_snapshots = True
        ids = list(ids)
        for nid in ids:
            self.add_member(nid, bootstrap_voters=ids if bootstrap else None)
        self.process_all()

    # ------------------------------------------------------------------ membership of the harness
    def add_member(
        self, nid: int, bootstrap_voters: list[int] | None = None, storage: MemoryStorage | None = None
    ) -> Member:
        """Start a member; with `bootstrap_voters` it bootstraps, otherwise it waits to hear from a leader."""
        storage = storage if storage is not None else MemoryStorage()
        raw = RawNode(make_config(nid, storage, **self.config))
        if bootstrap_voters is not None:
            raw.bootstrap(bootstrap_voters)
        member = Member(nid, raw, storage, applied_index=storage.snapshot().metadata.index)
        self.members[nid] = member
        return member

    def __getitem__(self, nid: int) -> Member:
        return self.members[nid]

    def raft(self, nid: int) -> Raft:
        return self.members[nid].raft

    # ------------------------------------------------------------------ the Ready contract
    def process_ready(self, nid: int) -> bool:
        """Handle one Ready of `nid` (persist, send, apply, advance); False when it had none."""
        m = self.members[nid]
        if not m.raw.has_ready():
            return False
        rd = m.raw.ready()
        # 1. Persist.
        if rd.snapshot is not None:
            m.storage.apply_snapshot(rd.snapshot)
        m.storage.append(rd.entries)
        if rd.hard_state is not None:
            m.storage.set_hard_state(rd.hard_state)
        # Everything committed must be durable now (it is in storage after step 1).
        for e in rd.committed_entries:
            assert m.storage.first_index() <= e.index <= m.storage.last_index(), f"{nid}: applying {e} not in storage"
            assert m.storage.term(e.index) == e.term, f"{nid}: applying {e} whose term differs in storage"
        # 2. Send.
        for msg in rd.messages:
            self.sent.append(msg)
            if (msg.frm, msg.to) not in self.cut:
                self.inflight.append(msg)
            elif msg.type == MessageType.SNAP and self.report_snapshots:
                m.raw.report_snapshot(msg.to, failed=True)
        # 3. Apply.
        if rd.snapshot is not None:
            m.applied_index = rd.snapshot.metadata.index
        for e in rd.committed_entries:
            assert e.index == m.applied_index + 1, f"{nid}: applied {e.index} after {m.applied_index}"
            m.applied_index = e.index
            m.applied.append(e)
            if e.type == EntryType.CONF_CHANGE:
                m.raw.apply_conf_change(ConfChange.decode(e.data))
        m.read_states.extend(rd.read_states)
        # 4. Advance.
        m.raw.advance(rd)
        return True

    def process_all(self) -> bool:
        """Process one Ready of every member that has one; True when any did."""
        progressed = False
        for nid in sorted(self.members):
            progressed |= self.process_ready(nid)
        return progressed

    # ------------------------------------------------------------------ the wire
    def take(self, pred: MessageFilter | None = None) -> list[Message]:
        """Remove and return the in-flight messages matching `pred` (all by default)."""
        taken = [m for m in self.inflight if pred is None or pred(m)]
        self.inflight = [m for m in self.inflight if not (pred is None or pred(m))]
        return taken

    def peek(self, pred: MessageFilter | None = None) -> list[Message]:
        return [m for m in self.inflight if pred is None or pred(m)]

    def deliver(self, msg: Message) -> None:
        """Hand one message to its recipient (lost if the link is cut or the recipient is unknown)."""
        dst = self.members.get(msg.to)
        if dst is None or (msg.frm, msg.to) in self.cut:
            return
        # A forwarded request that could not be taken, or a removed member's answer: lost.
        with contextlib.suppress(ProposalDroppedError, StepPeerNotFoundError):
            dst.raw.step(msg)
        if msg.type == MessageType.SNAP and self.report_snapshots and msg.frm in self.members:
            self.members[msg.frm].raw.report_snapshot(msg.to, failed=False)

    def deliver_all(self, drop: MessageFilter | None = None, hold: MessageFilter | None = None) -> int:
        """Deliver everything in flight, except what `drop` selects (lost) or `hold` selects (kept in flight).

        Returns how many messages were delivered.
        """
        batch, self.inflight = self.inflight, []
        delivered = 0
        for msg in batch:
            if hold is not None and hold(msg):
                self.inflight.append(msg)
                continue
            if drop is not None and drop(msg):
                continue
            self.deliver(msg)
            delivered += 1
        return delivered

    def stabilize(self, drop: MessageFilter | None = None, max_rounds: int = 1000) -> None:
        """Process Readies and deliver messages until nothing moves."""
        for _ in range(max_rounds):
            progressed = False
            while self.process_all():
                progressed = True
            if not self.inflight and not progressed:
                return
            self.deliver_all(drop)
        raise AssertionError("network did not stabilize")

    # ------------------------------------------------------------------ partitions
    def isolate(self, nid: int) -> None:
        for other in self.members:
            if other != nid:
                self.cut.add((nid, other))
                self.cut.add((other, nid))

    def heal(self) -> None:
        self.cut.clear()

    # ------------------------------------------------------------------ time
    def tick(self, nid: int, times: int = 1) -> None:
        for _ in range(times):
            self.members[nid].raw.tick()

    def tick_all(self, times: int = 1, stabilize: bool = True, drop: MessageFilter | None = None) -> None:
        """Tick every member `times` times, stabilizing the network after each round of ticks."""
        for _ in range(times):
            for member in self.members.values():
                member.raw.tick()
            if stabilize:
                self.stabilize(drop)

    # ------------------------------------------------------------------ conveniences
    def elect(self, nid: int) -> None:
        """Make `nid` campaign and run the network until it settles; asserts that it won."""
        self.members[nid].raw.campaign()
        self.stabilize()
        assert self.raft(nid).state == StateType.LEADER, f"{nid} did not win: {self.raft(nid)!r}"

    def leaders(self) -> list[int]:
        return sorted(nid for nid, m in self.members.items() if m.raft.state == StateType.LEADER)

    def applied_data(self, nid: int) -> list[bytes]:
        """Payloads of the non-empty normal entries `nid` applied, in order."""
        return [e.data for e in self.members[nid].applied if e.type == EntryType.NORMAL and e.data]


def is_type(*types: MessageType, frm: int | None = None, to: int | None = None) -> MessageFilter:
    """A filter selecting messages of the given types (and, optionally, sender / recipient)."""

    def pred(m: Message) -> bool:
        return m.type in types and (frm is None or m.frm == frm) and (to is None or m.to == to)

    return pred


def new_node(node_id: int, storage: MemoryStorage, **config: object) -> RawNode:
    """A RawNode restarting from `storage` (see `storage_with_log`), configured like `make_config`."""
    return RawNode(make_config(node_id, storage, **config))
