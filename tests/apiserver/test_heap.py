"""The heap keeper: young collections only, survivors frozen on every tick, and everything
thawed and collected in full on schedule."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from apiserver.heap import NEVER, HeapKeeper


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


class Node:
    """A container that can sit in a reference cycle and be watched by a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_a_tick_freezes_what_is_alive() -> None:
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: 0.0)
    keep = [[i] for i in range(1000)]  # tracked containers alive at the tick
    keeper.tick()
    assert gc.get_freeze_count() >= len(keep) and keeper.freezes == 1 and keeper.thaws == 0


def test_a_cycle_alive_at_a_tick_is_freed_at_the_thaw() -> None:
    now = [0.0]
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: now[0])
    a, b = Node(), Node()
    a.other, b.other = b, a
    dead = weakref.ref(a)
    keeper.tick()  # alive: frozen with the rest
    del a, b  # garbage now, but frozen: the price of never scanning what lives
    gc.collect()
    assert dead() is not None
    now[0] = 61.0
    keeper.tick()  # thaw, collect in full, freeze the survivors again
    assert dead() is None
    assert keeper.thaws == 1 and keeper.freezes == 2 and gc.get_freeze_count() > 0


def test_a_cycle_dropped_before_a_tick_is_freed_by_it() -> None:
    keeper = HeapKeeper(thaw_every=60.0, clock=lambda: 0.0)
    gc.collect(0)  # a fresh young count: no automatic collection moves the cycle on before the tick
    dead = cycle()
    keeper.tick()
    assert dead() is None and keeper.thaws == 0


def test_run_collects_only_the_young_generation_and_restores_everything_after() -> None:
    before = gc.get_threshold()

    async def scenario() -> None:
        keeper = HeapKeeper(thaw_every=3600.0)
        task = asyncio.create_task(keeper.run(every=0.01))
        for _ in range(100):
            if keeper.freezes:
                break
            await asyncio.sleep(0.01)
        assert keeper.freezes >= 1 and gc.get_freeze_count() > 0
        assert gc.get_threshold() == (before[0], NEVER, NEVER)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before
