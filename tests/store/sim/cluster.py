"""The deterministic cluster simulator: N Raft cores, a fake network and fake disks, one seed.

Every choice — which message is delivered, dropped or duplicated, which node ticks, crashes
or restarts, where the network splits — comes from one `random.Random(seed)`, so a seed
replays a run exactly.  Safety invariants are checked on every event (see `invariants`);
at the end the cluster is healed and must converge (liveness) with every acknowledged
proposal applied exactly once on every member.

Run one seed with a readable trace:  python -m tests.store.sim.run --seed 42 --nodes 3 --trace
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from store.raft import Canary, ConfChange, ConfChangeType, ProposalDroppedError, RawNode, Ready
from store.raft.describe import describe_entries, describe_hard_state, describe_message
from store.raft.errors import CompactedError, StepPeerNotFoundError, UnavailableError
from store.raft.types import EntryType, Message, MessageType, StateType
from tests.store.sim.invariants import Checker, InvariantViolation, is_proposal
from tests.store.sim.network import SimNetwork
from tests.store.sim.node import SimNode, decode_state


@dataclass(frozen=True)
class Profile:
    """Relative weights of the simulator's actions (0 switches an action off)."""

    tick_all: float = 10
    tick_one: float = 3
    deliver: float = 25
    deliver_many: float = 12
    drop: float = 3
    duplicate: float = 2
    ready: float = 20
    ready_all: float = 10
    propose: float = 8
    read: float = 2
    partition: float = 1
    heal: float = 1.5
    crash: float = 0.7
    restart: float = 1.5
    compact: float = 1
    conf_change: float = 0.6
    transfer: float = 0.3
    crash_leader: float = 0.0
    crash_in_ready: float = 0.01
    """Chance that a node crashes while handling a Ready (after or while persisting it)."""
    leader_crash_in_ready: float = 0.0
    """Extra chance for a leader: its new entries reach its disk but no follower."""
    torn_write_share: float = 0.3
    """Share of crashes that happen in the middle of persisting a Ready."""
    max_size_per_msg: int = 64
    """Bytes of entries per append: small values split appends into many messages."""


DEFAULT_PROFILE = Profile()
CALM_PROFILE = Profile(drop=0, duplicate=0, partition=0, crash=0, conf_change=0, transfer=0)
CHURN_PROFILE = Profile(
    tick_all=14,
    partition=2,
    heal=4,
    crash=0.5,
    crash_leader=1.5,
    restart=5,
    compact=0.3,
    conf_change=0.2,
    max_size_per_msg=16,
)
"""Leader churn: the leader is crashed or cut off often, and appends carry one entry each."""
FIGURE8_PROFILE = Profile(
    tick_all=14,
    drop=8,
    partition=3,
    heal=4,
    crash=0.5,
    crash_leader=0.5,
    leader_crash_in_ready=0.1,
    restart=5,
    propose=12,
    read=0,
    compact=0,
    conf_change=0,
    max_size_per_msg=16,
)
"""Leaders die right after appending and messages carry one entry: old-term entries pile up
in logs and get re-replicated by later leaders, the situation of the Raft paper's Figure 8."""
PROFILES = {"default": DEFAULT_PROFILE, "churn": CHURN_PROFILE, "figure8": FIGURE8_PROFILE}


@dataclass
class RunResult:
    seed: int
    steps: int
    proposals_acked: int
    leaders: int
    max_term: int
    crashes: int
    snapshots_installed: int
    conf_changes: int
    reads_checked: int


@dataclass
class _Stats:
    crashes: int = 0
    snapshots_installed: int = 0
    conf_changes: int = 0
    reads_checked: int = 0


@dataclass
class _PendingRead:
    node: int
    required: int


@dataclass
class Simulator:
    seed: int
    n_nodes: int = 3
    profile: Profile = DEFAULT_PROFILE
    canaries: frozenset[Canary] = frozenset()
    trace: bool = False
    max_voters: int = 5
    election_tick: int = 10
    max_inflight: int = 8

    rng: random.Random = field(init=False)
    net: SimNetwork = field(init=False)
    nodes: dict[int, SimNode] = field(init=False)
    checker: Checker = field(init=False)
    log: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.net = SimNetwork(self.rng)
        self.checker = Checker()
        self.log = []
        self.nodes = {}
        self.step_no = 0
        self.next_payload = 0
        self.next_read = 0
        self.acked: dict[bytes, int] = {}
        self.proposed_by: dict[bytes, int] = {}
        self.reads: dict[bytes, _PendingRead] = {}
        self.retired: set[int] = set()
        self.stats = _Stats()
        self.last_leader_term: dict[int, int] = {}
        voters = list(range(1, self.n_nodes + 1))
        self.checker.on_bootstrap(1)
        for nid in voters:
            node = self._new_node(nid)
            node.start().bootstrap(voters)
            # Provisioning writes the initial configuration to disk before the member
            # serves anything, as `raftkube store up` does.
            self.process_ready(node)
        self.next_id = self.n_nodes + 1
        self._actions: list[tuple[float, Callable[[], None]]] = [
            (w, fn)
            for w, fn in (
                (self.profile.tick_all, self.act_tick_all),
                (self.profile.tick_one, self.act_tick_one),
                (self.profile.deliver, self.act_deliver),
                (self.profile.deliver_many, self.act_deliver_many),
                (self.profile.drop, self.act_drop),
                (self.profile.duplicate, self.act_duplicate),
                (self.profile.ready, self.act_ready),
                (self.profile.ready_all, self.act_ready_all),
                (self.profile.propose, self.act_propose),
                (self.profile.read, self.act_read),
                (self.profile.partition, self.act_partition),
                (self.profile.heal, self.act_heal),
                (self.profile.crash, self.act_crash),
                (self.profile.restart, self.act_restart),
                (self.profile.compact, self.act_compact),
                (self.profile.conf_change, self.act_conf_change),
                (self.profile.transfer, self.act_transfer),
                (self.profile.crash_leader, self.act_crash_leader),
            )
            if w > 0
        ]
        self._weights = [w for w, _ in self._actions]
        self._fns = [fn for _, fn in self._actions]

    # ------------------------------------------------------------------ helpers
    def _new_node(self, nid: int) -> SimNode:
        node = SimNode(
            nid,
            random.Random(self.seed * 1_000_003 + nid),
            self.canaries,
            self.election_tick,
            self.max_inflight,
            self.profile.max_size_per_msg,
        )
        self.nodes[nid] = node
        return node

    def note(self, text: str) -> None:
        if self.trace:
            self.log.append(f"[{self.step_no:5d}] {text}")

    def alive(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.raw is not None]

    def members(self) -> list[int]:
        """Ids in the configuration as the most advanced alive node sees it."""
        best: RawNode | None = None
        for n in self.alive():
            assert n.raw is not None
            if best is None or n.raw.raft.log.applied > best.raft.log.applied:
                best = n.raw
        if best is None:
            return sorted(i for i in self.nodes if i not in self.retired)
        return sorted(best.raft.prs)

    def leader(self) -> SimNode | None:
        """The alive leader with the highest term, if any."""
        best: SimNode | None = None
        for n in self.alive():
            assert n.raw is not None
            r = n.raw.raft
            if r.state == StateType.LEADER and (best is None or r.term > best.raw.raft.term):  # type: ignore[union-attr]
                best = n
        return best

    def _raw(self, node: SimNode) -> RawNode:
        assert node.raw is not None
        return node.raw

    # ------------------------------------------------------------------ running
    def run(self, steps: int) -> RunResult:
        """Run `steps` random actions, then settle; raises InvariantViolation on any failure."""
        try:
            for _ in range(steps):
                self.step()
            self.settle()
        except InvariantViolation:
            raise
        except Exception as e:
            # The core refusing to go on (an assertion, an index out of range) is a failure
            # of the run like any broken invariant, and replays from the seed the same way.
            self.note(f"core raised {type(e).__name__}: {e}")
            raise InvariantViolation(f"core raised {type(e).__name__}: {e}") from e
        return self.result()

    def step(self) -> None:
        self.step_no += 1
        fn = self.rng.choices(self._fns, self._weights)[0]
        fn()
        self._after_step()

    def _after_step(self) -> None:
        for n in self.alive():
            r = self._raw(n).raft
            self.checker.on_commit_index(n.id, n.incarnation, r.log.committed)
            if r.state == StateType.LEADER and self.last_leader_term.get(n.id) != r.term:
                self.last_leader_term[n.id] = r.term
                self._check_new_leader(n)

    def _check_new_leader(self, n: SimNode) -> None:
        r = self._raw(n).raft
        first = r.log.first_index()
        terms = {i: r.log.term_or_zero(i) for i in range(first, r.log.last_index() + 1)}
        self.note(f"{n.id} is leader of term {r.term}")
        self.checker.on_leader(n.id, r.term, terms, first, first - 1)

    def result(self) -> RunResult:
        return RunResult(
            seed=self.seed,
            steps=self.step_no,
            proposals_acked=len(self.acked),
            leaders=len(self.checker.leader_of_term),
            max_term=max(self.checker.leader_of_term, default=0),
            crashes=self.stats.crashes,
            snapshots_installed=self.stats.snapshots_installed,
            conf_changes=self.stats.conf_changes,
            reads_checked=self.stats.reads_checked,
        )

    # ------------------------------------------------------------------ actions
    def act_tick_all(self) -> None:
        for n in self.alive():
            self._raw(n).tick()

    def act_tick_one(self) -> None:
        alive = self.alive()
        if alive:
            self._raw(self.rng.choice(alive)).tick()

    def act_deliver(self) -> None:
        if not self.net.inflight:
            return
        self.deliver(self.net.pick())

    def act_deliver_many(self) -> None:
        """A network round: most messages arrive, in random order; the rest stay delayed."""
        inflight = self.net.inflight
        if not inflight:
            return
        self.rng.shuffle(inflight)
        arriving: list[Message] = []
        keep: list[Message] = []
        for m in inflight:
            (keep if self.rng.random() < 0.3 else arriving).append(m)
        self.net.inflight = keep
        for m in arriving:
            self.net.inflight.append(m)
            self.deliver(len(self.net.inflight) - 1)

    def deliver(self, i: int) -> None:
        m = self.net.take(i)
        dst = self.nodes.get(m.to)
        if dst is None or dst.raw is None or not self.net.link_up(m.frm, m.to):
            self._lost(m)
            return
        self.note(f"deliver {describe_message(m)}")
        try:
            dst.raw.step(m)
        except ProposalDroppedError:
            pass  # a forwarded proposal the receiver could not take: lost, like on a real network
        except StepPeerNotFoundError:
            pass  # a response from a node removed from the configuration
        if m.type == MessageType.SNAP:
            # The transport reports a snapshot stream that reached its peer.
            src = self.nodes.get(m.frm)
            if src is not None and src.raw is not None:
                src.raw.report_snapshot(m.to, failed=False)

    def _lost(self, m: Message) -> None:
        self.note(f"lost {describe_message(m)}")
        if m.type == MessageType.SNAP:
            # The transport notices a failed snapshot stream and tells the sender.
            src = self.nodes.get(m.frm)
            if src is not None and src.raw is not None:
                src.raw.report_snapshot(m.to, failed=True)

    def act_drop(self) -> None:
        if self.net.inflight:
            self._lost(self.net.take(self.net.pick()))

    def act_duplicate(self) -> None:
        if not self.net.inflight:
            return
        m = self.net.inflight[self.net.pick()]
        # Client requests are never duplicated: our transport delivers each frame at most
        # once, and proposals are not idempotent (the application de-duplicates by id).
        if m.type in (MessageType.PROP, MessageType.READ_INDEX):
            return
        self.net.inflight.append(m)

    def act_ready(self) -> None:
        candidates = [n for n in self.alive() if self._raw(n).has_ready()]
        if not candidates:
            return
        node = self.rng.choice(candidates)
        crash_at = None
        p = self.profile.crash_in_ready
        if self._raw(node).raft.state == StateType.LEADER:
            p += self.profile.leader_crash_in_ready
        if p > 0 and self.rng.random() < p:
            crash_at = "torn" if self.rng.random() < self.profile.torn_write_share else "after-persist"
        self.process_ready(node, crash_at)

    def act_ready_all(self) -> None:
        nodes = self.alive()
        self.rng.shuffle(nodes)
        for n in nodes:
            if n.raw is not None and n.raw.has_ready():
                self.process_ready(n)

    def process_ready(self, node: SimNode, crash_at: str | None = None) -> None:
        raw = self._raw(node)
        rd = raw.ready()
        self._persist(node, rd, crash_at)
        if node.raw is None:
            return  # crashed while persisting
        if crash_at == "after-persist":
            self.crash(node, "after persisting a Ready, before sending")
            return
        self._send(node, rd)
        if self._apply(node, rd):
            self.note(f"{node.id} retired after applying its removal")
            node.crash()
            for m in self.net.drop_to(node.id):
                self._lost(m)
            return
        raw.advance(rd)

    def _persist(self, node: SimNode, rd: Ready, crash_at: str | None) -> None:
        disk = node.disk
        if rd.snapshot is not None:
            self.note(f"{node.id} persist snapshot at {rd.snapshot.metadata.index}")
            disk.apply_snapshot(rd.snapshot)
        if rd.entries:
            ents = rd.entries
            if crash_at == "torn":
                ents = ents[: self.rng.randrange(len(ents))]
            if ents:
                try:
                    prev_term: int | None = disk.term(ents[0].index - 1)
                except (CompactedError, UnavailableError):
                    prev_term = None
                self.note(f"{node.id} persist {describe_entries(ents)}")
                disk.append(ents)
                self.checker.on_persist_entries(node.id, ents, prev_term)
            if crash_at == "torn":
                self.crash(node, f"torn write: {len(ents)} of {len(rd.entries)} entries persisted")
                return
        if rd.hard_state is not None:
            self.checker.on_persist_hard_state(node.id, node.durable_hs, rd.hard_state)
            self.note(f"{node.id} persist {describe_hard_state(rd.hard_state)}")
            disk.set_hard_state(rd.hard_state)
            node.durable_hs = rd.hard_state

    def _send(self, node: SimNode, rd: Ready) -> None:
        disk = node.disk
        for m in rd.messages:
            durable_last = disk.last_index()
            self.checker.on_send(node.id, m, node.durable_hs, durable_last)
            if self.net.send(m):
                self.note(f"send {describe_message(m)}")
            else:
                self._lost(m)

    def _apply(self, node: SimNode, rd: Ready) -> bool:
        """Apply `rd`; True when the node applied its own removal and is to be stopped."""
        raw = self._raw(node)
        if rd.snapshot is not None:
            idx = rd.snapshot.metadata.index
            state = decode_state(rd.snapshot.data)
            self.checker.on_install_snapshot(node.id, idx, state)
            node.sm = state
            node.applied = idx
            self.stats.snapshots_installed += 1
        for e in rd.committed_entries:
            self.checker.on_apply(node.id, e)
            node.applied = e.index
            if e.type == EntryType.CONF_CHANGE:
                cc = ConfChange.decode(e.data)
                raw.apply_conf_change(cc)
                self.note(f"{node.id} apply conf change {cc.type.name} {cc.node_id}")
                if cc.type == ConfChangeType.REMOVE_NODE and cc.node_id == node.id:
                    # The operator stops a member once it has applied its own removal.
                    self.retired.add(node.id)
            elif is_proposal(e):
                node.sm.append(e.data)
                if self.proposed_by.get(e.data) == node.id and e.data not in self.acked:
                    self.acked[e.data] = e.index
        for rs in rd.read_states:
            pending = self.reads.pop(rs.request_ctx, None)
            if pending is not None:
                self.checker.on_read(node.id, rs.index, pending.required)
                self.stats.reads_checked += 1
        return node.id in self.retired

    def act_propose(self) -> None:
        alive = self.alive()
        if not alive:
            return
        leader = self.leader()
        node = leader if leader is not None and self.rng.random() < 0.8 else self.rng.choice(alive)
        count = self.rng.choice((1, 1, 1, 2, 5))
        payloads = []
        for _ in range(count):
            self.next_payload += 1
            payloads.append(b"p%d" % self.next_payload)
        try:
            self._raw(node).propose_many(payloads)
        except ProposalDroppedError:
            self.note(f"{node.id} dropped proposal {payloads}")
            return
        for p in payloads:
            self.proposed_by[p] = node.id
        self.note(f"{node.id} propose {payloads}")

    def act_read(self) -> None:
        alive = self.alive()
        if not alive:
            return
        node = self.rng.choice(alive)
        self.next_read += 1
        ctx = b"r%d" % self.next_read
        try:
            self._raw(node).read_index(ctx)
        except ProposalDroppedError:
            return
        # Anything applied anywhere is committed, and may have been acknowledged to a client.
        self.reads[ctx] = _PendingRead(node.id, self.checker.max_applied)
        self.note(f"{node.id} read_index {ctx.decode()} (must cover {self.checker.max_applied})")

    def act_partition(self) -> None:
        ids = sorted(n.id for n in self.alive())
        if len(ids) < 2:
            return
        kind = self.rng.choice(("isolate", "isolate-leader", "split", "one-way"))
        if kind == "isolate-leader":
            leader = self.leader()
            victim = leader.id if leader is not None else self.rng.choice(ids)
            self.net.isolate(victim, list(self.nodes))
            self.note(f"partition: isolate leader {victim}")
        elif kind == "isolate":
            victim = self.rng.choice(ids)
            self.net.isolate(victim, list(self.nodes))
            self.note(f"partition: isolate {victim}")
        elif kind == "split":
            shuffled = list(ids)
            self.rng.shuffle(shuffled)
            cut = self.rng.randrange(1, len(shuffled))
            a, b = sorted(shuffled[:cut]), sorted(shuffled[cut:])
            self.net.split(a, b)
            self.note(f"partition: {a} | {b}")
        else:
            a, b = self.rng.sample(ids, 2)
            self.net.block_one_way(a, b)
            self.note(f"partition: {a} -> {b} blocked")

    def act_heal(self) -> None:
        if self.net.blocked:
            self.net.heal()
            self.note("heal network")

    def act_crash(self) -> None:
        alive = self.alive()
        if alive:
            self.crash(self.rng.choice(alive), "crash")

    def act_crash_leader(self) -> None:
        leader = self.leader()
        if leader is not None:
            self.crash(leader, "crash the leader")

    def crash(self, node: SimNode, why: str) -> None:
        self.note(f"{node.id} {why} (unpersisted state lost)")
        node.crash()
        for m in self.net.drop_to(node.id):
            self._lost(m)
        self.stats.crashes += 1
        self.reads = {k: v for k, v in self.reads.items() if v.node != node.id}

    def act_restart(self) -> None:
        dead = [n for n in self.nodes.values() if n.raw is None and n.id not in self.retired]
        if dead:
            node = self.rng.choice(dead)
            node.start()
            self.note(f"{node.id} restart from disk: {describe_hard_state(node.disk.hard_state)}")

    def act_compact(self) -> None:
        alive = self.alive()
        if not alive:
            return
        node = self.rng.choice(alive)
        snap = node.make_snapshot(self._raw(node).raft.conf_state())
        if snap is not None:
            self.note(f"{node.id} snapshot + compact at {snap.metadata.index}")

    def act_conf_change(self) -> None:
        leader = self.leader()
        if leader is None:
            return
        r = self._raw(leader).raft
        voters = [i for i, p in r.prs.items() if not p.is_learner]
        learners = [i for i, p in r.prs.items() if p.is_learner]
        caught_up = [i for i in learners if r.prs[i].match >= r.log.committed]
        if caught_up:
            cc = ConfChange(ConfChangeType.ADD_NODE, self.rng.choice(caught_up))
        elif not learners and len(voters) < self.max_voters and self.rng.random() < 0.5:
            cc = ConfChange(ConfChangeType.ADD_LEARNER, self.next_id)
        elif len(voters) > 1 and not learners:
            cc = ConfChange(ConfChangeType.REMOVE_NODE, self.rng.choice(voters))
        else:
            return
        try:
            self._raw(leader).propose_conf_change(cc)
        except ProposalDroppedError as e:
            self.note(f"{leader.id} dropped conf change {cc.type.name} {cc.node_id}: {e}")
            return
        if cc.type == ConfChangeType.ADD_LEARNER:
            # A new member starts with an empty disk and waits to hear from the leader.
            self._new_node(self.next_id).start()
            self.next_id += 1
        self.stats.conf_changes += 1
        self.note(f"{leader.id} propose conf change {cc.type.name} {cc.node_id}")

    def act_transfer(self) -> None:
        leader = self.leader()
        if leader is None:
            return
        r = self._raw(leader).raft
        others = [i for i, p in r.prs.items() if not p.is_learner and i != leader.id]
        if others:
            target = self.rng.choice(others)
            self._raw(leader).transfer_leader(target)
            self.note(f"{leader.id} transfer leadership to {target}")

    # ------------------------------------------------------------------ the end
    def settle(self, max_rounds: int = 3000) -> None:
        """Heal everything, restart every member, and require convergence (liveness)."""
        self.note("settle: heal, restart all, run to convergence")
        self.net.heal()
        for n in self.nodes.values():
            if n.raw is None and n.id not in self.retired:
                n.start()
        final: bytes | None = None
        proposed_at = 0
        for rnd in range(max_rounds):
            self.step_no += 1
            progressed = self._drain()
            if not progressed:
                for n in self.alive():
                    self._raw(n).tick()
            self._after_step()
            leader = self.leader()
            if leader is None:
                continue
            if final is not None and final not in self.acked and rnd - proposed_at > 100:
                # Like a client after a timeout: the proposal may have been lost with a
                # deposed leader's log, so write again (a new, unique value).
                final = None
            if final is None:
                proposed_at = rnd
                self.next_payload += 1
                candidate = b"final%d" % self.next_payload
                try:
                    self._raw(leader).propose(candidate)
                except ProposalDroppedError:
                    continue
                self.proposed_by[candidate] = leader.id
                final = candidate
                continue
            if self._converged(final):
                self.note(f"settled after {rnd} rounds")
                self.check_exactly_once()
                return
        raise InvariantViolation(
            f"liveness: no convergence {max_rounds} rounds after healing (final write acked: {final in self.acked})"
        )

    def _drain(self) -> bool:
        progressed = False
        for _ in range(200):
            moved = False
            for n in list(self.alive()):
                if n.raw is not None and n.raw.has_ready():
                    self.process_ready(n)
                    moved = True
            while self.net.inflight:
                self.deliver(0)
                moved = True
            if not moved:
                break
            progressed = True
        return progressed

    def _converged(self, final: bytes) -> bool:
        if final not in self.acked:
            return False
        members = self.members()
        target = self.acked[final]
        for nid in members:
            n = self.nodes.get(nid)
            if n is None or n.raw is None or n.applied < target:
                return False
        return True

    def check_exactly_once(self) -> None:
        members = self.members()
        for nid in members:
            n = self.nodes[nid]
            seen: dict[bytes, int] = {}
            for p in n.sm:
                seen[p] = seen.get(p, 0) + 1
            dups = [p for p, c in seen.items() if c > 1]
            if dups:
                raise InvariantViolation(f"exactly once: node {nid} applied {dups[:3]} more than once")
            missing = [p for p in self.acked if p not in seen]
            if missing:
                raise InvariantViolation(f"exactly once: node {nid} lacks acknowledged {missing[:3]}")
