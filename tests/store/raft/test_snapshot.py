"""Snapshots: sending one to a follower behind the compaction point, installing it, failures, stale ones."""

from __future__ import annotations

from store.raft.progress import ProgressState
from store.raft.types import ConfState, Message, MessageType, Snapshot, SnapshotMetadata
from tests.store.raft.harness import Network, is_type

SNAP_TO_3 = is_type(MessageType.SNAP, frm=1, to=3)


def network_with_follower_behind_compaction() -> tuple[Network, int]:
    """A leader (1) that compacted its log past what follower 3 has; returns the network and the snapshot index."""
    net = Network([1, 2, 3])
    net.report_snapshots = False
    net.elect(1)
    net.isolate(3)
    net[1].raw.propose_many([b"a", b"b", b"c"])
    net.stabilize()
    applied = net[1].applied_index
    assert net.raft(1).prs[3].match < applied - 1
    snap = net[1].storage.create_snapshot(applied, net.raft(1).conf_state(), b"a|b|c")
    net[1].storage.compact(applied)
    assert snap.metadata.index == applied
    assert net.raft(1).log.first_index() == applied + 1
    net.heal()
    return net, applied


def provoke_append_to_3(net: Network) -> None:
    """A heartbeat round: 3 answers, the leader tries to append to it (and finds it needs a snapshot)."""
    for _ in range(3):
        net[1].raw.tick()
        net.process_ready(1)
        net.deliver_all(drop=lambda m: m.to == 2, hold=SNAP_TO_3)
        net.process_ready(3)
        net.deliver_all(hold=SNAP_TO_3)
        net.process_ready(1)
        if net.peek(SNAP_TO_3):
            return


def test_leader_sends_snapshot_when_follower_next_is_compacted() -> None:
    """When a follower's next entry was compacted away the leader sends MsgSnap and moves it to SNAPSHOT."""
    net, index = network_with_follower_behind_compaction()
    provoke_append_to_3(net)
    [snap_msg] = net.take(SNAP_TO_3)
    assert snap_msg.snapshot is not None
    assert snap_msg.snapshot.metadata.index == index
    assert snap_msg.snapshot.metadata.term == 2
    assert snap_msg.snapshot.metadata.conf_state == ConfState(voters=(1, 2, 3))
    assert snap_msg.snapshot.data == b"a|b|c"
    pr = net.raft(1).prs[3]
    assert (pr.state, pr.pending_snapshot, pr.is_paused()) == (ProgressState.SNAPSHOT, index, True)


def test_follower_installs_snapshot_and_its_log_starts_after_it() -> None:
    """The follower's next Ready carries the snapshot; after persist+advance its log starts after the snapshot."""
    net, index = network_with_follower_behind_compaction()
    provoke_append_to_3(net)
    [snap_msg] = net.take(SNAP_TO_3)
    follower = net[3].raw
    follower.step(snap_msg)
    rd = follower.ready()
    assert rd.snapshot is not None and rd.snapshot.metadata.index == index
    assert rd.committed_entries == []
    assert rd.must_sync
    assert rd.hard_state is not None and rd.hard_state.commit == index
    [resp] = rd.messages
    assert (resp.type, resp.index, resp.reject) == (MessageType.APP_RESP, index, False)
    # Persist, send, apply, advance (the harness does it in contract order).
    net[3].storage.apply_snapshot(rd.snapshot)
    net[3].storage.set_hard_state(rd.hard_state)
    net[3].applied_index = index
    follower.advance(rd)
    log = follower.raft.log
    assert (log.first_index(), log.last_index(), log.committed, log.applied) == (index + 1, index, index, index)
    assert (net[3].storage.first_index(), net[3].storage.last_index()) == (index + 1, index)
    assert log.unstable.snapshot is None
    assert not follower.has_ready()
    # The leader resumes normal replication after the snapshot.
    net.deliver(resp)
    pr = net.raft(1).prs[3]
    assert (pr.state, pr.match) == (ProgressState.REPLICATE, index)
    net[1].raw.propose(b"d")
    net.stabilize()
    assert net.raft(3).log.last_index() == net.raft(1).log.last_index()
    assert net.applied_data(3) == [b"d"]


def test_failed_snapshot_report_returns_progress_to_probe() -> None:
    """report_snapshot(failed=True) moves the follower back to PROBE, paused until a heartbeat answer."""
    net, index = network_with_follower_behind_compaction()
    provoke_append_to_3(net)
    net.take(SNAP_TO_3)
    pr = net.raft(1).prs[3]
    match = pr.match
    net[1].raw.report_snapshot(3, failed=True)
    assert (pr.state, pr.pending_snapshot, pr.next, pr.is_paused()) == (ProgressState.PROBE, 0, match + 1, True)
    provoke_append_to_3(net)  # the next heartbeat answer triggers another snapshot
    [retry] = net.take(SNAP_TO_3)
    assert retry.snapshot is not None and retry.snapshot.metadata.index == index


def test_successful_snapshot_report_probes_after_the_snapshot() -> None:
    """report_snapshot(failed=False) moves the follower to PROBE with next just after the snapshot."""
    net, index = network_with_follower_behind_compaction()
    provoke_append_to_3(net)
    net.take(SNAP_TO_3)
    net[1].raw.report_snapshot(3, failed=False)
    pr = net.raft(1).prs[3]
    assert (pr.state, pr.next, pr.is_paused()) == (ProgressState.PROBE, index + 1, True)


def test_stale_snapshot_is_ignored() -> None:
    """A snapshot at or below the follower's commit index is not installed; the follower answers its commit."""
    net = Network([1, 2, 3])
    net.elect(1)
    net[1].raw.propose_many([b"a", b"b"])
    net.stabilize()
    follower = net[2].raw
    committed = follower.raft.log.committed
    last = follower.raft.log.last_index()
    stale = Snapshot(SnapshotMetadata(index=committed - 1, term=2, conf_state=ConfState(voters=(1, 2, 3))))
    follower.step(Message(type=MessageType.SNAP, frm=1, to=2, term=2, snapshot=stale))
    rd = follower.ready()
    assert rd.snapshot is None
    assert [(m.type, m.index, m.reject) for m in rd.messages] == [(MessageType.APP_RESP, committed, False)]
    assert (follower.raft.log.first_index(), follower.raft.log.last_index()) == (2, last)


def test_snapshot_of_an_entry_already_held_only_advances_commit() -> None:
    """A snapshot whose (index, term) the follower already holds fast-forwards the commit index, nothing more."""
    net = Network([1, 2, 3])
    net.elect(1)
    net.isolate(2)
    net[1].raw.propose(b"a")
    net.stabilize()
    net.heal()
    # Give 2 the entry without the commit index, then a snapshot covering it.
    follower = net[2].raw
    leader_log = net.raft(1).log
    last = leader_log.last_index()
    entry = leader_log.entries(last)
    follower.step(Message(type=MessageType.APP, frm=1, to=2, term=2, index=last - 1, log_term=2, entries=entry))
    net.process_ready(2)
    net.take()
    assert follower.raft.log.committed < last
    snap = Snapshot(SnapshotMetadata(index=last, term=2, conf_state=ConfState(voters=(1, 2, 3))))
    follower.step(Message(type=MessageType.SNAP, frm=1, to=2, term=2, snapshot=snap))
    rd = follower.ready()
    assert rd.snapshot is None
    assert follower.raft.log.committed == last
    assert [e.data for e in rd.committed_entries] == [b"a"]
    assert [(m.type, m.index) for m in rd.messages] == [(MessageType.APP_RESP, last)]
