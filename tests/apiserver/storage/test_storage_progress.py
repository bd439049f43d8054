"""Progress requests of one storage watch (apiserver/storage/progress.py), without a store:
at most one request in flight whatever the callers, asked again until covered, bounded."""

from __future__ import annotations

import asyncio

from apiserver.storage.etcd import progress_trusted
from apiserver.storage.progress import ProgressAsker, WatchProgress


def test_concurrent_callers_share_one_request_in_flight() -> None:
    async def go() -> None:
        release = asyncio.Event()
        in_flight = 0
        most = 0

        async def ask() -> None:
            nonlocal in_flight, most
            in_flight += 1
            most = max(most, in_flight)
            await release.wait()
            in_flight -= 1

        asker = ProgressAsker(ask, 10, first_retry=0.01)
        for _ in range(500):
            asker.want(20)
            await asyncio.sleep(0)
        assert asker.asked == 1
        release.set()
        asker.delivered(20)  # the answer covers every caller
        await asyncio.sleep(0.05)
        assert (asker.asked, most) == (1, 1)
        await asker.close()

    asyncio.run(go())


def test_an_unanswered_request_is_asked_again_with_backoff_until_patience() -> None:
    async def go() -> None:
        async def ask() -> None:  # the member drops it (its watcher had events queued)
            pass

        asker = ProgressAsker(ask, 10, first_retry=0.01, max_retry=0.04, patience=0.3)
        asker.want(11)
        await asyncio.sleep(0.1)
        early = asker.asked
        assert 2 <= early <= 6  # 0.01, 0.02, 0.04, 0.04 ...: not a busy loop
        await asyncio.sleep(0.4)
        late = asker.asked
        await asyncio.sleep(0.1)
        assert asker.asked == late <= 12  # gave up after patience
        await asker.close()

    asyncio.run(go())


def test_covered_targets_ask_nothing_and_a_lagging_answer_asks_again() -> None:
    async def go() -> None:
        answers = iter([15, 21])
        asker: ProgressAsker

        async def ask() -> None:
            asker.delivered(next(answers))

        asker = ProgressAsker(ask, 10, first_retry=0.01)
        asker.want(9)
        asker.want(10)
        await asyncio.sleep(0.02)
        assert asker.asked == 0  # already covered
        asker.want(20)
        await asyncio.sleep(0.1)
        assert (asker.asked, asker.covered) == (2, 21)  # 15 was short of 20: asked once more
        assert not asker.delivered(21) and not asker.delivered(3)
        await asker.close()

    asyncio.run(go())


def test_watch_progress_targets_the_newest_revision_seen() -> None:
    async def go() -> None:
        asked: list[str] = []
        wp = WatchProgress()

        def asking(name: str) -> ProgressAsker:
            async def ask() -> None:
                asked.append(name)

            return wp.open(ask, 8)

        a, b = asking("a"), asking("b")
        wp.saw(12)
        wp.saw(5)
        b.delivered(12)
        wp.request()
        await asyncio.sleep(0.01)
        assert (wp.seen, asked, a.covered) == (12, ["a"], 7)
        await wp.close(a)
        await wp.close(b)
        assert wp.watches == 0

    asyncio.run(go())


def test_etcd_progress_is_trusted_from_the_fixed_releases_on() -> None:
    trusted = ["3.4.31", "3.4.40", "3.5.13", "3.5.21", "3.6.0", "3.6.4", "4.0.0"]
    refused = ["3.4.23", "3.4.30", "3.5.12", "3.5.0", "3.3.27", "3.2.32", "", "v3.5.13", "garbage"]
    assert [v for v in trusted if progress_trusted(v)] == trusted
    assert [v for v in refused if progress_trusted(v)] == []
