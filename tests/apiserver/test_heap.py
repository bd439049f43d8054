"""The heap keeper freezes what survived a full collection and thaws it all on schedule."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from apiserver.heap import HeapKeeper


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_nothing_is_frozen_before_a_full_collection() -> None:
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: 0.0)
    keeper.on_collection("stop", {"generation": 1})
    keeper.on_collection("start", {"generation": 2})
    keeper.tick()
    assert gc.get_freeze_count() == 0 and keeper.freezes == 0


def test_survivors_of_a_full_collection_are_frozen_once() -> None:
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: 0.0)
    keep = [[i] for i in range(1000)]  # tracked containers that outlive the collection
    keeper.on_collection("stop", {"generation": 2})
    keeper.tick()
    assert gc.get_freeze_count() >= len(keep)
    keeper.tick()
    assert keeper.freezes == 1


def test_everything_is_thawed_on_schedule_so_frozen_cycles_can_be_collected() -> None:
    now = [0.0]
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: now[0])
    keeper.on_collection("stop", {"generation": 2})
    keeper.tick()
    assert gc.get_freeze_count() > 0
    now[0] = 61.0
    keeper.on_collection("stop", {"generation": 2})
    keeper.tick()  # thawing wins over freezing in the same tick
    assert gc.get_freeze_count() == 0 and keeper.thaws == 1
    keeper.tick()
    assert keeper.freezes == 1


def test_run_installs_its_hook_and_removes_it() -> None:

    async def scenario() -> None:
        keeper = HeapKeeper(thaw_every=3600.0)
        task = asyncio.create_task(keeper.run(every=0.01))
        await asyncio.sleep(0.05)
        assert keeper.on_collection in gc.callbacks
        gc.collect()  # a full collection: the next tick freezes
        for _ in range(100):
            if keeper.freezes:
                break
            await asyncio.sleep(0.01)
        assert keeper.freezes >= 1 and gc.get_freeze_count() > 0
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert keeper.on_collection not in gc.callbacks

    asyncio.run(scenario())
    assert gc.get_freeze_count() == 0
