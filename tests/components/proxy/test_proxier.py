"""The sync loop against real nft in a private namespace, fed by informers over a fake source;
and `raftkube proxy`'s flags."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from components.client.informer import SharedInformer
from components.client.listwatch import ListResult
from components.client.rest import WatchEvent
from components.proxy import nft, rules
from components.proxy.proxier import Proxier
from machinery.objects import Obj
from tests.components.proxy.support import NODE, endpoint, in_ns, netns, service, sh, slice_


class Source:
    """Lists what it was given; its watch never says anything (the test feeds the informer)."""

    def __init__(self, items: list[Obj]) -> None:
        self.items = items

    async def list(self, resource_version: str) -> ListResult:
        return ListResult(self.items, "1")

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        return self._never()

    async def _never(self) -> AsyncIterator[WatchEvent]:
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})  # pragma: no cover


def versioned(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(rv)
    return obj


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def test_sync_loop_applies_changes_coalesced_and_removes_the_table_on_exit() -> None:
    with netns("p") as ns:
        prefix = in_ns(ns)
        table = rules.table_name(NODE.name)

        def listed() -> str:
            return sh(*prefix, "nft", "list", "tables")

        async def scenario() -> None:
            services = SharedInformer(
                "services", Source([versioned(service("web", "10.96.0.50"), 1)]), use_watch_list=False
            )
            slices = SharedInformer("slices", Source([]), use_watch_list=False)
            applied: list[rules.Ruleset] = []

            def apply(rs: rules.Ruleset, previous: rules.Ruleset | None) -> None:
                nft.apply(rs, previous, prefix=prefix)
                applied.append(rs)

            proxier = Proxier(
                services,
                slices,
                NODE,
                apply=apply,
                remove=lambda t: nft.remove(t, prefix=prefix),
                tables=lambda: nft.tables(prefix=prefix),
                min_interval=0.1,
                resync=30,
            )
            task = asyncio.create_task(proxier.run())
            try:
                await wait_for(lambda: len(applied) == 1)
                assert table in listed() and "reject-chain" in applied[0].text
                for i in range(20):  # a burst: far fewer applies than events
                    slices.apply("ADDED", versioned(slice_("web", endpoint(f"10.244.1.{i + 2}"), name=f"w{i}"), 10 + i))
                await wait_for(lambda: "10.244.1.21:8080" in applied[-1].text)
                assert len(applied) <= 5
                live = sh(*prefix, "nft", "list", "table", "ip", table)
                assert "dnat to 10.244.1.21:8080" in live
                assert proxier.healthy() is None and proxier.latencies and max(proxier.latencies) < 1.0
                before = len(applied)
                services.apply("MODIFIED", versioned(service("web", "10.96.0.50"), 99))  # same rules
                await asyncio.sleep(0.3)
                assert len(applied) == before  # the text did not change: nothing applied
                nft.remove(table, prefix=prefix)  # someone deletes it: a resync puts it back
                assert proxier.sync(force=True) and table in listed() and len(applied) == before + 1
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            assert table not in listed()

        asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_failed_apply_is_reported_and_retried() -> None:
    async def scenario() -> None:
        services = SharedInformer(
            "services", Source([versioned(service("web", "10.96.0.50"), 1)]), use_watch_list=False
        )
        slices = SharedInformer("slices", Source([]), use_watch_list=False)
        calls: list[rules.Ruleset | None] = []

        def apply(rs: rules.Ruleset, previous: rules.Ruleset | None) -> None:
            calls.append(previous)
            if len(calls) == 1:
                raise nft.NftError("nft failed (status 1): Error: Could not process rule")

        proxier = Proxier(services, slices, NODE, apply=apply, remove=lambda t: None, retry=0.1)
        task = asyncio.create_task(proxier.run())
        try:
            assert proxier.healthy() == "not synced yet"
            await wait_for(lambda: "Could not process rule" in str(proxier.healthy()))
            await wait_for(lambda: len(calls) >= 2)
            assert calls[1] is None  # replaced whole after a failure
            await wait_for(lambda: proxier.healthy() is None)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(asyncio.wait_for(scenario(), 30))


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--node-ip", "10.0.0.300"], "--node-ip"),
        (["--node-ip", "fd00::1"], "--node-ip"),
        (["--node-ip", "10.0.0.1", "--cluster-cidr", "10.244.0.0/33"], "--cluster-cidr"),
        (["--node-ip", "10.0.0.1", "--health-port", "70000"], "--health-port"),
        (["--node-ip", "10.0.0.1", "--pod-cidr", "10.244.1.0/24x"], "--pod-cidr"),
        (["--node-ip", "10.0.0.1", "--node-name", ""], "--node-name"),
        (["--node-ip", "10.0.0.1", "--kubeconfig", "/nonexistent/kc"], "--kubeconfig"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(flags: list[str], named: str) -> None:
    base = {"--kubeconfig": "/nonexistent/kc", "--node-name": "n", "--cluster-cidr": "10.244.0.0/16"}
    for f in flags[::2]:
        base.pop(f, None)
    argv = [*flags, *(x for kv in base.items() for x in kv)]
    done = subprocess.run(
        [sys.executable, "-m", "components.cli", "proxy", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert named in done.stderr


def test_stopping_during_a_sync_removes_the_table_after_it() -> None:
    """Cancelled while a sync runs in its thread: the removal waits for it, so the table cannot
    come back after the proxy is gone."""

    async def scenario() -> list[str]:
        services = SharedInformer(
            "services", Source([versioned(service("web", "10.96.0.50"), 1)]), use_watch_list=False
        )
        slices = SharedInformer("slices", Source([]), use_watch_list=False)
        order: list[str] = []
        started = threading.Event()

        def apply(rs: rules.Ruleset, previous: rules.Ruleset | None) -> None:
            started.set()
            time.sleep(0.5)
            order.append("applied")

        proxier = Proxier(services, slices, NODE, apply=apply, remove=lambda t: order.append("removed"))
        task = asyncio.create_task(proxier.run())
        await asyncio.to_thread(started.wait, 5)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert proxier.sync() is False  # nothing more once removed
        return order

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == ["applied", "removed"]
