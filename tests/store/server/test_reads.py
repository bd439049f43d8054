"""Linearizable read rounds that get no answer are asked again: a ReadIndex message lost on
its way to the leader (a peer connection still being made when a cluster starts) must cost a
retry interval, not the read's whole timeout.  The raft node is a recording stand-in: the
round's bookkeeping is what is shown here; the store's end-to-end tests use real members."""

from __future__ import annotations

import asyncio

import pytest

from store.api import errors as E
from store.raft import ReadState
from store.raft.errors import ProposalDroppedError
from store.server.reads import RETRY_S, ReadIndex


class Node:
    def __init__(self) -> None:
        self.asked: list[bytes] = []
        self.leaderless = False

    def read_index(self, ctx: bytes) -> None:
        if self.leaderless:
            raise ProposalDroppedError("no leader")
        self.asked.append(ctx)


def test_an_unanswered_round_is_asked_again_and_its_reads_go_on_the_answer() -> None:
    async def go() -> None:
        node, now = Node(), [0.0]
        reads = ReadIndex(node, 5.0, lambda: E.NoLeaderError("no leader"), clock=lambda: now[0])  # type: ignore[arg-type]
        read = asyncio.create_task(reads.barrier())
        await asyncio.sleep(0)  # the round is formed and asked
        await asyncio.sleep(0)
        assert node.asked == [b"r1"]
        now[0] = RETRY_S / 2
        reads.retry()
        assert node.asked == [b"r1"]  # not yet: an answer may still come
        now[0] = RETRY_S
        reads.retry()
        assert node.asked == [b"r1", b"r1"]  # the same round, asked again
        reads.release([ReadState(index=7, request_ctx=b"r1")], applied=7)
        await asyncio.wait_for(read, 1.0)
        reads.release([ReadState(index=8, request_ctx=b"r1")], applied=8)  # the late answer: ignored

    asyncio.run(go())


def test_a_retry_without_a_leader_fails_the_reads_at_once() -> None:
    async def go() -> None:
        node, now = Node(), [0.0]
        reads = ReadIndex(node, 5.0, lambda: E.NoLeaderError("no leader"), clock=lambda: now[0])  # type: ignore[arg-type]
        read = asyncio.create_task(reads.barrier())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        node.leaderless, now[0] = True, RETRY_S
        reads.retry()
        with pytest.raises(E.NoLeaderError):
            await asyncio.wait_for(read, 1.0)

    asyncio.run(go())
