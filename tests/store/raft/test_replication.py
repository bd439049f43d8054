"""Log replication: batching, size limits, pipelining, probing, fast backtracking, progress states."""

from __future__ import annotations

import pytest

from store.raft.progress import ProgressState
from store.raft.types import HardState, Message, MessageType, StateType
from tests.store.raft.harness import Network, is_type, storage_with_log

APP_TO_2 = is_type(MessageType.APP, frm=1, to=2)


def elected_network(ids: list[int] | None = None, **config: object) -> Network:
    net = Network(ids or [1, 2, 3], **config)
    net.elect(1)
    return net


def test_propose_many_sends_all_entries_in_one_append_per_follower() -> None:
    """propose_many appends the batch once and ships it in a single MsgApp to each follower."""
    net = elected_network()
    last = net.raft(1).log.last_index()
    net[1].raw.propose_many([b"a", b"b", b"c", b"d"])
    net.process_ready(1)
    apps = net.take(is_type(MessageType.APP, frm=1))
    assert sorted(m.to for m in apps) == [2, 3]
    for m in apps:
        assert m.index == last
        assert [(e.index, e.data) for e in m.entries] == [
            (last + 1, b"a"),
            (last + 2, b"b"),
            (last + 3, b"c"),
            (last + 4, b"d"),
        ]


def test_max_size_per_msg_limits_bytes_per_append() -> None:
    """No MsgApp carries more than max_size_per_msg bytes of entries, yet every entry gets through."""
    payloads = [bytes([65 + i]) * 100 for i in range(5)]  # 116 bytes each with the per-entry overhead
    net = elected_network(max_size_per_msg=250)
    sent_before = len(net.sent)
    net[1].raw.propose_many(payloads)
    net.process_ready(1)
    [first] = net.peek(APP_TO_2)
    assert [e.data for e in first.entries] == payloads[:2]
    net.stabilize()
    apps = [m for m in net.sent[sent_before:] if APP_TO_2(m) and m.entries]
    assert [len(m.entries) for m in apps] == [2, 2, 1]
    assert net.applied_data(2) == payloads


def test_append_always_carries_at_least_one_entry_even_over_the_size_limit() -> None:
    """With max_size_per_msg smaller than any entry, each MsgApp carries exactly one entry."""
    net = elected_network(max_size_per_msg=1)
    sent_before = len(net.sent)
    net[1].raw.propose_many([b"x" * 50, b"y" * 50, b"z" * 50])
    net.stabilize()
    apps = [m for m in net.sent[sent_before:] if APP_TO_2(m) and m.entries]
    assert [len(m.entries) for m in apps] == [1, 1, 1]
    assert net.applied_data(2) == [b"x" * 50, b"y" * 50, b"z" * 50]


def test_replicate_state_pipelines_up_to_max_inflight_then_pauses() -> None:
    """In REPLICATE the leader sends max_inflight_msgs appends without acks, then waits; an ack frees one slot."""
    net = elected_network(max_inflight_msgs=3, max_size_per_msg=1)
    net.isolate(3)
    pr = net.raft(1).prs[2]
    assert pr.state == ProgressState.REPLICATE
    last = net.raft(1).log.last_index()
    for i in range(5):
        net[1].raw.propose(b"p%d" % i)
        net.process_ready(1)
    apps = net.take(APP_TO_2)
    assert [[e.index for e in m.entries] for m in apps] == [[last + 1], [last + 2], [last + 3]]
    assert (pr.is_paused(), pr.inflights.count(), pr.next) == (True, 3, last + 4)

    net.deliver(apps[0])  # the first append reaches 2, its ack frees one slot
    net.process_ready(2)
    [ack] = net.take(is_type(MessageType.APP_RESP, frm=2))
    assert (ack.index, ack.reject) == (last + 1, False)
    net.deliver(ack)
    net.process_ready(1)
    [more] = net.take(APP_TO_2)
    assert [e.index for e in more.entries] == [last + 4]
    assert (pr.match, pr.inflights.count(), pr.is_paused()) == (last + 1, 3, True)


def test_replicate_window_is_also_bounded_by_inflight_bytes() -> None:
    """With max_inflight_bytes the leader stops pipelining once the bytes in flight reach the limit."""
    net = elected_network(max_inflight_bytes=100, max_size_per_msg=1)
    net.isolate(3)
    pr = net.raft(1).prs[2]
    for i in range(4):
        net[1].raw.propose(bytes([97 + i]) * 50)  # 66 bytes each with the per-entry overhead
        net.process_ready(1)
    apps = net.take(APP_TO_2)
    assert [len(m.entries) for m in apps] == [1, 1]
    assert (pr.is_paused(), pr.inflights.count()) == (True, 2)


def test_probe_state_sends_one_append_then_waits_for_an_answer() -> None:
    """In PROBE the leader sends one MsgApp and nothing more until the follower answers."""
    net = elected_network()
    leader = net[1].raw
    leader.report_unreachable(2)
    pr = net.raft(1).prs[2]
    assert pr.state == ProgressState.PROBE
    last = net.raft(1).log.last_index()
    leader.propose(b"a")
    leader.propose(b"b")
    net.process_ready(1)
    [probe] = net.take(APP_TO_2)
    assert (probe.index, [e.data for e in probe.entries]) == (last, [b"a"])
    assert pr.is_paused()
    net.deliver(probe)
    net.process_ready(2)
    net.deliver_all(drop=lambda m: m.to == 3)
    net.process_ready(1)
    assert pr.state == ProgressState.REPLICATE
    [rest] = net.take(APP_TO_2)
    assert (rest.index, [e.data for e in rest.entries]) == (last + 1, [b"b"])


def test_lost_probe_is_resent_after_a_heartbeat_response() -> None:
    """A paused PROBE follower gets its append again once it answers a heartbeat."""
    net = elected_network()
    leader = net[1].raw
    leader.report_unreachable(2)
    last = net.raft(1).log.last_index()
    leader.propose(b"a")
    net.process_ready(1)
    net.take(APP_TO_2)  # the probe is lost
    leader.propose(b"b")
    net.process_ready(1)
    assert net.peek(APP_TO_2) == []
    net.take()
    leader.tick()  # heartbeat_tick = 1
    net.process_ready(1)
    net.deliver_all(drop=lambda m: m.to == 3)
    net.process_ready(2)
    [hb_resp] = net.take(is_type(MessageType.HEARTBEAT_RESP, frm=2))
    net.deliver(hb_resp)
    net.process_ready(1)
    [retry] = net.take(APP_TO_2)
    assert (retry.index, [e.data for e in retry.entries]) == (last, [b"a", b"b"])


@pytest.mark.parametrize(
    ("leader_terms", "follower_terms", "expected_rejections"),
    [
        # The follower holds a longer tail from an older term (2) than the leader's tail (3): the
        # follower's hint (56, term 2) lets the leader skip its whole term-3 run at once.
        ([1] * 5 + [3] * 50, [1] * 5 + [2] * 60, [(56, 56, 2)]),
        # The follower's tail has a *higher* term (3) than the leader's entries there (2): the
        # follower itself skips its term-3 run and hints the common prefix.
        ([1] * 5 + [2] * 50, [1] * 5 + [3] * 60, [(56, 6, 1)]),
        # Both: one round trip per term boundary, not per entry.
        ([1] * 5 + [2] * 50 + [4], [1] * 5 + [3] * 60, [(57, 57, 3), (56, 6, 1)]),
    ],
    ids=["follower-tail-older-term", "follower-tail-newer-term", "two-term-boundaries"],
)
def test_fast_backtracking_repairs_long_divergence_in_few_round_trips(
    leader_terms: list[int], follower_terms: list[int], expected_rejections: list[tuple[int, int, int]]
) -> None:
    """A follower diverging over 50+ entries is repaired in one rejection per term, via reject_hint/log_term."""
    term = max(leader_terms + follower_terms)
    net = Network([], pre_vote=False)
    for nid, terms in ((1, leader_terms), (2, follower_terms), (3, leader_terms)):
        net.add_member(nid, storage=storage_with_log([1, 2, 3], terms, HardState(term=term, commit=6)))
    sent_before = len(net.sent)
    net.elect(1)
    assert net.raft(1).term == term + 1
    rejections = [m for m in net.sent[sent_before:] if m.type == MessageType.APP_RESP and m.reject]
    assert [(m.index, m.reject_hint, m.log_term) for m in rejections] == expected_rejections
    assert all(m.frm == 2 for m in rejections)
    # The append after the last rejection skips the whole divergent run: it follows the common prefix (index 6).
    later = net.sent[net.sent.index(rejections[-1]) :]
    retry = next(m for m in later if APP_TO_2(m))
    assert (retry.index, retry.log_term) == (6, 1)
    leader_log = [(e.index, e.term) for e in net.raft(1).log.all_entries()]
    follower_log = [(e.index, e.term) for e in net.raft(2).log.all_entries()]
    assert follower_log == leader_log
    assert len(leader_log) == len(leader_terms) + 1


def test_progress_state_transitions_probe_replicate_probe_snapshot() -> None:
    """A follower's progress goes PROBE→REPLICATE on ack, →PROBE on reject or unreachable, →SNAPSHOT when compacted."""
    net = Network([1, 2, 3], pre_vote=False)
    net[1].raw.campaign()
    net.process_all()
    net.deliver_all()
    net.process_all()
    net.deliver_all()  # the votes reach 1: it is leader, its first appends are out
    leader = net.raft(1)
    pr = leader.prs[2]
    assert (leader.state, pr.state) == (StateType.LEADER, ProgressState.PROBE)
    net.stabilize()
    assert pr.state == ProgressState.REPLICATE

    # Reject: an append to 2 is lost, the next one does not match, 2 rejects it.
    match = pr.match
    net[1].raw.propose(b"lost")
    net.process_ready(1)
    net.take(APP_TO_2)
    net[1].raw.propose(b"gap")
    net.process_ready(1)
    [gap] = net.take(APP_TO_2)
    assert gap.index == match + 1
    net.deliver(gap)
    net.process_ready(2)
    [reject] = net.take(is_type(MessageType.APP_RESP, frm=2))
    assert (reject.reject, reject.index) == (True, match + 1)
    net.deliver(reject)
    assert (pr.state, pr.next) == (ProgressState.PROBE, match + 1)
    net.stabilize()
    assert (pr.state, pr.match) == (ProgressState.REPLICATE, leader.log.last_index())

    # Unreachable: back to PROBE.
    net[1].raw.report_unreachable(2)
    assert pr.state == ProgressState.PROBE
    net.stabilize()
    net[1].raw.propose(b"again")
    net.stabilize()
    assert pr.state == ProgressState.REPLICATE

    # Compacted: 2 misses entries that the leader compacts away, it needs a snapshot.
    net.isolate(2)
    net[1].raw.propose_many([b"c1", b"c2", b"c3"])
    net.stabilize()
    applied = net[1].applied_index
    net[1].storage.create_snapshot(applied, leader.conf_state(), b"")
    net[1].storage.compact(applied)
    net[1].raw.report_unreachable(2)
    net.heal()
    net.report_snapshots = False
    net[1].raw.propose(b"after-compaction")
    net.process_ready(1)
    assert (pr.state, pr.pending_snapshot) == (ProgressState.SNAPSHOT, applied)
    [snap] = net.take(is_type(MessageType.SNAP, to=2))
    assert snap.snapshot is not None and snap.snapshot.metadata.index == applied


def test_heartbeat_never_lets_a_follower_commit_past_its_match() -> None:
    """The commit index carried by a heartbeat is min(follower's match, leader commit)."""
    net = elected_network()
    net.isolate(3)
    net[1].raw.propose(b"x")
    net.stabilize()
    leader = net.raft(1)
    assert leader.log.committed > leader.prs[3].match
    net.heal()
    net[1].raw.tick()
    net.process_ready(1)
    beats = {m.to: m for m in net.take(is_type(MessageType.HEARTBEAT, frm=1))}
    assert beats[2].commit == leader.log.committed
    assert beats[3].commit == leader.prs[3].match


def test_follower_rejects_append_that_does_not_match_and_hints_its_last_index() -> None:
    """A follower missing the previous entry rejects with reject_hint = its last index and that entry's term."""
    net = elected_network()
    follower = net[2].raw
    last = follower.raft.log.last_index()
    follower.step(Message(type=MessageType.APP, frm=1, to=2, term=2, index=last + 5, log_term=2, commit=0))
    [resp] = follower.ready().messages
    assert (resp.type, resp.reject, resp.index) == (MessageType.APP_RESP, True, last + 5)
    assert (resp.reject_hint, resp.log_term) == (last, 2)


def test_heartbeat_round_returns_idle_probing_follower_to_replicate() -> None:
    """An up-to-date follower moved to PROBE by report_unreachable is back in REPLICATE after one heartbeat round.

    etcd-io/raft: testdata/heartbeat_rep_recovers_from_probing.txt — the empty probe the leader sends on the
    heartbeat response is acknowledged at the follower's match index, and that ack ends the probing.
    """
    net = elected_network()
    leader = net.raft(1)
    pr = leader.prs[2]
    assert (pr.state, pr.match) == (ProgressState.REPLICATE, leader.log.last_index())
    net[1].raw.report_unreachable(2)
    assert pr.state == ProgressState.PROBE
    sent_before = len(net.sent)
    net.tick_all(1)  # heartbeat → response → empty probe MsgApp → ack at match
    probes = [m for m in net.sent[sent_before:] if APP_TO_2(m)]
    assert [(m.index, m.entries) for m in probes] == [(pr.match, [])]
    assert pr.state == ProgressState.REPLICATE
    sent_before = len(net.sent)
    net.tick_all(3)  # idle: heartbeats only, no more probes
    assert [m for m in net.sent[sent_before:] if APP_TO_2(m)] == []
