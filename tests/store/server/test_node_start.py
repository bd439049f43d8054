"""A member's Raft loop starts its election clock two ticks short of the election timeout
(etcd's --initial-election-tick-advance), so that a fresh cluster elects a leader after
2..election_ticks+2 ticks rather than election_ticks..2*election_ticks."""

from __future__ import annotations

import asyncio

from store.raft import RawNode, StateType
from store.server.node import RaftNode
from tests.store.raft.harness import FixedRng, make_config, storage_with_log


def _node(offset: int) -> RaftNode:
    """Member 1 of three, whose randomized election timeout is election_tick + `offset`."""
    storage = storage_with_log([1, 2, 3], [])
    raw = RawNode(make_config(1, storage, rng=FixedRng(offset)))
    # a tick an hour: the loop never ticks during the test, only the advance at start does
    return RaftNode(raw, storage, lambda rd: None, lambda s: None, lambda ms: None, lambda rd: None, 3600.0)


def test_a_started_member_campaigns_within_election_ticks_plus_two() -> None:
    async def go() -> None:
        for offset in (0, 9):  # the shortest and the longest randomized timeout of election_tick 10
            node = _node(offset)
            raft = node.raw.raft
            node.start()
            try:
                assert raft.election_elapsed == raft.election_timeout - 2
                ticks = 0
                while raft.state == StateType.FOLLOWER and ticks < 100:
                    node.raw.tick()
                    ticks += 1
                # it pre-votes after the rest of its randomized timeout: 2 ticks (offset 0) to
                # 11 (offset 9), where a member that started from 0 waited 10 to 19
                assert raft.state == StateType.PRE_CANDIDATE and ticks == 2 + offset, (raft.state, ticks)
            finally:
                await node.stop()

    asyncio.run(go())
