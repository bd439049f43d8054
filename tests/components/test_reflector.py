"""The reflector's choices that the model test does not pin down: falling back to LIST when the
server refuses sendInitialEvents, failing a stream that ends inside the initial events, and
backing off exponentially (capped) between failures."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from components.client.listwatch import ListResult
from components.client.reflector import Backoff, Reflector
from components.client.rest import ApiError, BadRequestError, InvalidError, WatchEvent
from machinery.objects import Obj
from tests.components.fakeclock import FakeClock


class Recorder:
    def __init__(self) -> None:
        self.replaced: list[tuple[list[Obj], str]] = []
        self.applied: list[tuple[str, Obj]] = []

    def replace(self, items: list[Obj], resource_version: str) -> None:
        self.replaced.append((items, resource_version))

    def apply(self, event_type: str, obj: Obj) -> None:
        self.applied.append((event_type, obj))


class NoWatchList:
    """A server that refuses sendInitialEvents (as kube before 1.27 would) and then watches forever."""

    def __init__(self, refusal: ApiError | None = None) -> None:
        self.watches: list[tuple[str, bool]] = []
        self.refusal = refusal or BadRequestError(400, "BadRequest", "sendInitialEvents is not supported")

    async def list(self, resource_version: str) -> ListResult:
        return ListResult([{"metadata": {"name": "x", "resourceVersion": "5"}}], "7")

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        self.watches.append((resource_version, send_initial_events))
        return self._stream(send_initial_events)

    async def _stream(self, initial: bool) -> AsyncIterator[WatchEvent]:
        if initial:
            raise self.refusal
        await asyncio.Event().wait()
        yield WatchEvent("ADDED", {})  # never reached


KUBE_133_REFUSAL = InvalidError(
    422,
    "Invalid",
    'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for'
    " watch unless the WatchList feature gate is enabled",
)
"""What kube-apiserver 1.33 answers (its WatchList gate is off by default): 422, not 400."""


@pytest.mark.parametrize("refusal", [None, KUBE_133_REFUSAL], ids=["400", "422 kube 1.33"])
def test_a_refused_watch_list_falls_back_to_list_then_watches_from_its_version(refusal: ApiError | None) -> None:
    async def go() -> None:
        source, sink = NoWatchList(refusal), Recorder()
        reflector = Reflector("r", source, sink, clock=FakeClock(), rng=random.Random(1))
        task = asyncio.create_task(reflector.run())
        for _ in range(20):
            await asyncio.sleep(0)
        task.cancel()
        assert sink.replaced == [([{"metadata": {"name": "x", "resourceVersion": "5"}}], "7")]
        assert source.watches == [("", True), ("7", False)]
        assert reflector.synced and not reflector.use_watch_list

    asyncio.run(go())


def test_backoff_doubles_to_its_cap_with_jitter_and_resets() -> None:
    b = Backoff(random.Random(3), initial=1.0, cap=8.0)
    delays = [b.next() for _ in range(6)]
    bases = [1, 2, 4, 8, 8, 8]
    assert all(base <= d < 2 * base for d, base in zip(delays, bases, strict=True))
    b.reset()
    assert 1.0 <= b.next() < 2.0
