"""wait_event: set, timed out, and a cancellation that arrives as the event is set still cancels
(Python 3.11's wait_for returns the result instead, and a loop around it never stops)."""

from __future__ import annotations

import asyncio

import pytest

from machinery.clock import wait_event


def test_set_and_timed_out() -> None:
    async def go() -> tuple[bool, bool]:
        event = asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, event.set)
        return await wait_event(event, 5.0), await wait_event(asyncio.Event(), 0.01)

    assert asyncio.run(go()) == (True, False)


def test_a_cancel_that_races_the_event_is_not_swallowed() -> None:
    async def loop_forever(event: asyncio.Event) -> None:
        while True:
            event.clear()
            await wait_event(event, 10.0)

    async def go() -> None:
        for _ in range(200):  # the cancel and the set land in the same loop iteration
            event = asyncio.Event()
            task = asyncio.create_task(loop_forever(event))
            await asyncio.sleep(0)
            event.set()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 1.0)

    asyncio.run(go())
