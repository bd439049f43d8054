"""until_first_ends: the first coroutine to end ends them all, and nothing is left running."""

from __future__ import annotations

import asyncio

import pytest

from machinery.tasks import until_first_ends


def test_the_first_to_end_cancels_the_others_and_waits_for_them() -> None:
    seen: list[str] = []

    async def quick() -> None:
        await asyncio.sleep(0)
        seen.append("quick ended")

    async def slow() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # its cleanup is awaited before the call returns
            seen.append("slow cancelled")
            raise

    async def go() -> set[asyncio.Task[object]]:
        before = asyncio.all_tasks()
        await until_first_ends(slow(), quick())
        return asyncio.all_tasks() - before

    assert asyncio.run(asyncio.wait_for(go(), 5)) == set()  # nothing left running
    assert seen == ["quick ended", "slow cancelled"]


def test_a_failure_ends_them_too_and_is_not_left_unretrieved() -> None:
    async def boom() -> None:
        raise OSError("the peer hung up")

    async def go() -> None:
        await until_first_ends(asyncio.sleep(60), boom())

    asyncio.run(asyncio.wait_for(go(), 5))  # returns: each relay reports its own failures


def test_cancelling_the_caller_cancels_every_task() -> None:
    cancelled: list[int] = []

    async def forever(i: int) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise

    async def go() -> None:
        before = asyncio.all_tasks()
        task = asyncio.create_task(until_first_ends(forever(1), forever(2)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert asyncio.all_tasks() - before == set()

    asyncio.run(asyncio.wait_for(go(), 5))
    assert sorted(cancelled) == [1, 2]
