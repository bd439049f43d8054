"""The compactor compacts to the revision of one interval ago, and survives storage errors."""

from __future__ import annotations

import asyncio

from apiserver.compactor import compact_forever
from apiserver.storage.interface import CompactedError, UnavailableError
from tests.apiserver.memstorage import MemStorage


def test_compacts_to_the_previous_rounds_revision() -> None:
    async def go() -> tuple[int, list[int]]:
        storage = MemStorage()
        compacted: list[int] = []
        real_compact = storage.compact

        async def record(revision: int) -> None:
            compacted.append(revision)
            await real_compact(revision)

        storage.compact = record  # type: ignore[method-assign]

        async def tick(_: float) -> None:
            await storage.create(f"/registry/x/{len(compacted)}-{await storage.current_revision()}", b"{}")

        first = await storage.create("/registry/x/first", b"{}")
        await compact_forever(storage, sleep=tick, max_rounds=4)
        return first, compacted

    first, compacted = asyncio.run(go())
    # each round compacts to what the previous round read; every tick wrote one revision
    assert compacted == [first, first + 1, first + 2]


def test_errors_do_not_stop_it() -> None:
    class Flaky(MemStorage):
        calls = 0

        async def current_revision(self) -> int:
            self.calls += 1
            if self.calls == 2:
                raise UnavailableError("no quorum")
            return await super().current_revision()

        async def compact(self, revision: int) -> None:
            raise CompactedError(revision)

    async def go() -> int:
        storage = Flaky()

        async def nap(_: float) -> None:
            return None

        await compact_forever(storage, sleep=nap, max_rounds=4)
        return storage.calls

    assert asyncio.run(go()) == 4
