"""InteractionEnv: plays the application and the network for a few RawNodes, one command at a time.

The scenario files in `testdata/` drive it through `datadriven`.  Every command prints what
happened (Readies, messages delivered or dropped, role changes), so a scenario reads as a
transcript and any change in the core's behaviour shows up as a diff.

The application follows the Ready contract of `store.raft.rawnode`: persist snapshot, entries
and hard state to the node's `MemoryStorage`, then put the messages on the network, then
apply (calling `apply_conf_change` for conf-change entries), then `advance`.  A crash keeps
only what was persisted; a restart rebuilds the node from storage alone.

The network is a queue of messages, delivered only by `deliver-msgs` / `stabilize`, per
recipient in send order.  A message to a node that is down, or to or from an isolated node,
is dropped when sent (and printed as dropped); `isolate` and `crash` also drop what was
already queued.  A lost MsgSnap is reported to its sender as a failed snapshot.

The state machine is a list of applied payloads.  Across all nodes the env remembers which
entry was applied at each index and prints a `SAFETY VIOLATION` line if two nodes ever apply
different entries at the same index (this is how the Figure 8 canary shows up).

Commands (ids are node ids; `(a,b)` is a list):

    add-nodes N [voters=(..)] [learners=(..)] [prevote=BOOL] [checkquorum=BOOL]
              [max-size-per-msg=N] [max-inflight=N] [election-tick=N] [heartbeat-tick=N]
              [seed=N] [canary=(name,..)]
        New nodes get the next free ids.  With voters= they are bootstrapped with that
        configuration (and the bootstrap Ready is processed); without, they start empty and
        wait to be added by a conf change.  prevote/checkquorum default to false (etcd's
        defaults), so each scenario says which protections it relies on.
    campaign ID | propose ID DATA.. | propose-conf-change ID add|add-learner|remove NODE
    read-index ID CTX | transfer-leader FROM TO
    report-snapshot FROM TO [failed] | report-unreachable FROM TO
    tick-election ID.. | tick-heartbeat ID.. | tick n=N [ID..]
        tick-election ticks until the node's election timer fires (for a leader: until its
        check-quorum round), tick-heartbeat until the leader's heartbeat fires.
    set-randomized-election-timeout ID timeout=N
        Pin the node's randomized election timeout to N, now and after every reset.
    process-ready ID.. | deliver-msgs [ID..] [from=(..)] [type=MsgX] [drop=(..)]
    stabilize [ID..]
    isolate ID | heal | crash ID | restart ID | compact ID [INDEX]
    status ID | raft-state | raft-log ID
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from store.raft import Canary, Config, MemoryStorage, RawNode, Ready
from store.raft.describe import describe_entry, describe_hard_state, describe_message, describe_snapshot
from store.raft.errors import ProposalDroppedError, RaftError
from store.raft.progress import ProgressState
from store.raft.types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
    StateType,
)
from tests.store.raft.datadriven import TestData

STATE_NAMES = {
    StateType.FOLLOWER: "Follower",
    StateType.CANDIDATE: "Candidate",
    StateType.LEADER: "Leader",
    StateType.PRE_CANDIDATE: "PreCandidate",
}

# "MsgApp" -> MessageType.APP, using describe's own names so that filters match the output.
MESSAGE_TYPES = {describe_message(Message(type=t)).split()[1]: t for t in MessageType}

CONF_CHANGE_TYPES = {
    "add": ConfChangeType.ADD_NODE,
    "add-learner": ConfChangeType.ADD_LEARNER,
    "remove": ConfChangeType.REMOVE_NODE,
}


class PinnableRandom:
    """A seeded RandomSource whose election-timeout draw can be pinned by a scenario.

    The core asks for `randrange(0, election_tick)` whenever it resets its timer; pinning
    makes every such draw return `timeout - election_tick`, so the randomized timeout is
    `timeout` until unpinned.
    """

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)
        self.pinned_timeout: int | None = None

    def randrange(self, start: int, stop: int) -> int:
        if self.pinned_timeout is not None:
            return self.pinned_timeout - stop
        return self._rng.randrange(start, stop)


@dataclass(frozen=True)
class NodeOptions:
    election_tick: int = 10
    heartbeat_tick: int = 1
    pre_vote: bool = False
    check_quorum: bool = False
    max_size_per_msg: int = 1 << 20
    max_inflight: int = 256
    canaries: frozenset[Canary] = frozenset()


@dataclass
class Node:
    """One member: its durable storage, its RawNode (None while down) and its state machine."""

    id: int
    opts: NodeOptions
    rng: PinnableRandom
    storage: MemoryStorage = field(default_factory=MemoryStorage)
    raw: RawNode | None = None
    applied: int = 0
    data: list[tuple[int, str]] = field(default_factory=list)
    """(index, payload) of every applied normal entry; restored ones carry the snapshot index."""
    confs: list[tuple[int, ConfState]] = field(default_factory=list)
    """(index, configuration) as applied, to snapshot at an index below the applied one."""

    def start(self) -> RawNode:
        """(Re)start from storage alone: the state machine comes back from the snapshot."""
        snap = self.storage.snapshot()
        self.applied = snap.metadata.index
        self.data = [(snap.metadata.index, p) for p in _decode_state(snap.data)]
        self.confs = [(snap.metadata.index, snap.metadata.conf_state)] if not snap.is_empty else []
        o = self.opts
        self.raw = RawNode(
            Config(
                id=self.id,
                storage=self.storage,
                rng=self.rng,
                election_tick=o.election_tick,
                heartbeat_tick=o.heartbeat_tick,
                applied=self.applied,
                max_size_per_msg=o.max_size_per_msg,
                max_inflight_msgs=o.max_inflight,
                check_quorum=o.check_quorum,
                pre_vote=o.pre_vote,
                canaries=o.canaries,
            )
        )
        return self.raw

    def conf_at(self, index: int) -> ConfState:
        cs = ConfState()
        for i, c in self.confs:
            if i <= index:
                cs = c
        return cs


def _encode_state(payloads: list[str]) -> bytes:
    return json.dumps(payloads).encode()


def _decode_state(data: bytes) -> list[str]:
    return list(json.loads(data)) if data else []


def _conf(cs: ConfState) -> str:
    s = f"Voters:{list(cs.voters)}"
    if cs.learners:
        s += f" Learners:{list(cs.learners)}"
    return s


class InteractionEnv:
    """N RawNodes, a network of queued messages, and an output buffer per command."""

    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self.net: list[Message] = []
        self.isolated: set[int] = set()
        self.out: list[str] = []
        # index -> (term, type, data, node that applied it first): the cross-node safety check.
        self.applied_at: dict[int, tuple[int, EntryType, bytes, int]] = {}
        self.violations: list[str] = []
        self._commands: dict[str, Callable[[TestData], None]] = {
            "add-nodes": self.cmd_add_nodes,
            "campaign": self.cmd_campaign,
            "propose": self.cmd_propose,
            "propose-conf-change": self.cmd_propose_conf_change,
            "read-index": self.cmd_read_index,
            "transfer-leader": self.cmd_transfer_leader,
            "report-snapshot": self.cmd_report_snapshot,
            "report-unreachable": self.cmd_report_unreachable,
            "tick-election": self.cmd_tick_election,
            "tick-heartbeat": self.cmd_tick_heartbeat,
            "tick": self.cmd_tick,
            "set-randomized-election-timeout": self.cmd_set_timeout,
            "process-ready": self.cmd_process_ready,
            "deliver-msgs": self.cmd_deliver_msgs,
            "stabilize": self.cmd_stabilize,
            "isolate": self.cmd_isolate,
            "heal": self.cmd_heal,
            "crash": self.cmd_crash,
            "restart": self.cmd_restart,
            "compact": self.cmd_compact,
            "status": self.cmd_status,
            "raft-state": self.cmd_raft_state,
            "raft-log": self.cmd_raft_log,
        }

    # ------------------------------------------------------------------ plumbing
    def handle(self, d: TestData) -> str:
        """Run one stanza's command and return everything it printed."""
        fn = self._commands.get(d.cmd)
        if fn is None:
            raise d.fail(f"unknown command (known: {sorted(self._commands)})")
        self.out = []
        try:
            fn(d)
        except RaftError as e:
            self.emit(f"error: {type(e).__name__}: {e}")
        return "\n".join(self.out)

    def emit(self, line: str) -> None:
        self.out.append(line)

    def _ids(self, d: TestData, minimum: int = 1) -> list[int]:
        try:
            ids = [int(w) for w in d.positional()]
        except ValueError:
            raise d.fail(f"expected node ids, got {d.positional()}") from None
        if len(ids) < minimum:
            raise d.fail(f"needs at least {minimum} node id(s)")
        for i in ids:
            if i not in self.nodes:
                raise d.fail(f"no node {i}")
        return ids

    def _one_id(self, d: TestData) -> int:
        words = d.positional()
        if not words:
            raise d.fail("needs a node id")
        try:
            nid = int(words[0])
        except ValueError:
            raise d.fail(f"expected a node id, got {words[0]!r}") from None
        if nid not in self.nodes:
            raise d.fail(f"no node {nid}")
        return nid

    def _raw(self, d: TestData, nid: int) -> RawNode:
        raw = self.nodes[nid].raw
        if raw is None:
            raise d.fail(f"node {nid} is down")
        return raw

    @contextmanager
    def _watch(self, node: Node, indent: str) -> Iterator[None]:
        """Report role/term changes and contain the core's refusals and panics."""
        raw = node.raw
        assert raw is not None
        before = (raw.raft.state, raw.raft.term)
        try:
            yield
        except ProposalDroppedError as e:
            self.emit(f"{indent}refused: {e}")
        except RaftError as e:
            self.emit(f"{indent}error: {type(e).__name__}: {e}")
        except AssertionError as e:
            # The core's invariant checks are its panics: a real member would stop here.
            self.emit(f"{indent}PANIC: {node.id}: {e}")
            self.emit(f"{indent}{node.id} is stopped (restart it from storage to continue)")
            self._crash(node, indent)
            return
        after = (raw.raft.state, raw.raft.term)
        if after != before:
            self.emit(f"{indent}{node.id} became {STATE_NAMES[after[0]]} at term {after[1]}")

    # ------------------------------------------------------------------ setup
    def cmd_add_nodes(self, d: TestData) -> None:
        d.check_keys(
            {
                "voters",
                "learners",
                "prevote",
                "checkquorum",
                "max-size-per-msg",
                "max-inflight",
                "election-tick",
                "heartbeat-tick",
                "seed",
                "canary",
            }
        )
        words = d.positional()
        if len(words) != 1 or not words[0].isdigit():
            raise d.fail("usage: add-nodes N [options]")
        n = int(words[0])
        voters = d.get_ints("voters")
        learners = d.get_ints("learners")
        if learners and not voters:
            raise d.fail("learners= needs voters=")
        try:
            canaries = frozenset(Canary(c) for c in d.get_list("canary"))
        except ValueError:
            raise d.fail(f"unknown canary in {d.get_list('canary')} (known: {[c.value for c in Canary]})") from None
        opts = NodeOptions(
            election_tick=d.get_int("election-tick", 10),
            heartbeat_tick=d.get_int("heartbeat-tick", 1),
            pre_vote=d.get_bool("prevote", False),
            check_quorum=d.get_bool("checkquorum", False),
            max_size_per_msg=d.get_int("max-size-per-msg", 1 << 20),
            max_inflight=d.get_int("max-inflight", 256),
            canaries=canaries,
        )
        seed = d.get_int("seed", 0)
        first = max(self.nodes, default=0) + 1
        for nid in range(first, first + n):
            node = Node(nid, opts, PinnableRandom(seed * 1000 + nid))
            self.nodes[nid] = node
            if not voters:
                node.start()
                self.emit(f"{nid}: empty storage, waits to be added by a conf change")
                continue
            if learners:
                # RawNode.bootstrap only takes voters: persist what its first Ready would
                # (the initial configuration as a snapshot at 1/1, term 1) directly.
                cs = ConfState(voters=tuple(sorted(voters)), learners=tuple(sorted(learners)))
                node.storage.apply_snapshot(Snapshot(SnapshotMetadata(index=1, term=1, conf_state=cs)))
                node.storage.set_hard_state(HardState(term=1, commit=1))
                node.start()
            else:
                raw = node.start()
                raw.bootstrap(voters)
                # The bootstrap snapshot must be persisted before the node can campaign.
                self._handle_ready(node, raw.ready(), quiet=True)
            snap = node.storage.snapshot()
            self.emit(f"{nid}: bootstrapped {describe_snapshot(snap)}, {describe_hard_state(node.storage.hard_state)}")

    # ------------------------------------------------------------------ inputs
    def cmd_campaign(self, d: TestData) -> None:
        node = self.nodes[self._one_id(d)]
        raw = self._raw(d, node.id)
        with self._watch(node, ""):
            raw.campaign()

    def cmd_propose(self, d: TestData) -> None:
        words = d.positional()
        nid = self._one_id(d)
        if len(words) < 2:
            raise d.fail("usage: propose ID DATA..")
        raw = self._raw(d, nid)
        with self._watch(self.nodes[nid], ""):
            raw.propose_many([w.encode() for w in words[1:]])

    def cmd_propose_conf_change(self, d: TestData) -> None:
        words = d.positional()
        if len(words) != 3 or words[1] not in CONF_CHANGE_TYPES or not words[2].isdigit():
            raise d.fail("usage: propose-conf-change ID add|add-learner|remove NODE")
        nid = self._one_id(d)
        raw = self._raw(d, nid)
        cc = ConfChange(CONF_CHANGE_TYPES[words[1]], int(words[2]))
        with self._watch(self.nodes[nid], ""):
            raw.propose_conf_change(cc)

    def cmd_read_index(self, d: TestData) -> None:
        words = d.positional()
        if len(words) != 2:
            raise d.fail("usage: read-index ID CTX")
        nid = self._one_id(d)
        raw = self._raw(d, nid)
        with self._watch(self.nodes[nid], ""):
            raw.read_index(words[1].encode())

    def cmd_transfer_leader(self, d: TestData) -> None:
        ids = self._ids(d, 2)
        raw = self._raw(d, ids[0])
        with self._watch(self.nodes[ids[0]], ""):
            raw.transfer_leader(ids[1])

    def cmd_report_snapshot(self, d: TestData) -> None:
        words = d.positional()
        failed = "failed" in words
        ids = [int(w) for w in words if w != "failed"]
        if len(ids) != 2:
            raise d.fail("usage: report-snapshot FROM TO [failed]")
        raw = self._raw(d, ids[0])
        with self._watch(self.nodes[ids[0]], ""):
            raw.report_snapshot(ids[1], failed=failed)

    def cmd_report_unreachable(self, d: TestData) -> None:
        ids = self._ids(d, 2)
        raw = self._raw(d, ids[0])
        with self._watch(self.nodes[ids[0]], ""):
            raw.report_unreachable(ids[1])

    # ------------------------------------------------------------------ time
    def _tick(self, node: Node, times: int) -> None:
        for _ in range(times):
            if node.raw is None:
                return
            with self._watch(node, ""):
                node.raw.tick()

    def cmd_tick_election(self, d: TestData) -> None:
        for nid in self._ids(d):
            r = self._raw(d, nid).raft
            if r.state == StateType.LEADER:
                n = max(1, r.election_timeout - r.election_elapsed)
            else:
                n = max(1, r.randomized_election_timeout - r.election_elapsed)
            self.emit(f"{nid} ticks {n} times")
            self._tick(self.nodes[nid], n)

    def cmd_tick_heartbeat(self, d: TestData) -> None:
        for nid in self._ids(d):
            r = self._raw(d, nid).raft
            n = max(1, r.heartbeat_timeout - r.heartbeat_elapsed) if r.state == StateType.LEADER else 1
            self.emit(f"{nid} ticks {n} times")
            self._tick(self.nodes[nid], n)

    def cmd_tick(self, d: TestData) -> None:
        """Let time pass for several nodes together, one tick each per round, in id order."""
        d.check_keys({"n"})
        n = d.get_int("n", 1)
        ids = self._ids(d, 0) or sorted(self.nodes)
        for _ in range(n):
            for nid in ids:
                self._tick(self.nodes[nid], 1)

    def cmd_set_timeout(self, d: TestData) -> None:
        d.check_keys({"timeout"})
        nid = self._one_id(d)
        timeout = d.get_int("timeout", 0)
        if timeout <= 0:
            raise d.fail("needs timeout=N (N > 0)")
        node = self.nodes[nid]
        node.rng.pinned_timeout = timeout
        if node.raw is not None:
            node.raw.raft.randomized_election_timeout = timeout

    # ------------------------------------------------------------------ readies
    def cmd_process_ready(self, d: TestData) -> None:
        for nid in self._ids(d):
            node = self.nodes[nid]
            raw = self._raw(d, nid)
            if raw.has_ready():
                self._handle_ready(node, raw.ready())

    def _handle_ready(self, node: Node, rd: Ready, quiet: bool = False) -> None:
        """Carry out one Ready in the order of the contract, printing it unless `quiet`."""
        raw = node.raw
        assert raw is not None
        if not quiet:
            self.emit(f"> {node.id} handling Ready")
            for line in self._describe_ready(rd):
                self.emit(f"  {line}")
        # 1. persist
        st = node.storage
        if rd.snapshot is not None:
            st.apply_snapshot(rd.snapshot)
        if rd.entries:
            st.append(rd.entries)
        if rd.hard_state is not None:
            st.set_hard_state(rd.hard_state)
        # 2. send: a message to a node that is down or cut off is lost on the way.
        for m in rd.messages:
            why = self._why_lost(m)
            if why is None:
                self.net.append(m)
            elif quiet:
                raise AssertionError(f"bootstrap Ready sent {describe_message(m)}")
            else:
                self._lost(m, why, "  ")
        # 3. apply
        if rd.snapshot is not None:
            meta = rd.snapshot.metadata
            node.applied = meta.index
            node.data = [(meta.index, p) for p in _decode_state(rd.snapshot.data)]
            node.confs = [(meta.index, meta.conf_state)]
            if not quiet:
                self.emit(f"  {node.id} restored snapshot at {meta.index}: {_conf(meta.conf_state)}")
        for e in rd.committed_entries:
            self._apply(node, raw, e)
            if node.raw is None:
                return  # panicked while applying
        # 4. advance
        raw.advance(rd)

    def _apply(self, node: Node, raw: RawNode, e: Entry) -> None:
        prior = self.applied_at.get(e.index)
        if prior is None:
            self.applied_at[e.index] = (e.term, e.type, e.data, node.id)
        elif prior[:3] != (e.term, e.type, e.data):
            other = Entry(term=prior[0], index=e.index, type=prior[1], data=prior[2])
            msg = (
                f"SAFETY VIOLATION: {node.id} applied {describe_entry(e)} at index {e.index}, "
                f"but {prior[3]} applied {describe_entry(other)} there"
            )
            self.violations.append(msg)
            self.emit(f"  {msg}")
        node.applied = e.index
        if e.type == EntryType.CONF_CHANGE:
            cc = ConfChange.decode(e.data)
            with self._watch(node, "  "):
                cs = raw.apply_conf_change(cc)
                node.confs.append((e.index, cs))
                self.emit(f"  {node.id} applied {describe_entry(e)}: now {_conf(cs)}")
        elif e.data:
            node.data.append((e.index, e.data.decode(errors="replace")))

    @staticmethod
    def _describe_ready(rd: Ready) -> list[str]:
        lines = [f"Ready MustSync={str(rd.must_sync).lower()}:"]
        if rd.soft_state is not None:
            lines.append(f"Lead:{rd.soft_state.lead} State:{STATE_NAMES[rd.soft_state.raft_state]}")
        if rd.hard_state is not None:
            lines.append(describe_hard_state(rd.hard_state))
        if rd.snapshot is not None:
            lines.append(f"Snapshot {describe_snapshot(rd.snapshot)}")
        if rd.entries:
            lines.append("Entries:")
            lines.extend(f"  {describe_entry(e)}" for e in rd.entries)
        if rd.committed_entries:
            lines.append("CommittedEntries:")
            lines.extend(f"  {describe_entry(e)}" for e in rd.committed_entries)
        if rd.messages:
            lines.append("Messages:")
            lines.extend(f"  {describe_message(m)}" for m in rd.messages)
        if rd.read_states:
            lines.append("ReadStates:")
            lines.extend(f"  Index:{rs.index} Ctx:{rs.request_ctx.decode(errors='replace')}" for rs in rd.read_states)
        return lines

    # ------------------------------------------------------------------ network
    def _why_lost(self, m: Message) -> str | None:
        dst = self.nodes.get(m.to)
        if dst is None:
            return f"{m.to} does not exist"
        if dst.raw is None:
            return f"{m.to} is down"
        for side in (m.frm, m.to):
            if side in self.isolated:
                return f"{side} is isolated"
        return None

    def _lost(self, m: Message, why: str, indent: str) -> None:
        self.emit(f"{indent}{describe_message(m)} (dropped: {why})")
        if m.type == MessageType.SNAP:
            # The transport sees the snapshot stream fail and tells the sender.
            src = self.nodes.get(m.frm)
            if src is not None and src.raw is not None:
                with self._watch(src, indent):
                    src.raw.report_snapshot(m.to, failed=True)
                self.emit(f"{indent}{m.frm} notified: snapshot to {m.to} failed")

    def _take(self, pred: Callable[[Message], bool]) -> list[Message]:
        taken = [m for m in self.net if pred(m)]
        self.net = [m for m in self.net if not pred(m)]
        return taken

    def _deliver_to(self, nid: int, pred: Callable[[Message], bool]) -> int:
        msgs = self._take(lambda m: m.to == nid and pred(m))
        if not msgs:
            return 0
        self.emit(f"> {nid} receiving messages")
        node = self.nodes.get(nid)
        for m in msgs:
            why = self._why_lost(m)
            if why is not None or node is None or node.raw is None:
                self._lost(m, why or f"{nid} is down", "  ")
                continue
            self.emit(f"  {describe_message(m)}")
            raw = node.raw
            with self._watch(node, "  "):
                raw.step(m)
        return len(msgs)

    def cmd_deliver_msgs(self, d: TestData) -> None:
        d.check_keys({"from", "type", "drop"})
        ids = self._ids(d, 0)
        drop = set(d.get_ints("drop"))
        froms = set(d.get_ints("from"))
        types: set[MessageType] = set()
        for name in d.get_list("type"):
            if name not in MESSAGE_TYPES:
                raise d.fail(f"unknown message type {name} (known: {sorted(MESSAGE_TYPES)})")
            types.add(MESSAGE_TYPES[name])
        if not ids and not drop:
            ids = sorted(self.nodes)

        def pred(m: Message) -> bool:
            return (not froms or m.frm in froms) and (not types or m.type in types)

        for nid in sorted(drop):
            for m in self._take(lambda m, nid=nid: m.to == nid and pred(m)):
                self._lost(m, "by the test", "")
        for nid in ids:
            self._deliver_to(nid, pred)

    def cmd_stabilize(self, d: TestData) -> None:
        """Process Readies and deliver messages among `ids` until nothing moves."""
        ids = self._ids(d, 0) or sorted(self.nodes)
        for _ in range(1000):
            moved = False
            for nid in ids:
                node = self.nodes[nid]
                if node.raw is not None and node.raw.has_ready():
                    self._handle_ready(node, node.raw.ready())
                    moved = True
            for nid in ids:
                if self._deliver_to(nid, lambda m: True):
                    moved = True
            if not moved:
                return
        raise d.fail("did not stabilize within 1000 rounds")

    # ------------------------------------------------------------------ faults
    def cmd_isolate(self, d: TestData) -> None:
        for nid in self._ids(d):
            self.isolated.add(nid)
            for m in self._take(lambda m, nid=nid: nid in (m.frm, m.to)):
                self._lost(m, f"{nid} is isolated", "")

    def cmd_heal(self, d: TestData) -> None:
        self.isolated.clear()

    def _crash(self, node: Node, indent: str) -> None:
        node.raw = None
        node.data = []
        node.applied = 0
        for m in self._take(lambda m: m.to == node.id):
            self._lost(m, f"{node.id} is down", indent)

    def cmd_crash(self, d: TestData) -> None:
        for nid in self._ids(d):
            self._raw(d, nid)
            self._crash(self.nodes[nid], "")

    def cmd_restart(self, d: TestData) -> None:
        for nid in self._ids(d):
            node = self.nodes[nid]
            if node.raw is not None:
                raise d.fail(f"node {nid} is running")
            node.start()
            st = node.storage
            self.emit(
                f"{nid} restarted from storage: {describe_hard_state(st.hard_state)}, "
                f"snapshot {describe_snapshot(st.snapshot())}, last index {st.last_index()}"
            )

    def cmd_compact(self, d: TestData) -> None:
        """Snapshot the state machine at INDEX (default: applied) and compact the log up to it."""
        words = d.positional()
        nid = self._one_id(d)
        node = self.nodes[nid]
        self._raw(d, nid)
        index = int(words[1]) if len(words) > 1 else node.applied
        if index > node.applied:
            raise d.fail(f"cannot snapshot at {index}: node {nid} has applied only {node.applied}")
        payloads = [p for i, p in node.data if i <= index]
        snap = node.storage.create_snapshot(index, node.conf_at(index), _encode_state(payloads))
        node.storage.compact(index)
        self.emit(
            f"{nid}: snapshot {describe_snapshot(snap)} data={payloads}; log starts at {node.storage.first_index()}"
        )

    # ------------------------------------------------------------------ inspection
    def _state_line(self, node: Node) -> str:
        if node.raw is None:
            hs = node.storage.hard_state
            return f"{node.id}: down ({describe_hard_state(hs)}, last index {node.storage.last_index()})"
        r = node.raw.raft
        log = r.log
        last = log.last_index()
        pr = r.prs.get(node.id)
        role = "Voter" if pr is not None and not pr.is_learner else "Learner" if pr is not None else "Not a member"
        iso = " isolated" if node.id in self.isolated else ""
        return (
            f"{node.id}: {STATE_NAMES[r.state]} ({role}) Term:{r.term} Vote:{r.vote} Lead:{r.lead} "
            f"Commit:{log.committed} Applied:{log.applied} Last:{log.term_or_zero(last)}/{last}{iso}"
        )

    def cmd_raft_state(self, d: TestData) -> None:
        for nid in sorted(self.nodes):
            self.emit(self._state_line(self.nodes[nid]))

    def cmd_status(self, d: TestData) -> None:
        nid = self._one_id(d)
        node = self.nodes[nid]
        self.emit(self._state_line(node))
        if node.raw is None:
            return
        r = node.raw.raft
        self.emit(
            f"election elapsed {r.election_elapsed}/{r.randomized_election_timeout} "
            f"(election tick {r.election_timeout}), data={[p for _, p in node.data]}"
        )
        if r.state != StateType.LEADER:
            return
        if r.lead_transferee:
            self.emit(f"transferring leadership to {r.lead_transferee}")
        for pid in sorted(r.prs):
            pr = r.prs[pid]
            s = f"  {pid}: {pr.state.name} match={pr.match} next={pr.next}"
            if pr.is_learner:
                s += " learner"
            if pr.state == ProgressState.SNAPSHOT:
                s += f" pending-snapshot={pr.pending_snapshot}"
            if pr.inflights.count():
                s += f" inflight={pr.inflights.count()}"
            if pr.is_paused():
                s += " paused"
            if pid != r.id and not pr.recent_active:
                s += " inactive"
            self.emit(s)

    def cmd_raft_log(self, d: TestData) -> None:
        nid = self._one_id(d)
        node = self.nodes[nid]
        if node.raw is None:
            st = node.storage
            ents = (
                st.entries(st.first_index(), st.last_index() + 1, 1 << 62)
                if st.last_index() >= st.first_index()
                else []
            )
            snap = st.snapshot()
        else:
            log = node.raw.raft.log
            ents = log.all_entries()
            snap = log.snapshot()
        head = f"{nid}: snapshot at {snap.metadata.term}/{snap.metadata.index}"
        if node.raw is not None:
            head += f", committed {node.raw.raft.log.committed}"
        self.emit(head + ("" if ents else ", no entries after it"))
        for e in ents:
            self.emit(f"  {describe_entry(e)}")
