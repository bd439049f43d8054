"""Leader election: timeouts, votes, the up-to-date check, PreVote, CheckQuorum and leader leases."""

from __future__ import annotations

import random

import pytest

from store.raft.raft import CAMPAIGN_TRANSFER, Config, Raft
from store.raft.storage import MemoryStorage
from store.raft.types import ConfChange, ConfChangeType, Entry, EntryType, HardState, Message, MessageType, StateType
from tests.store.raft.harness import FixedRng, Network, drain_ready, is_type, new_node, storage_with_log

VOTE_TYPES = [MessageType.VOTE, MessageType.PRE_VOTE]


def vote_request(kind: MessageType, frm: int, to: int, term: int, index: int, log_term: int) -> Message:
    return Message(type=kind, frm=frm, to=to, term=term, index=index, log_term=log_term)


def vote_response(kind: MessageType, frm: int, to: int, term: int, reject: bool = False) -> Message:
    return Message(type=kind, frm=frm, to=to, term=term, reject=reject)


# ---------------------------------------------------------------------- timeouts


def test_randomized_election_timeout_comes_from_injected_rng() -> None:
    """Each node draws its election timeout in [election_tick, 2*election_tick) from its own injected rng."""
    timeouts = {}
    for seed in (1, 2):
        r = Raft(Config(id=1, storage=MemoryStorage(), rng=random.Random(seed), election_tick=10))
        expected = 10 + random.Random(seed).randrange(0, 10)
        assert r.randomized_election_timeout == expected
        assert 10 <= r.randomized_election_timeout < 20
        timeouts[seed] = r.randomized_election_timeout
    assert timeouts[1] != timeouts[2]


def test_follower_campaigns_exactly_at_its_randomized_timeout() -> None:
    """A follower that hears nothing starts a (pre-)election after exactly randomized_election_timeout ticks."""
    node = new_node(1, storage_with_log([1, 2, 3], []), rng=FixedRng(7))
    assert node.raft.randomized_election_timeout == 17
    for _ in range(16):
        node.tick()
    assert node.raft.state == StateType.FOLLOWER
    node.tick()
    assert node.raft.state == StateType.PRE_CANDIDATE


# ---------------------------------------------------------------------- votes


def test_candidate_wins_with_a_majority_of_votes() -> None:
    """A candidate becomes leader once a majority (including itself) granted its vote, not before."""
    node = new_node(1, storage_with_log([1, 2, 3, 4, 5], []), pre_vote=False)
    node.campaign()
    r = node.raft
    assert (r.state, r.term, r.vote) == (StateType.CANDIDATE, 2, 1)
    requests = node.ready().messages
    assert sorted(m.to for m in requests) == [2, 3, 4, 5]
    assert all((m.type, m.term, m.index, m.log_term) == (MessageType.VOTE, 2, 1, 1) for m in requests)
    node.step(vote_response(MessageType.VOTE_RESP, 2, 1, 2))
    node.step(vote_response(MessageType.VOTE_RESP, 3, 1, 2, reject=True))
    assert r.state == StateType.CANDIDATE  # 2 of 5
    node.step(vote_response(MessageType.VOTE_RESP, 4, 1, 2))
    assert (r.state, r.term, r.lead) == (StateType.LEADER, 2, 1)
    # The new leader appends an empty entry of its term.
    assert (r.log.last_index(), r.log.last_term()) == (2, 2)


def test_candidate_loses_when_a_majority_rejects() -> None:
    """A candidate rejected by a majority returns to follower in the same term."""
    node = new_node(1, storage_with_log([1, 2, 3], []), pre_vote=False)
    node.campaign()
    node.step(vote_response(MessageType.VOTE_RESP, 2, 1, 2, reject=True))
    assert node.raft.state == StateType.CANDIDATE
    node.step(vote_response(MessageType.VOTE_RESP, 3, 1, 2, reject=True))
    assert (node.raft.state, node.raft.term, node.raft.lead) == (StateType.FOLLOWER, 2, 0)


@pytest.mark.parametrize("kind", VOTE_TYPES)
@pytest.mark.parametrize(
    ("cand_index", "cand_log_term", "granted"),
    [
        (10, 1, False),  # longer log but older last term
        (3, 2, False),  # same last term, shorter log
        (4, 2, True),  # identical last entry
        (5, 2, True),  # same term, longer
        (2, 3, True),  # higher last term, shorter log
    ],
)
def test_vote_refused_to_candidate_with_stale_log(
    kind: MessageType, cand_index: int, cand_log_term: int, granted: bool
) -> None:
    """VOTE and PRE_VOTE are granted only to a candidate whose log is at least as up to date (§5.4.1)."""
    # Our log: snapshot 1@1, then 2@1, 3@2, 4@2: last entry (index 4, term 2).
    node = new_node(1, storage_with_log([1, 2, 3], [1, 2, 2], HardState(term=2, commit=1)))
    node.step(vote_request(kind, 2, 1, term=3, index=cand_index, log_term=cand_log_term))
    [resp] = node.ready().messages
    assert resp.type == (MessageType.VOTE_RESP if kind == MessageType.VOTE else MessageType.PRE_VOTE_RESP)
    assert resp.to == 2
    assert resp.reject is not granted
    r = node.raft
    if kind == MessageType.VOTE:
        assert resp.term == 3
        assert (r.term, r.vote) == (3, 2 if granted else 0)
    else:
        # A pre-vote changes neither our term nor our vote; a grant carries the future term.
        assert resp.term == (3 if granted else 2)
        assert (r.term, r.vote) == (2, 0)


def test_vote_is_granted_at_most_once_per_term_even_across_restart() -> None:
    """Having voted for 1 in term 2, a node refuses 2 in that term (also after restarting from storage)."""
    storage = storage_with_log([1, 2, 3], [])
    node = new_node(3, storage)
    node.step(vote_request(MessageType.VOTE, 1, 3, term=2, index=1, log_term=1))
    node.step(vote_request(MessageType.VOTE, 2, 3, term=2, index=1, log_term=1))
    node.step(vote_request(MessageType.VOTE, 1, 3, term=2, index=1, log_term=1))  # a retransmission
    sent = drain_ready(node, storage)
    assert [(m.to, m.reject) for m in sent] == [(1, False), (2, True), (1, False)]
    assert storage.hard_state == HardState(term=2, vote=1, commit=1)

    restarted = new_node(3, storage)
    restarted.step(vote_request(MessageType.VOTE, 2, 3, term=2, index=1, log_term=1))
    [resp] = restarted.ready().messages
    assert (resp.type, resp.to, resp.reject) == (MessageType.VOTE_RESP, 2, True)


# ---------------------------------------------------------------------- PreVote


def test_pre_candidate_does_not_raise_its_term() -> None:
    """A pre-candidate keeps its term and vote, asks for pre-votes for term+1, and only then campaigns."""
    net = Network([1, 2, 3])
    node = net[1].raw
    node.campaign()
    r = node.raft
    assert (r.state, r.term, r.vote) == (StateType.PRE_CANDIDATE, 1, 0)
    rd = node.ready()
    assert rd.hard_state is None  # nothing to persist: term and vote unchanged
    assert sorted((m.type, m.to, m.term) for m in rd.messages) == [
        (MessageType.PRE_VOTE, 2, 2),
        (MessageType.PRE_VOTE, 3, 2),
    ]
    node.advance(rd)
    net.inflight.extend(rd.messages)
    net.deliver_all()
    net.process_all()
    grants = net.take(is_type(MessageType.PRE_VOTE_RESP, to=1))
    assert [(m.frm, m.term, m.reject) for m in grants] == [(2, 2, False), (3, 2, False)]
    assert (net.raft(2).term, net.raft(3).term) == (1, 1)
    net.deliver(grants[0])
    assert (r.state, r.term, r.vote) == (StateType.CANDIDATE, 2, 1)


def test_partitioned_node_with_pre_vote_keeps_its_term_and_does_not_disrupt_leader() -> None:
    """An isolated node that keeps timing out stays in its term; healed, it rejoins without deposing the leader."""
    net = Network([1, 2, 3])
    net.elect(1)
    assert net.raft(1).term == 2
    net.isolate(3)
    sent_before = len(net.sent)
    net.tick_all(60)
    assert net.raft(3).term == 2
    assert net.raft(3).state in (StateType.PRE_CANDIDATE, StateType.FOLLOWER)
    from_3 = [m.type for m in net.sent[sent_before:] if m.frm == 3]
    assert MessageType.PRE_VOTE in from_3
    assert MessageType.VOTE not in from_3
    net.heal()
    net.tick_all(40)
    assert net.leaders() == [1]
    assert [net.raft(i).term for i in (1, 2, 3)] == [2, 2, 2]
    assert (net.raft(3).state, net.raft(3).lead) == (StateType.FOLLOWER, 1)


def test_partitioned_node_without_pre_vote_inflates_its_term() -> None:
    """Control for the PreVote test: without PreVote the isolated node's term grows while it is cut off."""
    net = Network([1, 2, 3], pre_vote=False)
    net.elect(1)
    net.isolate(3)
    net.tick_all(60)
    assert net.raft(3).term > 4


# ---------------------------------------------------------------------- CheckQuorum and leases


def test_check_quorum_leader_steps_down_without_hearing_from_a_quorum() -> None:
    """A leader that hears from no quorum during a whole election timeout becomes a follower in the same term."""
    net = Network([1, 2, 3])
    net.elect(1)
    net.isolate(1)
    net.tick(1, 10)  # first check: 2 and 3 answered during the election, so the leader stays
    assert net.raft(1).state == StateType.LEADER
    net.tick(1, 9)
    assert net.raft(1).state == StateType.LEADER
    net.tick(1, 1)  # a whole election timeout without any answer
    assert (net.raft(1).state, net.raft(1).term, net.raft(1).lead) == (StateType.FOLLOWER, 2, 0)


def test_check_quorum_leader_stays_while_the_quorum_answers() -> None:
    """Control: a connected leader ticked for many election timeouts stays leader."""
    net = Network([1, 2, 3])
    net.elect(1)
    net.isolate(3)
    net.tick_all(50)
    assert net.leaders() == [1]
    assert net.raft(1).term == 2


@pytest.mark.parametrize("kind", VOTE_TYPES)
def test_follower_in_leader_lease_ignores_vote_requests(kind: MessageType) -> None:
    """A follower that heard from its leader within the election timeout drops a higher-term (pre-)vote silently."""
    net = Network([1, 2, 3])
    net.elect(1)
    follower = net[2].raw
    last = follower.raft.log.last_index()
    follower.step(vote_request(kind, 3, 2, term=3, index=last, log_term=2))
    assert not follower.has_ready()
    assert (follower.raft.term, follower.raft.vote, follower.raft.lead) == (2, 1, 1)


def test_follower_in_lease_answers_vote_carrying_transfer_context() -> None:
    """A VOTE with the leader-transfer context bypasses the lease: the follower adopts the term and votes."""
    net = Network([1, 2, 3])
    net.elect(1)
    follower = net[2].raw
    last = follower.raft.log.last_index()
    request = vote_request(MessageType.VOTE, 3, 2, term=3, index=last, log_term=2)
    request.context = CAMPAIGN_TRANSFER
    follower.step(request)
    [resp] = follower.ready().messages
    assert (resp.type, resp.to, resp.term, resp.reject) == (MessageType.VOTE_RESP, 3, 3, False)
    assert (follower.raft.term, follower.raft.vote) == (3, 3)


def test_follower_answers_vote_once_its_lease_expired() -> None:
    """Once election_tick ticks passed without hearing from the leader, the follower considers vote requests."""
    net = Network([1, 2, 3])
    net.elect(1)
    follower = net[2].raw  # randomized timeout 11: it will not campaign itself within 10 ticks
    net.tick(2, 10)
    assert follower.raft.state == StateType.FOLLOWER
    last = follower.raft.log.last_index()
    follower.step(vote_request(MessageType.VOTE, 3, 2, term=3, index=last, log_term=2))
    [resp] = follower.ready().messages
    assert (resp.type, resp.term, resp.reject) == (MessageType.VOTE_RESP, 3, False)


def test_stale_leader_steps_down_on_higher_term_response() -> None:
    """A leader cut off while others elected a new one steps down when a heartbeat answer carries a higher term."""
    net = Network([1, 2, 3])
    net.elect(1)
    net.isolate(1)
    for _ in range(12):  # only 2 and 3 tick: 2 times out first (timeout 11) and wins term 3
        net.tick(2)
        net.tick(3)
        net.stabilize()
    assert (net.raft(2).state, net.raft(2).term) == (StateType.LEADER, 3)
    assert (net.raft(1).state, net.raft(1).term) == (StateType.LEADER, 2)
    net.heal()
    net.tick(1)  # heartbeat in term 2
    net.process_ready(1)
    heartbeats = net.take(is_type(MessageType.HEARTBEAT, frm=1))
    assert sorted((m.to, m.term) for m in heartbeats) == [(2, 2), (3, 2)]
    net.deliver(heartbeats[0])
    net.process_ready(heartbeats[0].to)
    [answer] = net.take(is_type(MessageType.APP_RESP, to=1))
    assert answer.term == 3
    net.deliver(answer)
    assert (net.raft(1).state, net.raft(1).term, net.raft(1).vote) == (StateType.FOLLOWER, 3, 0)
    net.tick_all(1)
    assert net.leaders() == [2]
    assert net.raft(1).lead == 2


def test_leader_ignores_messages_from_lower_terms() -> None:
    """A message with a term below ours is dropped (besides telling a stale leader our term)."""
    net = Network([1, 2, 3])
    net.elect(1)
    leader = net[1].raw
    net.process_all()
    leader.step(vote_request(MessageType.VOTE, 3, 1, term=1, index=100, log_term=9))
    assert leader.raft.state == StateType.LEADER
    assert not leader.has_ready()


def test_duplicate_vote_responses_count_once() -> None:
    """A candidate counts each voter once: the same grant delivered twice does not make a majority of 5."""
    node = new_node(1, storage_with_log([1, 2, 3, 4, 5], []), pre_vote=False)
    node.campaign()
    node.step(vote_response(MessageType.VOTE_RESP, 2, 1, 2))
    node.step(vote_response(MessageType.VOTE_RESP, 2, 1, 2))
    assert node.raft.state == StateType.CANDIDATE
    assert node.raft.votes == {1: True, 2: True}


def test_pre_candidate_adopts_higher_term_from_pre_vote_rejection() -> None:
    """A lagging pre-candidate rejected by a node of a higher term adopts that term, so it can win next time."""
    lagging = new_node(1, storage_with_log([1, 2, 3], []))
    ahead_storage = storage_with_log([1, 2, 3], [], HardState(term=5, commit=1))
    ahead = new_node(2, ahead_storage)
    lagging.campaign()
    [pre_vote, _] = sorted(lagging.ready().messages, key=lambda m: m.to)
    assert (pre_vote.type, pre_vote.to, pre_vote.term) == (MessageType.PRE_VOTE, 2, 2)
    ahead.step(pre_vote)
    [rejection] = ahead.ready().messages
    assert (rejection.type, rejection.term, rejection.reject) == (MessageType.PRE_VOTE_RESP, 5, True)
    assert ahead.raft.term == 5
    lagging.step(rejection)
    assert (lagging.raft.state, lagging.raft.term) == (StateType.FOLLOWER, 5)


def test_node_with_unapplied_conf_change_does_not_campaign() -> None:
    """A node that has a committed but not yet applied conf change refuses to campaign."""
    storage = storage_with_log([1, 2, 3], [], HardState(term=2, vote=0, commit=2))
    cc = ConfChange(ConfChangeType.ADD_LEARNER, 4).encode()
    storage.append([Entry(term=2, index=2, type=EntryType.CONF_CHANGE, data=cc)])
    node = new_node(1, storage)
    assert (node.raft.log.committed, node.raft.log.applied) == (2, 1)
    node.campaign()
    assert (node.raft.state, node.raft.term) == (StateType.FOLLOWER, 2)
    rd = node.ready()
    assert rd.messages == []
    assert [e.type for e in rd.committed_entries] == [EntryType.CONF_CHANGE]
    node.apply_conf_change(ConfChange.decode(rd.committed_entries[0].data))
    node.advance(rd)
    node.campaign()
    assert node.raft.state == StateType.PRE_CANDIDATE
