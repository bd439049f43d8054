"""The Raft state machine: one node's protocol logic, with no I/O and no clock.

Every input is a `Message` passed to `step` (local events are messages too: HUP starts an
election, BEAT a heartbeat round, PROP a proposal) or a `tick` of the logical clock.  Every
output goes to `msgs` or into the log; `RawNode` packs them into a `Ready`.

References are to the Raft paper ("In Search of an Understandable Consensus Algorithm",
§5) and Ongaro's thesis ("Consensus: Bridging Theory and Practice", §3, §4, §6, §9).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from store.raft import quorum
from store.raft.errors import (
    CompactedError,
    ProposalDroppedError,
    SnapshotTemporarilyUnavailableError,
    UnavailableError,
)
from store.raft.log import NO_LIMIT, RaftLog
from store.raft.progress import Progress, ProgressState
from store.raft.read_only import ReadOnly
from store.raft.storage import Storage, entries_size
from store.raft.types import (
    NONE,
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
    SoftState,
    StateType,
    vote_response_type,
)

CAMPAIGN_TRANSFER = b"CampaignTransfer"
"""Context of a VOTE sent after TIMEOUT_NOW: voters skip their leader-lease check."""


# Vote requests and responses carry the term of the election, not always ours.
_TERM_SET_BY_CALLER = frozenset(
    {MessageType.VOTE, MessageType.VOTE_RESP, MessageType.PRE_VOTE, MessageType.PRE_VOTE_RESP}
)
_FORWARDED = frozenset({MessageType.PROP, MessageType.READ_INDEX, MessageType.TRANSFER_LEADER})


class RandomSource(Protocol):
    """The one source of randomness, injected so that a seed replays a run exactly."""

    def randrange(self, start: int, stop: int) -> int: ...


class Canary(Enum):
    """Deliberate bugs, switched on only by tests, to prove the simulator catches them."""

    COMMIT_OLD_TERM_BY_COUNTING = "commit-old-term-by-counting"
    """Commit an entry of an earlier term once a majority holds it (Raft paper, Figure 8)."""
    FORGET_VOTE_ON_RESTART = "forget-vote-on-restart"
    """Ignore the persisted vote when restarting, so a node can vote twice in one term."""
    VOTE_FOR_SHORTER_LOG = "vote-for-shorter-log"
    """Grant votes without the up-to-date check of §5.4.1."""


class CampaignType(Enum):
    PRE_ELECTION = "pre-election"
    ELECTION = "election"
    TRANSFER = "transfer"


@dataclass(slots=True)
class Config:
    """Parameters of one node.  Ticks are the only unit of time the core knows."""

    id: int
    storage: Storage
    rng: RandomSource
    election_tick: int = 10
    """A follower that hears nothing for a random [election_tick, 2*election_tick) ticks campaigns."""
    heartbeat_tick: int = 1
    applied: int = 0
    """The last index the application had applied before (re)starting; entries up to it are not re-delivered."""
    max_size_per_msg: int = 1 << 20
    """Bytes of entry data per append message (at least one entry is always sent)."""
    max_committed_size_per_ready: int = NO_LIMIT
    max_inflight_msgs: int = 256
    max_inflight_bytes: int = NO_LIMIT
    check_quorum: bool = True
    pre_vote: bool = True
    disable_proposal_forwarding: bool = False
    canaries: frozenset[Canary] = field(default_factory=frozenset)

    def validate(self) -> None:
        if self.id == NONE:
            raise ValueError("node id must not be 0 (0 means 'none')")
        if self.heartbeat_tick <= 0:
            raise ValueError("heartbeat_tick must be > 0")
        if self.election_tick <= self.heartbeat_tick:
            raise ValueError("election_tick must be greater than heartbeat_tick")
        if self.max_inflight_msgs <= 0:
            raise ValueError("max_inflight_msgs must be > 0")


class Raft:
    """One node's Raft state.  Not thread-safe; drive it from one place (RawNode)."""

    def __init__(self, c: Config) -> None:
        c.validate()
        self.id = c.id
        self.cfg = c
        self.rng = c.rng
        self.canaries = c.canaries
        self.log = RaftLog(c.storage, c.max_committed_size_per_ready)
        self.max_msg_size = c.max_size_per_msg
        self.check_quorum = c.check_quorum
        self.pre_vote = c.pre_vote
        self.election_timeout = c.election_tick
        self.heartbeat_timeout = c.heartbeat_tick

        self.term = 0
        self.vote = NONE
        self.lead = NONE
        self.state = StateType.FOLLOWER
        self.prs: dict[int, Progress] = {}
        self.votes: dict[int, bool] = {}
        self.msgs: list[Message] = []
        self.read_states: list[ReadState] = []
        self.read_only = ReadOnly()
        # Reads that arrived before this leader committed an entry of its own term (§6.4).
        self.pending_read_index_messages: list[Message] = []
        self.lead_transferee = NONE
        # A conf change may be proposed only once everything up to here is applied.
        self.pending_conf_index = 0
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = 0
        self._step: Callable[[Message], None] = self._step_follower
        self._tick: Callable[[], None] = self._tick_election

        hs, cs = c.storage.initial_state()
        self._restore_conf_state(cs)
        if hs != HardState():
            self._load_hard_state(hs)
        if c.applied > 0:
            self.log.applied_to(c.applied)
        self.become_follower(self.term, NONE)

    # ------------------------------------------------------------------ state views
    def hard_state(self) -> HardState:
        return HardState(term=self.term, vote=self.vote, commit=self.log.committed)

    def soft_state(self) -> SoftState:
        return SoftState(lead=self.lead, raft_state=self.state)

    def conf_state(self) -> ConfState:
        voters = tuple(sorted(i for i, p in self.prs.items() if not p.is_learner))
        learners = tuple(sorted(i for i, p in self.prs.items() if p.is_learner))
        return ConfState(voters=voters, learners=learners)

    def voters(self) -> list[int]:
        return [i for i, p in self.prs.items() if not p.is_learner]

    def promotable(self) -> bool:
        """Can this node become leader: is it a voter in the current configuration?"""
        pr = self.prs.get(self.id)
        return pr is not None and not pr.is_learner

    def _load_hard_state(self, hs: HardState) -> None:
        if hs.commit < self.log.committed or hs.commit > self.log.last_index():
            raise AssertionError(
                f"{self.id}: persisted commit {hs.commit} is out of range "
                f"[{self.log.committed}, {self.log.last_index()}]"
            )
        self.log.committed = hs.commit
        self.term = hs.term
        self.vote = NONE if Canary.FORGET_VOTE_ON_RESTART in self.canaries else hs.vote

    # ------------------------------------------------------------------ sending
    def send(self, m: Message) -> None:
        """Queue `m` for the application to deliver (after it persisted this Ready)."""
        if m.frm == NONE:
            m.frm = self.id
        if m.type in _TERM_SET_BY_CALLER:
            pass
        elif m.type in _FORWARDED:
            # Forwarded requests carry no term: they are local to the leader, whatever
            # term the sender was in.
            m.term = 0
        else:
            m.term = self.term
        self.msgs.append(m)

    def send_append(self, to: int) -> None:
        self.maybe_send_append(to, send_if_empty=True)

    def maybe_send_append(self, to: int, send_if_empty: bool) -> bool:
        """Send the entries `to` is missing (or a snapshot); returns whether anything was sent."""
        pr = self.prs[to]
        if pr.is_paused():
            return False
        prev_index = pr.next - 1
        try:
            prev_term = self.log.term(prev_index)
            ents = self.log.entries(pr.next, self.max_msg_size)
        except CompactedError:
            return self._maybe_send_snapshot(to, pr)
        if not ents and not send_if_empty:
            return False
        self.send(
            Message(
                type=MessageType.APP,
                to=to,
                index=prev_index,
                log_term=prev_term,
                entries=ents,
                commit=self.log.committed,
            )
        )
        # Sizes are only needed when the in-flight window is bounded in bytes.
        size = entries_size(ents) if ents and self.cfg.max_inflight_bytes < NO_LIMIT else 0
        pr.sent_entries(len(ents), size)
        return True

    def _maybe_send_snapshot(self, to: int, pr: Progress) -> bool:
        if not pr.recent_active:
            return False  # no point shipping a snapshot to a node that may be down
        try:
            snap = self.log.snapshot()
        except SnapshotTemporarilyUnavailableError:
            return False
        if snap.is_empty:
            raise AssertionError("need a non-empty snapshot to catch up a follower")
        self.send(Message(type=MessageType.SNAP, to=to, snapshot=snap))
        pr.become_snapshot(snap.metadata.index)
        return True

    def send_heartbeat(self, to: int, ctx: bytes) -> None:
        # A follower may not have all entries up to our commit index yet: never let it
        # commit past what it matches.
        commit = min(self.prs[to].match, self.log.committed)
        self.send(Message(type=MessageType.HEARTBEAT, to=to, commit=commit, context=ctx))

    def bcast_append(self) -> None:
        for pid in self.prs:
            if pid != self.id:
                self.send_append(pid)

    def bcast_heartbeat(self, ctx: bytes | None = None) -> None:
        if ctx is None:
            ctx = self.read_only.last_pending_request_ctx()
        for pid in self.prs:
            if pid != self.id:
                self.send_heartbeat(pid, ctx)

    # ------------------------------------------------------------------ commit
    def maybe_commit(self) -> bool:
        """Advance the commit index to what a quorum of voters has (§5.3, §5.4.2)."""
        mci = quorum.committed_index(self.voters(), {i: p.match for i, p in self.prs.items()})
        if Canary.COMMIT_OLD_TERM_BY_COUNTING in self.canaries:
            if self.log.committed < mci <= self.log.last_index():
                self.log.commit_to(mci)
                return True
            return False
        return self.log.maybe_commit(mci, self.term)

    def committed_entry_in_current_term(self) -> bool:
        return self.log.term_or_zero(self.log.committed) == self.term

    def _on_commit_advanced(self) -> None:
        """Leader: reads deferred until an entry of this term committed may go now."""
        if self.pending_read_index_messages and self.committed_entry_in_current_term():
            pending, self.pending_read_index_messages = self.pending_read_index_messages, []
            for m in pending:
                self._send_read_index(m)

    def append_entry(self, ents: list[Entry]) -> None:
        li = self.log.last_index()
        for i, e in enumerate(ents):
            e.term = self.term
            e.index = li + 1 + i
        li = self.log.append(ents)
        # Counting ourselves before the entries are durable is safe because the
        # application persists a Ready before it applies or sends anything from it.
        self.prs[self.id].maybe_update(li)
        if self.maybe_commit():
            self._on_commit_advanced()

    # ------------------------------------------------------------------ roles
    def reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = NONE
        self.lead = NONE
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.reset_randomized_election_timeout()
        self.abort_leader_transfer()
        self.votes = {}
        last = self.log.last_index()
        for pid, pr in self.prs.items():
            learner = pr.is_learner
            fresh = Progress(last + 1, self.cfg.max_inflight_msgs, self.cfg.max_inflight_bytes, learner)
            if pid == self.id:
                fresh.match = last
            self.prs[pid] = fresh
        self.pending_conf_index = 0
        self.read_only = ReadOnly()
        self.pending_read_index_messages = []

    def reset_randomized_election_timeout(self) -> None:
        self.randomized_election_timeout = self.election_timeout + self.rng.randrange(0, self.election_timeout)

    def become_follower(self, term: int, lead: int) -> None:
        self._step = self._step_follower
        self.reset(term)
        self._tick = self._tick_election
        self.lead = lead
        self.state = StateType.FOLLOWER

    def become_candidate(self) -> None:
        if self.state == StateType.LEADER:
            raise AssertionError("invalid transition [leader -> candidate]")
        self._step = self._step_candidate
        self.reset(self.term + 1)
        self._tick = self._tick_election
        self.vote = self.id
        self.state = StateType.CANDIDATE

    def become_pre_candidate(self) -> None:
        if self.state == StateType.LEADER:
            raise AssertionError("invalid transition [leader -> pre-candidate]")
        # A pre-candidate changes neither term nor vote (thesis §9.6).
        self._step = self._step_candidate
        self.votes = {}
        self._tick = self._tick_election
        self.lead = NONE
        self.state = StateType.PRE_CANDIDATE

    def become_leader(self) -> None:
        if self.state == StateType.FOLLOWER:
            raise AssertionError("invalid transition [follower -> leader]")
        self._step = self._step_leader
        self.reset(self.term)
        self._tick = self._tick_heartbeat
        self.lead = self.id
        self.state = StateType.LEADER
        me = self.prs[self.id]
        me.become_replicate()
        me.recent_active = True
        # An empty entry of our own term: committing it commits everything before it
        # (§5.4.2), and it lets us serve ReadIndex (§6.4).
        self.append_entry([Entry(term=0, index=0)])
        # No membership change until that entry is applied: single-server changes are
        # only safe once the leader has committed an entry of its term (the fix to the
        # bug Ongaro described on raft-dev in 2015).
        self.pending_conf_index = self.log.last_index()

    # ------------------------------------------------------------------ ticks
    def tick(self) -> None:
        self._tick()

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self.promotable() and self.election_elapsed >= self.randomized_election_timeout:
            self.election_elapsed = 0
            self.step(Message(type=MessageType.HUP, frm=self.id))

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.election_elapsed >= self.election_timeout:
            self.election_elapsed = 0
            if self.check_quorum:
                self.step(Message(type=MessageType.CHECK_QUORUM, frm=self.id))
            # A transfer that did not finish within an election timeout is abandoned.
            if self.state == StateType.LEADER and self.lead_transferee != NONE:
                self.abort_leader_transfer()
        if self.state != StateType.LEADER:
            return
        if self.heartbeat_elapsed >= self.heartbeat_timeout:
            self.heartbeat_elapsed = 0
            self.step(Message(type=MessageType.BEAT, frm=self.id))

    # ------------------------------------------------------------------ elections
    def has_unapplied_conf_change(self) -> bool:
        if self.log.applied >= self.log.committed:
            return False
        lo = max(self.log.applied + 1, self.log.first_index())
        try:
            ents = self.log.slice(lo, self.log.committed + 1)
        except (CompactedError, UnavailableError):
            return False
        return any(e.type == EntryType.CONF_CHANGE for e in ents)

    def hup(self, t: CampaignType) -> None:
        if self.state == StateType.LEADER or not self.promotable():
            return
        if self.has_unapplied_conf_change():
            # The configuration we would campaign in may be about to change.
            return
        self.campaign(t)

    def campaign(self, t: CampaignType) -> None:
        if t == CampaignType.PRE_ELECTION:
            self.become_pre_candidate()
            vote_msg = MessageType.PRE_VOTE
            term = self.term + 1  # the term we would run for; not adopted yet
        else:
            self.become_candidate()
            vote_msg = MessageType.VOTE
            term = self.term
        if self.poll(self.id, True) == quorum.VoteResult.WON:
            # A single-voter configuration wins at once.
            if t == CampaignType.PRE_ELECTION:
                self.campaign(CampaignType.ELECTION)
            else:
                self.become_leader()
            return
        ctx = CAMPAIGN_TRANSFER if t == CampaignType.TRANSFER else b""
        last_index, last_term = self.log.last_index(), self.log.last_term()
        for pid in sorted(self.voters()):
            if pid == self.id:
                continue
            self.send(Message(type=vote_msg, to=pid, term=term, index=last_index, log_term=last_term, context=ctx))

    def poll(self, pid: int, granted: bool) -> quorum.VoteResult:
        if pid not in self.votes:
            self.votes[pid] = granted
        return quorum.vote_result(self.voters(), self.votes)

    # ------------------------------------------------------------------ step
    def step(self, m: Message) -> None:
        """Handle one message; raises ProposalDroppedError for a proposal that cannot be taken."""
        if m.term == 0:
            pass  # local message (or a forwarded proposal / read)
        elif m.term > self.term:
            if m.type in (MessageType.VOTE, MessageType.PRE_VOTE):
                force = m.context == CAMPAIGN_TRANSFER
                in_lease = self.check_quorum and self.lead != NONE and self.election_elapsed < self.election_timeout
                if not force and in_lease:
                    # We heard from a leader within the minimum election timeout: do not
                    # let a possibly-partitioned node depose it (thesis §4.2.3).
                    return
            if m.type == MessageType.PRE_VOTE:
                pass  # never change our term because of a pre-vote request
            elif m.type == MessageType.PRE_VOTE_RESP and not m.reject:
                pass  # granted pre-votes carry the future term; we adopt it once we win
            elif m.type in (MessageType.APP, MessageType.HEARTBEAT, MessageType.SNAP):
                self.become_follower(m.term, m.frm)
            else:
                self.become_follower(m.term, NONE)
        elif m.term < self.term:
            if (self.check_quorum or self.pre_vote) and m.type in (MessageType.HEARTBEAT, MessageType.APP):
                # A stale leader (e.g. healed after a partition) would otherwise never
                # learn our term if pre-vote keeps us from disrupting it: tell it.
                self.send(Message(type=MessageType.APP_RESP, to=m.frm))
            elif m.type == MessageType.PRE_VOTE:
                # Tell a lagging pre-candidate our term so that it can catch up.
                self.send(Message(type=MessageType.PRE_VOTE_RESP, to=m.frm, term=self.term, reject=True))
            return

        t = m.type
        if t == MessageType.HUP:
            self.hup(CampaignType.PRE_ELECTION if self.pre_vote else CampaignType.ELECTION)
        elif t in (MessageType.VOTE, MessageType.PRE_VOTE):
            self._handle_vote_request(m)
        else:
            self._step(m)

    def _handle_vote_request(self, m: Message) -> None:
        can_vote = (
            self.vote == m.frm
            or (self.vote == NONE and self.lead == NONE)
            # A pre-vote for a future term is not a vote: grant it whatever we voted.
            or (m.type == MessageType.PRE_VOTE and m.term > self.term)
        )
        up_to_date = Canary.VOTE_FOR_SHORTER_LOG in self.canaries or self.log.is_up_to_date(m.index, m.log_term)
        resp = vote_response_type(m.type)
        if can_vote and up_to_date:
            # The response carries the request's term: a pre-vote grant is for that future term.
            self.send(Message(type=resp, to=m.frm, term=m.term))
            if m.type == MessageType.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
        else:
            self.send(Message(type=resp, to=m.frm, term=self.term, reject=True))

    # ---- leader
    def _step_leader(self, m: Message) -> None:
        t = m.type
        if t == MessageType.BEAT:
            self.bcast_heartbeat()
            return
        if t == MessageType.CHECK_QUORUM:
            if not self._quorum_active():
                self.become_follower(self.term, NONE)
            for pid, peer in self.prs.items():
                if pid != self.id:
                    peer.recent_active = False
            return
        if t == MessageType.PROP:
            self._leader_propose(m)
            return
        if t == MessageType.READ_INDEX:
            if len(self.voters()) == 1 and self.promotable():
                self._response_to_read_index_req(m, self.log.committed)
            elif not self.committed_entry_in_current_term():
                # Our commit index may lag the cluster's until an entry of our term commits.
                self.pending_read_index_messages.append(m)
            else:
                self._send_read_index(m)
            return

        pr = self.prs.get(m.frm)
        if pr is None:
            return  # a response from a node that is not a member (anymore)
        if t == MessageType.APP_RESP:
            self._handle_append_response(m, pr)
        elif t == MessageType.HEARTBEAT_RESP:
            pr.recent_active = True
            # Unpausing lets one append through even with a full window: if every message
            # in the window was lost, this one is how the follower gets going again.
            pr.msg_app_flow_paused = False
            if pr.match < self.log.last_index() or pr.state == ProgressState.PROBE:
                self.send_append(m.frm)
            if m.context:
                acks = self.read_only.recv_ack(m.frm, m.context)
                if acks is not None and self._is_quorum(acks):
                    for rs in self.read_only.advance(m.context):
                        self._response_to_read_index_req(rs.req, rs.index)
        elif t == MessageType.SNAP_STATUS:
            if pr.state != ProgressState.SNAPSHOT:
                return
            if m.reject:
                pr.pending_snapshot = 0
            pr.become_probe()
            # Wait for a heartbeat response before probing again.
            pr.msg_app_flow_paused = True
        elif t == MessageType.UNREACHABLE:
            if pr.state == ProgressState.REPLICATE:
                pr.become_probe()
        elif t == MessageType.TRANSFER_LEADER:
            self._handle_transfer_leader(m, pr)

    def _leader_propose(self, m: Message) -> None:
        if not m.entries:
            raise ProposalDroppedError("empty proposal")
        if self.id not in self.prs:
            raise ProposalDroppedError("this leader was removed from the configuration")
        if self.lead_transferee != NONE:
            raise ProposalDroppedError(f"leadership is being transferred to {self.lead_transferee}")
        for e in m.entries:
            if e.type == EntryType.CONF_CHANGE:
                self._check_conf_change_proposal(e, len(m.entries))
        self.append_entry(m.entries)
        for e in m.entries:
            if e.type == EntryType.CONF_CHANGE:
                self.pending_conf_index = e.index
        self.bcast_append()

    def _check_conf_change_proposal(self, e: Entry, batch_len: int) -> None:
        if batch_len != 1:
            raise ProposalDroppedError("a membership change must be proposed on its own")
        if self.pending_conf_index > self.log.applied:
            raise ProposalDroppedError(
                f"a membership change is pending (index {self.pending_conf_index}, applied {self.log.applied})"
            )
        cc = ConfChange.decode(e.data)
        voters = set(self.voters())
        if cc.type == ConfChangeType.REMOVE_NODE and voters == {cc.node_id}:
            raise ProposalDroppedError(f"removing {cc.node_id} would leave no voter")
        if cc.type == ConfChangeType.ADD_LEARNER and cc.node_id in voters:
            raise ProposalDroppedError(f"{cc.node_id} is a voter; demotion to learner is not supported")

    def _handle_append_response(self, m: Message, pr: Progress) -> None:
        pr.recent_active = True
        if m.reject:
            # Fast backtracking (thesis §5.3 "optimization"): the follower told us the last
            # index at or below the probe where its term is <= ours; find our matching point.
            next_probe = m.reject_hint
            if m.log_term > 0:
                next_probe, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
            if pr.maybe_decr_to(m.index, next_probe):
                if pr.state == ProgressState.REPLICATE:
                    pr.become_probe()
                self.send_append(m.frm)
            return
        was_paused = pr.is_paused()
        # An idle follower probed at its match index answers with that same index: no
        # progress, but the probe succeeded and it can go back to replicating.
        probe_matched = pr.state == ProgressState.PROBE and m.index == pr.match
        if not pr.maybe_update(m.index) and not probe_matched:
            return
        if pr.state == ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state == ProgressState.SNAPSHOT and pr.match + 1 >= self.log.first_index():
            # The follower caught up through the snapshot; replicate from here.
            pr.become_probe()
            pr.become_replicate()
        elif pr.state == ProgressState.REPLICATE:
            pr.inflights.free_le(m.index)
        if self.maybe_commit():
            self._on_commit_advanced()
            self.bcast_append()
        elif was_paused:
            self.send_append(m.frm)
        # Keep the pipe full while there is more to send and room in the window.
        while self.maybe_send_append(m.frm, send_if_empty=False):
            pass
        if m.frm == self.lead_transferee and pr.match == self.log.last_index():
            self.send(Message(type=MessageType.TIMEOUT_NOW, to=m.frm))

    def _handle_transfer_leader(self, m: Message, pr: Progress) -> None:
        if pr.is_learner:
            return
        transferee = m.frm
        if self.lead_transferee != NONE:
            if self.lead_transferee == transferee:
                return  # already under way
            self.abort_leader_transfer()
        if transferee == self.id:
            return
        # The transfer must finish within one election timeout.
        self.election_elapsed = 0
        self.lead_transferee = transferee
        if pr.match == self.log.last_index():
            self.send(Message(type=MessageType.TIMEOUT_NOW, to=transferee))
        else:
            self.send_append(transferee)

    def abort_leader_transfer(self) -> None:
        self.lead_transferee = NONE

    def _quorum_active(self) -> bool:
        return self._is_quorum({pid for pid, pr in self.prs.items() if pid == self.id or pr.recent_active})

    def _is_quorum(self, ids: set[int]) -> bool:
        return quorum.vote_result(self.voters(), dict.fromkeys(ids, True)) == quorum.VoteResult.WON

    def _send_read_index(self, m: Message) -> None:
        if len(self.voters()) == 1:
            self._response_to_read_index_req(m, self.log.committed)
            return
        # Remember the commit index now; it is safe to serve once a heartbeat round
        # confirms we were still leader when the request arrived (thesis §6.4).
        self.read_only.add_request(self.log.committed, m)
        self.read_only.recv_ack(self.id, m.context)
        self.bcast_heartbeat(m.context)

    def _response_to_read_index_req(self, req: Message, read_index: int) -> None:
        if req.frm in (NONE, self.id):
            self.read_states.append(ReadState(index=read_index, request_ctx=req.context))
        else:
            self.send(Message(type=MessageType.READ_INDEX_RESP, to=req.frm, index=read_index, context=req.context))

    # ---- candidate and pre-candidate
    def _step_candidate(self, m: Message) -> None:
        t = m.type
        my_resp = MessageType.PRE_VOTE_RESP if self.state == StateType.PRE_CANDIDATE else MessageType.VOTE_RESP
        if t == MessageType.PROP:
            raise ProposalDroppedError("no leader: an election is under way")
        if t == MessageType.APP:
            self.become_follower(m.term, m.frm)
            self._handle_append(m)
        elif t == MessageType.HEARTBEAT:
            self.become_follower(m.term, m.frm)
            self._handle_heartbeat(m)
        elif t == MessageType.SNAP:
            self.become_follower(m.term, m.frm)
            self._handle_snapshot(m)
        elif t == my_resp:
            res = self.poll(m.frm, not m.reject)
            if res == quorum.VoteResult.WON:
                if self.state == StateType.PRE_CANDIDATE:
                    self.campaign(CampaignType.ELECTION)
                else:
                    self.become_leader()
                    self.bcast_append()
            elif res == quorum.VoteResult.LOST:
                # m.term may be higher than ours for a rejected pre-vote: it was
                # handled in step().  Here the election is simply lost.
                self.become_follower(self.term, NONE)
        elif t in (MessageType.READ_INDEX, MessageType.TRANSFER_LEADER):
            raise ProposalDroppedError("no leader: an election is under way")
        # TIMEOUT_NOW and stray responses are ignored while campaigning.

    # ---- follower
    def _step_follower(self, m: Message) -> None:
        t = m.type
        if t == MessageType.PROP:
            if self.lead == NONE:
                raise ProposalDroppedError("no leader known")
            if self.cfg.disable_proposal_forwarding:
                raise ProposalDroppedError(f"not the leader (leader is {self.lead}) and forwarding is disabled")
            self.send(Message(type=MessageType.PROP, to=self.lead, entries=m.entries))
        elif t == MessageType.APP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_append(m)
        elif t == MessageType.HEARTBEAT:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_heartbeat(m)
        elif t == MessageType.SNAP:
            self.election_elapsed = 0
            self.lead = m.frm
            self._handle_snapshot(m)
        elif t == MessageType.TRANSFER_LEADER:
            if self.lead == NONE:
                raise ProposalDroppedError("no leader to transfer leadership from")
            self.send(Message(type=MessageType.TRANSFER_LEADER, to=self.lead, frm=m.frm))
        elif t == MessageType.TIMEOUT_NOW:
            # The leader asked us to take over: campaign at once, without pre-vote, and
            # tell voters to ignore their leader lease.
            self.hup(CampaignType.TRANSFER)
        elif t == MessageType.READ_INDEX:
            if self.lead == NONE:
                raise ProposalDroppedError("no leader to confirm a read index")
            self.send(Message(type=MessageType.READ_INDEX, to=self.lead, context=m.context))
        elif t == MessageType.READ_INDEX_RESP:
            self.read_states.append(ReadState(index=m.index, request_ctx=m.context))

    def _handle_append(self, m: Message) -> None:
        if m.index < self.log.committed:
            # Everything up to our commit index already matches the leader's log.
            self.send(Message(type=MessageType.APP_RESP, to=m.frm, index=self.log.committed))
            return
        last_new = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self.send(Message(type=MessageType.APP_RESP, to=m.frm, index=last_new))
            return
        hint_index, hint_term = self.log.find_conflict_by_term(min(m.index, self.log.last_index()), m.log_term)
        self.send(
            Message(
                type=MessageType.APP_RESP,
                to=m.frm,
                index=m.index,
                reject=True,
                reject_hint=hint_index,
                log_term=hint_term,
            )
        )

    def _handle_heartbeat(self, m: Message) -> None:
        self.log.commit_to(m.commit)
        self.send(Message(type=MessageType.HEARTBEAT_RESP, to=m.frm, context=m.context))

    def _handle_snapshot(self, m: Message) -> None:
        assert m.snapshot is not None
        if self.restore(m.snapshot):
            self.send(Message(type=MessageType.APP_RESP, to=m.frm, index=self.log.last_index()))
        else:
            self.send(Message(type=MessageType.APP_RESP, to=m.frm, index=self.log.committed))

    def restore(self, s: Snapshot) -> bool:
        """Install a leader's snapshot; False when it is stale or our log already has it."""
        meta = s.metadata
        if meta.index <= self.log.committed:
            return False
        # We may be missing from the snapshot's configuration: a member added after the
        # leader's last snapshot.  That is fine: we install it, cannot campaign (we are not
        # a voter in it), and learn of our own addition from the entries that follow.
        if self.log.match_term(meta.index, meta.term):
            # We already have the entry: just fast-forward the commit index.
            self.log.commit_to(meta.index)
            return False
        self.log.restore(s)
        self.prs = {}
        self._restore_conf_state(meta.conf_state)
        return True

    # ------------------------------------------------------------------ membership
    def _restore_conf_state(self, cs: ConfState) -> None:
        last = self.log.last_index()
        for v in cs.voters:
            self._add_progress(v, last, learner=False)
        for lrn in cs.learners:
            self._add_progress(lrn, last, learner=True)

    def _add_progress(self, pid: int, last: int, learner: bool) -> None:
        pr = Progress(last + 1, self.cfg.max_inflight_msgs, self.cfg.max_inflight_bytes, learner)
        if pid == self.id:
            pr.match = last
        # Count a newly added node as active so that CheckQuorum does not depose us
        # before it has had a chance to answer.
        pr.recent_active = True
        self.prs[pid] = pr

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        """Apply a committed membership change (called by the application as it applies it)."""
        pid = cc.node_id
        last = self.log.last_index()
        if cc.type == ConfChangeType.ADD_NODE:
            pr = self.prs.get(pid)
            if pr is None:
                self._add_progress(pid, last, learner=False)
            elif pr.is_learner:
                pr.is_learner = False  # promotion: it keeps its replication state
        elif cc.type == ConfChangeType.ADD_LEARNER:
            if pid not in self.prs:
                self._add_progress(pid, last, learner=True)
        elif cc.type == ConfChangeType.REMOVE_NODE:
            self.prs.pop(pid, None)
            if pid == self.lead_transferee:
                self.abort_leader_transfer()
            if pid == self.id and self.state == StateType.LEADER:
                # A removed leader steps down; the rest elect a new one (thesis §4.2.2).
                self.become_follower(self.term, NONE)
                return self.conf_state()
        if self.state == StateType.LEADER:
            # The quorum may have changed: the commit index can move.
            if self.maybe_commit():
                self._on_commit_advanced()
                self.bcast_append()
        return self.conf_state()

    # ------------------------------------------------------------------ debugging
    def __repr__(self) -> str:
        return (
            f"Raft(id={self.id}, term={self.term}, vote={self.vote}, state={self.state.name}, "
            f"lead={self.lead}, log={self.log!r})"
        )
