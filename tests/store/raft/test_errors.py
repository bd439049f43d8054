"""Typed errors of the core: local messages from the network, dropped proposals, bad configs and payloads."""

from __future__ import annotations

import pytest

from store.raft import MemoryStorage, RawNode
from store.raft.errors import ProposalDroppedError, StepLocalMessageError, StepPeerNotFoundError
from store.raft.raft import Config
from store.raft.types import (
    LOCAL_MESSAGES,
    ConfChange,
    ConfChangeType,
    Message,
    MessageType,
    StateType,
)
from tests.store.raft.harness import FixedRng, Network, make_config


@pytest.mark.parametrize("kind", sorted(LOCAL_MESSAGES))
def test_step_of_a_local_message_raises(kind: MessageType) -> None:
    """RawNode.step refuses every local-only message type with StepLocalMessageError."""
    net = Network([1, 2, 3])
    with pytest.raises(StepLocalMessageError):
        net[1].raw.step(Message(type=kind, frm=2, to=1, term=1))
    assert (net.raft(1).state, net.raft(1).term) == (StateType.FOLLOWER, 1)


def test_propose_without_leader_is_dropped() -> None:
    """A follower that knows no leader raises ProposalDroppedError for a proposal."""
    net = Network([1, 2, 3])
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose(b"nobody")
    assert net.raft(1).log.last_index() == 1
    assert net.raft(1).msgs == []


def test_propose_during_election_is_dropped() -> None:
    """A (pre-)candidate raises ProposalDroppedError for a proposal."""
    net = Network([1, 2, 3])
    net[1].raw.campaign()
    with pytest.raises(ProposalDroppedError):
        net[1].raw.propose(b"campaigning")


def test_follower_with_forwarding_disabled_drops_proposals() -> None:
    """With disable_proposal_forwarding a follower drops proposals instead of forwarding them."""
    net = Network([1, 2, 3], disable_proposal_forwarding=True)
    net.elect(1)
    with pytest.raises(ProposalDroppedError):
        net[2].raw.propose(b"not forwarded")


def test_follower_forwards_proposal_to_leader() -> None:
    """By default a follower forwards a proposal to the leader as a MsgProp without a term."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[2].raw.propose(b"forwarded")
    net.process_ready(2)
    [prop] = net.take(lambda m: m.type == MessageType.PROP)
    assert (prop.frm, prop.to, prop.term, [e.data for e in prop.entries]) == (2, 1, 0, [b"forwarded"])
    net.deliver(prop)
    net.stabilize()
    assert net.applied_data(3) == [b"forwarded"]


def test_response_from_a_non_member_raises_on_the_leader() -> None:
    """A leader receiving a response from a node outside its configuration raises StepPeerNotFoundError."""
    net = Network([1, 2, 3])
    net.elect(1)
    with pytest.raises(StepPeerNotFoundError):
        net[1].raw.step(Message(type=MessageType.APP_RESP, frm=9, to=1, term=2, index=1))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"id": 0}, "node id"),
        ({"heartbeat_tick": 0}, "heartbeat_tick"),
        ({"election_tick": 1, "heartbeat_tick": 1}, "election_tick"),
        ({"election_tick": 3, "heartbeat_tick": 5}, "election_tick"),
        ({"max_inflight_msgs": 0}, "max_inflight_msgs"),
    ],
)
def test_config_validate_rejects_bad_values(overrides: dict[str, int], message: str) -> None:
    """Config.validate rejects id 0, heartbeat_tick <= 0, election_tick <= heartbeat_tick, no inflight window."""
    cfg = make_config(1, MemoryStorage(), **overrides)
    with pytest.raises(ValueError, match=message):
        cfg.validate()
    with pytest.raises(ValueError, match=message):
        RawNode(cfg)


def test_config_validate_accepts_defaults() -> None:
    """The default Config (election 10, heartbeat 1) is valid."""
    Config(id=1, storage=MemoryStorage(), rng=FixedRng()).validate()


def test_conf_change_decode_of_short_data_raises() -> None:
    """ConfChange.decode refuses payloads shorter than type + 8-byte node id."""
    for data in (b"", b"\x00", bytes(8)):
        with pytest.raises(ValueError, match="too short"):
            ConfChange.decode(data)


def test_conf_change_round_trips_through_encode() -> None:
    """ConfChange.encode/decode round-trips type, node id and context."""
    cc = ConfChange(ConfChangeType.ADD_LEARNER, 2**40 + 7, b"ctx")
    assert ConfChange.decode(cc.encode()) == cc
    assert len(ConfChange(ConfChangeType.REMOVE_NODE, 1).encode()) == 9


def test_bootstrap_requires_empty_storage_and_valid_voters() -> None:
    """bootstrap refuses non-empty storage, an empty voter list, id 0 and duplicates."""
    net = Network([1, 2, 3])
    with pytest.raises(ValueError):
        net[1].raw.bootstrap([1, 2, 3])
    for voters in ([], [0, 1], [1, 1]):
        with pytest.raises(ValueError):
            RawNode(make_config(1, MemoryStorage())).bootstrap(voters)
