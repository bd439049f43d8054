"""The commit rule: a leader commits by counting replicas only entries of its own term (Raft §5.4.2, Figure 8)."""

from __future__ import annotations

from store.raft import Canary, RawNode
from store.raft.types import HardState, Message, MessageType, StateType
from tests.store.raft.harness import drain_ready, new_node, storage_with_log


def leader_in_term_3_with_old_entry(canaries: frozenset[Canary] = frozenset()) -> RawNode:
    """Node 1 of {1,2,3} holding an uncommitted term-2 entry at index 2, elected leader of term 3.

    Its log is then: 1@1 (snapshot, committed), 2@2 (old term, uncommitted), 3@3 (its empty entry).
    """
    storage = storage_with_log([1, 2, 3], [2], HardState(term=2, vote=1, commit=1))
    node = new_node(1, storage, pre_vote=False, canaries=canaries)
    node.campaign()
    node.step(Message(type=MessageType.VOTE_RESP, frm=3, to=1, term=3))
    r = node.raft
    assert (r.state, r.term) == (StateType.LEADER, 3)
    assert [(e.index, e.term) for e in r.log.all_entries()] == [(2, 2), (3, 3)]
    assert r.log.committed == 1
    drain_ready(node, storage)
    return node


def ack(node: RawNode, frm: int, index: int) -> None:
    node.step(Message(type=MessageType.APP_RESP, frm=frm, to=1, term=node.raft.term, index=index))


def test_leader_does_not_commit_old_term_entry_by_counting_replicas() -> None:
    """An old-term entry on a majority stays uncommitted until an entry of the leader's term is on a majority."""
    node = leader_in_term_3_with_old_entry()
    ack(node, 2, 2)  # now 1 and 2 hold the term-2 entry: a majority
    assert node.raft.prs[2].match == 2
    assert node.raft.log.committed == 1
    ack(node, 3, 2)  # even all three
    assert node.raft.log.committed == 1
    ack(node, 2, 3)  # the leader's own entry reaches a majority: both commit together
    assert node.raft.log.committed == 3


def test_commit_old_term_canary_commits_early() -> None:
    """With Canary.COMMIT_OLD_TERM_BY_COUNTING the same setup commits the old-term entry at once (the deviation)."""
    node = leader_in_term_3_with_old_entry(frozenset({Canary.COMMIT_OLD_TERM_BY_COUNTING}))
    ack(node, 2, 2)
    assert node.raft.log.committed == 2


def test_leader_commits_its_own_entries_once_on_a_majority() -> None:
    """An entry of the current term commits as soon as a majority of voters (leader included) stores it."""
    node = leader_in_term_3_with_old_entry()
    ack(node, 2, 3)
    assert node.raft.log.committed == 3
    node.propose(b"x")
    assert node.raft.log.committed == 3
    ack(node, 3, 4)
    assert node.raft.log.committed == 4
