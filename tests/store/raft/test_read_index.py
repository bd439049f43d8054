"""ReadIndex (raft thesis §6.4): linearizable reads confirmed by a heartbeat quorum."""

from __future__ import annotations

import pytest

from store.raft.errors import ProposalDroppedError
from store.raft.types import MessageType, ReadState, StateType
from tests.store.raft.harness import Network, is_type


def test_leader_read_state_only_after_heartbeat_quorum() -> None:
    """A leader answers read_index with a ReadState only once a quorum acknowledged a heartbeat carrying the ctx."""
    net = Network([1, 2, 3])
    net.elect(1)
    committed = net.raft(1).log.committed
    net[1].raw.read_index(b"read-1")
    net.process_ready(1)
    assert net[1].read_states == []
    beats = net.take(is_type(MessageType.HEARTBEAT, frm=1))
    assert sorted((m.to, m.context) for m in beats) == [(2, b"read-1"), (3, b"read-1")]
    beat_to_2 = next(m for m in beats if m.to == 2)
    net.deliver(beat_to_2)
    net.process_ready(2)
    [ack] = net.take(is_type(MessageType.HEARTBEAT_RESP, frm=2))
    assert ack.context == b"read-1"
    assert not net[1].raw.raft.read_states
    net.deliver(ack)  # leader + 2 is a quorum of 3
    net.process_ready(1)
    assert net[1].read_states == [ReadState(index=committed, request_ctx=b"read-1")]


def test_heartbeat_quorum_releases_earlier_reads_too() -> None:
    """A quorum ack for a later read confirms every read queued before it."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.read_index(b"first")
    net.process_ready(1)
    net.take()  # the heartbeats for "first" are lost
    net[1].raw.read_index(b"second")
    net.stabilize()
    assert [rs.request_ctx for rs in net[1].read_states] == [b"first", b"second"]


def test_follower_forwards_read_index_and_receives_read_state() -> None:
    """A follower forwards MsgReadIndex to the leader and gets its ReadState through MsgReadIndexResp."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.propose(b"x")
    net.stabilize()
    committed = net.raft(1).log.committed
    net[2].raw.read_index(b"follower-read")
    net.process_ready(2)
    [forwarded] = net.take(is_type(MessageType.READ_INDEX, frm=2))
    assert (forwarded.to, forwarded.context) == (1, b"follower-read")
    net.deliver(forwarded)
    net.process_ready(1)
    assert net.peek(is_type(MessageType.READ_INDEX_RESP)) == []  # waits for the heartbeat round
    net.deliver_all()
    net.process_all()
    net.deliver_all(hold=is_type(MessageType.READ_INDEX_RESP))
    net.process_ready(1)
    [resp] = net.take(is_type(MessageType.READ_INDEX_RESP, frm=1))
    assert (resp.to, resp.index, resp.context) == (2, committed, b"follower-read")
    net.deliver(resp)
    net.process_ready(2)
    assert net[2].read_states == [ReadState(index=committed, request_ctx=b"follower-read")]
    assert net[1].read_states == []


def test_new_leader_defers_reads_until_it_commits_an_entry_of_its_term() -> None:
    """A new leader queues read_index requests until its term's first entry commits, then answers with that index."""
    net = Network([1, 2, 3], pre_vote=False)
    net[1].raw.campaign()
    net.process_ready(1)
    net.deliver_all()
    net.process_all()
    net.deliver_all()  # 1 wins; its empty entry is not committed yet
    leader = net.raft(1)
    assert leader.state == StateType.LEADER
    assert leader.log.committed == 1
    net[1].raw.read_index(b"early")
    assert leader.pending_read_index_messages != []
    net.process_ready(1)
    assert not any(m.context == b"early" for m in net.inflight)
    assert net[1].read_states == []
    net.stabilize()
    assert leader.log.committed == 2
    assert net[1].read_states == [ReadState(index=2, request_ctx=b"early")]


def test_single_voter_leader_answers_read_index_at_once() -> None:
    """In a single-voter cluster the leader answers read_index immediately with its commit index."""
    net = Network([1])
    net.elect(1)
    net[1].raw.propose(b"x")
    net.stabilize()
    committed = net.raft(1).log.committed
    net[1].raw.read_index(b"solo")
    rd = net[1].raw.ready()
    assert rd.read_states == [ReadState(index=committed, request_ctx=b"solo")]
    assert rd.messages == []


def test_read_index_without_leader_or_context_is_refused() -> None:
    """read_index needs a non-empty context, and a follower without a leader drops it."""
    net = Network([1, 2, 3])
    with pytest.raises(ValueError):
        net[1].raw.read_index(b"")
    with pytest.raises(ProposalDroppedError):
        net[1].raw.read_index(b"nobody-to-ask")
