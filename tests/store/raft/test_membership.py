"""Single-server membership changes: learners, promotion, removal, and the one-at-a-time rule."""

from __future__ import annotations

import pytest

from store.raft.errors import ProposalDroppedError
from store.raft.types import ConfChange, ConfChangeType, ConfState, MessageType, StateType
from tests.store.raft.harness import Network


def change(net: Network, leader: int, kind: ConfChangeType, node_id: int) -> None:
    """Propose a conf change on `leader` and run the network until everyone applied it."""
    net[leader].raw.propose_conf_change(ConfChange(kind, node_id))
    net.stabilize()
    net.tick_all(2)


def with_learner(voters: list[int], learner: int) -> Network:
    """A cluster of `voters` led by 1, plus a fresh member added as a learner that caught up."""
    net = Network(voters)
    net.elect(1)
    net.add_member(learner)
    change(net, 1, ConfChangeType.ADD_LEARNER, learner)
    assert net.raft(1).conf_state() == ConfState(voters=tuple(voters), learners=(learner,))
    assert net.raft(learner).log.last_index() == net.raft(1).log.last_index()
    return net


def test_learner_receives_entries_but_does_not_count_for_commit() -> None:
    """With 3 voters and a learner, an entry held by the leader and the learner only is not committed."""
    net = with_learner([1, 2, 3], 4)
    assert net.raft(4).conf_state() == ConfState(voters=(1, 2, 3), learners=(4,))
    committed = net.raft(1).log.committed
    net.isolate(2)
    net.isolate(3)
    net[1].raw.propose(b"needs-two-voters")
    net.stabilize()
    leader = net.raft(1)
    assert leader.prs[4].match == leader.log.last_index()
    assert net.raft(4).log.last_index() == leader.log.last_index()
    assert leader.log.committed == committed
    net.heal()
    net.isolate(3)
    net.tick_all(1)  # a heartbeat round gets 2 going again
    assert leader.log.committed == leader.log.last_index()
    assert net.applied_data(4)[-1] == b"needs-two-voters"


def test_learner_never_campaigns() -> None:
    """A learner that hears nothing for many election timeouts neither campaigns nor changes its term."""
    net = with_learner([1, 2, 3], 4)
    term = net.raft(4).term
    net.isolate(4)
    sent_before = len(net.sent)
    net.tick(4, 100)
    net[4].raw.campaign()
    net.process_ready(4)
    learner = net.raft(4)
    assert (learner.state, learner.term) == (StateType.FOLLOWER, term)
    assert [m for m in net.sent[sent_before:] if m.frm == 4] == []


def test_promoting_a_learner_makes_it_count_for_commit() -> None:
    """After ADD_NODE on a learner its acknowledgements count: {1,3} commits once 3 is a voter of {1,2,3}."""
    net = with_learner([1, 2], 3)
    committed = net.raft(1).log.committed
    net.isolate(2)
    net[1].raw.propose(b"before-promotion")
    net.stabilize()
    assert net.raft(1).log.committed == committed  # 1 of 2 voters
    net.heal()
    net.tick_all(1)
    change(net, 1, ConfChangeType.ADD_NODE, 3)
    assert net.raft(1).conf_state() == ConfState(voters=(1, 2, 3))
    assert net.raft(3).promotable()
    net.isolate(2)
    net[1].raw.propose(b"after-promotion")
    net.stabilize()
    assert net.raft(1).log.committed == net.raft(1).log.last_index()
    assert net.applied_data(3)[-1] == b"after-promotion"


def test_removing_a_voter_shrinks_the_quorum() -> None:
    """With 4 voters two nodes cannot commit; after removing one voter, two of the remaining three can."""
    net = Network([1, 2, 3, 4])
    net.elect(1)
    leader = net.raft(1)
    net.isolate(3)
    net.isolate(4)
    net[1].raw.propose(b"two-of-four")
    net.stabilize()
    assert leader.log.committed < leader.log.last_index()
    net.heal()
    net.tick_all(1)
    assert leader.log.committed == leader.log.last_index()
    change(net, 1, ConfChangeType.REMOVE_NODE, 4)
    assert leader.conf_state() == ConfState(voters=(1, 2, 3))
    net.isolate(3)
    net.isolate(4)
    net[1].raw.propose(b"two-of-three")
    net.stabilize()
    assert leader.log.committed == leader.log.last_index()
    assert net.applied_data(2)[-1] == b"two-of-three"


def test_removed_leader_steps_down_and_the_rest_elect_a_new_leader() -> None:
    """A leader applying its own removal becomes a follower; the remaining voters elect a leader in a new term."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, 1))
    net.stabilize()
    old = net.raft(1)
    assert (old.state, old.term, old.lead) == (StateType.FOLLOWER, 2, 0)
    assert not old.promotable()
    assert net.leaders() == []
    sent_before = len(net.sent)
    net.tick_all(30)
    [new_leader] = net.leaders()
    assert new_leader in (2, 3)
    assert net.raft(new_leader).term == 3
    assert net.raft(new_leader).conf_state() == ConfState(voters=(2, 3))
    assert not any(m.frm == 1 and m.type in (MessageType.VOTE, MessageType.PRE_VOTE) for m in net.sent[sent_before:])
    assert net.raft(1).state == StateType.FOLLOWER


def test_second_conf_change_is_refused_while_one_is_pending() -> None:
    """A conf change proposed before the previous one is applied raises ProposalDroppedError."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 4))
    last = net.raft(1).log.last_index()
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 5))
    assert net.raft(1).log.last_index() == last
    net.stabilize()
    net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 5))  # applied now: accepted
    assert net.raft(1).pending_conf_index == last + 1


def test_removing_the_last_voter_is_refused() -> None:
    """Removing the only voter would leave no quorum at all: the proposal is dropped."""
    net = Network([1])
    net.elect(1)
    net.stabilize()
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, 1))


def test_demoting_a_voter_to_learner_is_refused() -> None:
    """ADD_LEARNER for an existing voter is not supported and is dropped."""
    net = Network([1, 2, 3])
    net.elect(1)
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 2))


def test_new_leader_cannot_change_membership_before_applying_its_first_entry() -> None:
    """Until the leader's empty entry of its term is applied, conf changes are dropped; afterwards they are taken."""
    net = Network([1, 2, 3], pre_vote=False)
    net[1].raw.campaign()
    net.process_ready(1)
    net.deliver_all()
    net.process_all()
    net.deliver_all()
    leader = net.raft(1)
    assert leader.state == StateType.LEADER
    assert leader.pending_conf_index == leader.log.last_index() == 2
    assert leader.log.applied < 2
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 4))
    net[1].raw.propose(b"normal entries are fine")
    net.stabilize()
    assert leader.log.applied == leader.log.last_index()
    net[1].raw.propose_conf_change(ConfChange(ConfChangeType.ADD_LEARNER, 4))
    assert leader.pending_conf_index == leader.log.last_index()
