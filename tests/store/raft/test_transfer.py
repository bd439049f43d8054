"""Leadership transfer (raft thesis §3.10): MsgTimeoutNow, catching up the transferee, aborting."""

from __future__ import annotations

import pytest

from store.raft.errors import ProposalDroppedError
from store.raft.raft import CAMPAIGN_TRANSFER
from store.raft.types import NONE, MessageType, StateType
from tests.store.raft.harness import Network, is_type


def elected_network() -> Network:
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.propose(b"x")
    net.stabilize()
    return net


def test_transfer_to_up_to_date_follower_sends_timeout_now_and_it_wins_next_term() -> None:
    """transfer_leader to a caught-up follower sends MsgTimeoutNow; it campaigns at once and leads term+1."""
    net = elected_network()
    net[1].raw.transfer_leader(2)
    assert net.raft(1).lead_transferee == 2
    net.process_ready(1)
    [timeout_now] = net.take(is_type(MessageType.TIMEOUT_NOW))
    assert (timeout_now.frm, timeout_now.to, timeout_now.term) == (1, 2, 2)
    net.deliver(timeout_now)
    assert (net.raft(2).state, net.raft(2).term) == (StateType.CANDIDATE, 3)  # no pre-vote round
    net.process_ready(2)
    votes = net.peek(is_type(MessageType.VOTE, frm=2))
    assert sorted((m.to, m.term, m.context) for m in votes) == [(1, 3, CAMPAIGN_TRANSFER), (3, 3, CAMPAIGN_TRANSFER)]
    net.stabilize()
    assert net.leaders() == [2]
    assert [net.raft(i).term for i in (1, 2, 3)] == [3, 3, 3]
    assert (net.raft(1).state, net.raft(1).lead_transferee) == (StateType.FOLLOWER, NONE)


def test_follower_forwards_transfer_request_to_the_leader() -> None:
    """transfer_leader called on a follower is forwarded to the leader, which then hands over."""
    net = elected_network()
    net[3].raw.transfer_leader(3)
    net.process_ready(3)
    [forwarded] = net.take(is_type(MessageType.TRANSFER_LEADER))
    assert (forwarded.frm, forwarded.to) == (3, 1)
    net.deliver(forwarded)
    assert net.raft(1).lead_transferee == 3
    net.stabilize()
    assert net.leaders() == [3]


def test_transfer_to_lagging_follower_first_catches_it_up() -> None:
    """A lagging transferee first gets the missing entries; MsgTimeoutNow follows once it matches the leader."""
    net = elected_network()
    net.isolate(3)
    net[1].raw.propose_many([b"a", b"b"])
    net.stabilize()
    net.heal()
    leader = net.raft(1)
    assert leader.prs[3].match < leader.log.last_index()
    net[1].raw.transfer_leader(3)
    net.process_ready(1)
    to_3 = net.peek(lambda m: m.to == 3)
    assert [m.type for m in to_3] == [MessageType.APP]
    assert leader.lead_transferee == 3
    sent_before = len(net.sent)
    net.stabilize()
    timeout_nows = [m for m in net.sent[sent_before:] if m.type == MessageType.TIMEOUT_NOW]
    assert [(m.frm, m.to) for m in timeout_nows] == [(1, 3)]
    assert net.leaders() == [3]
    assert net.raft(3).term == 3
    assert net.applied_data(3)[-2:] == [b"a", b"b"]


def test_proposals_are_dropped_while_a_transfer_is_pending() -> None:
    """While a leadership transfer is under way the leader refuses proposals with ProposalDroppedError."""
    net = elected_network()
    net.isolate(3)
    net[1].raw.transfer_leader(3)
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose(b"during-transfer")
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose_many([b"p", b"q"])
    assert net.raft(1).log.last_index() == net.raft(1).log.committed


def test_transfer_is_aborted_after_an_election_timeout() -> None:
    """A transfer that does not complete within election_tick ticks is abandoned and proposals resume."""
    net = elected_network()
    net.isolate(3)
    net[1].raw.transfer_leader(3)
    for _ in range(9):
        net.tick(1)
        net.stabilize()
    assert net.raft(1).lead_transferee == 3
    net.tick(1)
    assert net.raft(1).lead_transferee == NONE
    assert net.raft(1).state == StateType.LEADER
    net[1].raw.propose(b"after-abort")
    net.stabilize()
    assert net.applied_data(2)[-1] == b"after-abort"


def test_transfer_to_self_or_to_a_stranger_is_ignored() -> None:
    """transfer_leader to the leader itself or to a non-member changes nothing."""
    net = elected_network()
    net[1].raw.transfer_leader(1)
    net[1].raw.transfer_leader(9)
    assert net.raft(1).lead_transferee == NONE
    assert net.peek(is_type(MessageType.TIMEOUT_NOW)) == []
    net[1].raw.propose(b"still-leader")
