"""The Ready contract: what must be persisted together with which messages, and what may be applied."""

from __future__ import annotations

from store.raft import MemoryStorage, RawNode
from store.raft.types import ConfState, Entry, HardState, Message, MessageType, SoftState, StateType
from tests.store.raft.harness import drain_ready, make_config, new_node, storage_with_log


def test_bootstrap_first_ready_carries_initial_snapshot_and_hard_state() -> None:
    """bootstrap hands out the initial configuration as a snapshot at 1/1 with term 1, commit 1."""
    storage = MemoryStorage()
    node = RawNode(make_config(1, storage))
    node.bootstrap([3, 1, 2])
    rd = node.ready()
    assert rd.snapshot is not None
    assert (rd.snapshot.metadata.index, rd.snapshot.metadata.term) == (1, 1)
    assert rd.snapshot.metadata.conf_state == ConfState(voters=(1, 2, 3))
    assert rd.hard_state == HardState(term=1, vote=0, commit=1)
    assert rd.must_sync
    assert (rd.entries, rd.committed_entries, rd.messages) == ([], [], [])
    storage.apply_snapshot(rd.snapshot)
    storage.set_hard_state(rd.hard_state)
    node.advance(rd)
    assert not node.has_ready()
    restarted = RawNode(make_config(1, storage))
    assert restarted.raft.conf_state() == ConfState(voters=(1, 2, 3))
    assert (restarted.raft.term, restarted.raft.log.committed) == (1, 1)


def test_vote_response_comes_with_the_hard_state_that_records_the_vote() -> None:
    """A node granting a vote gets HardState(term, vote) in the same Ready as its MsgVoteResp, with must_sync."""
    node = new_node(3, storage_with_log([1, 2, 3], []))
    node.step(Message(type=MessageType.VOTE, frm=1, to=3, term=2, index=1, log_term=1))
    rd = node.ready()
    assert rd.hard_state == HardState(term=2, vote=1, commit=1)
    assert rd.must_sync
    assert [(m.type, m.to, m.term, m.reject) for m in rd.messages] == [(MessageType.VOTE_RESP, 1, 2, False)]


def test_candidate_persists_its_own_vote_with_its_vote_requests() -> None:
    """A candidate's Ready carries HardState(term+1, vote=self) together with its MsgVote requests."""
    node = new_node(1, storage_with_log([1, 2, 3], []), pre_vote=False)
    node.campaign()
    rd = node.ready()
    assert rd.hard_state == HardState(term=2, vote=1, commit=1)
    assert rd.must_sync
    assert rd.soft_state == SoftState(lead=0, raft_state=StateType.CANDIDATE)
    assert sorted((m.type, m.to) for m in rd.messages) == [(MessageType.VOTE, 2), (MessageType.VOTE, 3)]


def test_follower_append_response_comes_with_the_entries_to_persist() -> None:
    """A follower's MsgAppResp is in the same Ready as the entries it acknowledges (which must be synced first)."""
    node = new_node(2, storage_with_log([1, 2, 3], [], HardState(term=2, vote=1, commit=1)))
    ents = [Entry(term=2, index=2, data=b"a"), Entry(term=2, index=3, data=b"b")]
    node.step(Message(type=MessageType.APP, frm=1, to=2, term=2, index=1, log_term=1, entries=ents, commit=1))
    rd = node.ready()
    assert [(e.index, e.data) for e in rd.entries] == [(2, b"a"), (3, b"b")]
    assert [(m.type, m.index, m.reject) for m in rd.messages] == [(MessageType.APP_RESP, 3, False)]
    assert rd.must_sync
    assert rd.committed_entries == []


def test_committed_entries_are_in_storage_or_in_the_same_ready() -> None:
    """committed_entries only name entries that are already stored or are persisted by that very Ready."""
    storage = storage_with_log([1, 2, 3], [2, 2], HardState(term=2, vote=1, commit=1))
    node = new_node(2, storage)
    new = [Entry(term=2, index=4, data=b"c"), Entry(term=2, index=5, data=b"d")]
    node.step(Message(type=MessageType.APP, frm=1, to=2, term=2, index=3, log_term=2, entries=new, commit=5))
    rd = node.ready()
    assert [e.index for e in rd.committed_entries] == [2, 3, 4, 5]
    stored = {(i, storage.term(i)) for i in range(storage.first_index(), storage.last_index() + 1)}
    in_ready = {(e.index, e.term) for e in rd.entries}
    assert stored == {(2, 2), (3, 2)}
    assert in_ready == {(4, 2), (5, 2)}
    for e in rd.committed_entries:
        assert (e.index, e.term) in stored | in_ready
    assert rd.hard_state == HardState(term=2, vote=1, commit=5)


def test_committed_entries_never_run_ahead_of_the_log() -> None:
    """A heartbeat cannot make a follower commit (or apply) past the entries it holds."""
    node = new_node(2, storage_with_log([1, 2, 3], [2], HardState(term=2, vote=1, commit=1)))
    node.step(Message(type=MessageType.HEARTBEAT, frm=1, to=2, term=2, commit=2))
    rd = node.ready()
    assert [e.index for e in rd.committed_entries] == [2]
    assert node.raft.log.committed == 2


def test_has_ready_is_false_after_advance_when_nothing_happened() -> None:
    """After a Ready is processed and advanced, has_ready() is False until something new happens."""
    storage = storage_with_log([1, 2, 3], [], HardState(term=2, vote=1, commit=1))
    node = new_node(2, storage)
    assert not node.has_ready()
    ents = [Entry(term=2, index=2, data=b"a")]
    node.step(Message(type=MessageType.APP, frm=1, to=2, term=2, index=1, log_term=1, entries=ents, commit=2))
    assert node.has_ready()
    rd = node.ready()
    storage.append(rd.entries)
    assert rd.hard_state is not None
    storage.set_hard_state(rd.hard_state)
    node.advance(rd)
    assert not node.has_ready()
    assert node.raft.log.applied == 2
    assert node.raft.log.unstable_entries() == []
    node.tick()
    assert not node.has_ready()


def test_messages_are_handed_out_once() -> None:
    """ready() transfers the pending messages: a second Ready does not repeat them."""
    node = new_node(1, storage_with_log([1, 2, 3], []))
    node.campaign()
    first = node.ready()
    assert len(first.messages) == 2
    node.advance(first)
    assert not node.has_ready()
    assert node.ready().messages == []


def test_commit_only_change_needs_no_sync() -> None:
    """A HardState that only moves the commit index is reported, but must_sync stays False."""
    storage = storage_with_log([1, 2, 3], [2], HardState(term=2, vote=1, commit=1))
    node = new_node(2, storage)
    node.step(Message(type=MessageType.HEARTBEAT, frm=1, to=2, term=2, commit=2))
    rd = node.ready()
    assert rd.hard_state == HardState(term=2, vote=1, commit=2)
    assert rd.entries == []
    assert not rd.must_sync


def test_committed_entries_respect_max_committed_size_per_ready() -> None:
    """max_committed_size_per_ready splits committed entries over several Readies, in order."""
    storage = storage_with_log([1, 2, 3], [2, 2, 2, 2], HardState(term=2, vote=1, commit=5))
    size = len(b"e2") + 16
    node = new_node(2, storage, max_committed_size_per_ready=2 * size)
    batches = []
    while node.has_ready():
        rd = node.ready()
        batches.append([e.index for e in rd.committed_entries])
        node.advance(rd)
    assert batches == [[2, 3], [4, 5]]


def test_drained_leader_of_single_node_cluster_applies_its_proposals() -> None:
    """A single voter elects itself, commits its empty entry and a proposal, and applies both in order."""
    storage = storage_with_log([1], [])
    node = new_node(1, storage)
    node.campaign()
    assert node.raft.state == StateType.LEADER
    node.propose(b"solo")
    applied: list[Entry] = []
    while node.has_ready():
        rd = node.ready()
        storage.append(rd.entries)
        if rd.hard_state is not None:
            storage.set_hard_state(rd.hard_state)
        applied.extend(rd.committed_entries)
        node.advance(rd)
    assert [(e.index, e.term, e.data) for e in applied] == [(2, 2, b""), (3, 2, b"solo")]
    assert drain_ready(node, storage) == []
