"""The garbage collector against a real apiserver: background, foreground and orphan
propagation, a circle of owners, dangling owners (at creation and after), partial ownership, and the graph's
bookkeeping (pure)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from components.client import kubeconfig
from components.client.listwatch import Resource
from components.client.rest import NotFoundError, RestClient
from components.controllers._gc_graph import Graph
from components.controllers.garbagecollector import GarbageCollector
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import eventually

CM = Resource("", "v1", "configmaps", kind="ConfigMap")


def owned_by(owner: Obj, block: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": block,
    }


def scenario(cluster: ApiserverUnderTest, ns: str, body: Callable[[RestClient, str], Awaitable[None]]) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            await client.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            async with running(client, [GarbageCollector]):
                await body(client, CM.path(ns))

    asyncio.run(go())


async def gone(client: RestClient, path: str) -> bool:
    try:
        await client.get(path)
        return False
    except NotFoundError:
        return True


def test_background_deletion_removes_dependents(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, base: str) -> None:
        owner = await c.create(base, {"metadata": {"name": "owner"}})
        await c.create(base, {"metadata": {"name": "dep", "ownerReferences": [owned_by(owner)]}})
        await c.delete(f"{base}/owner")
        await eventually(lambda: gone(c, f"{base}/dep"), what="the dependent deleted")

    scenario(cluster, "gc-background", body)


def test_foreground_deletion_waits_for_blocking_dependents(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, base: str) -> None:
        owner = await c.create(base, {"metadata": {"name": "owner"}})
        await c.create(
            base, {"metadata": {"name": "dep", "ownerReferences": [owned_by(owner)], "finalizers": ["test/hold"]}}
        )
        await c.delete(f"{base}/owner", {"propagationPolicy": "Foreground"})
        # the dependent is being deleted but held by its own finalizer: the owner waits
        await eventually(lambda: _deleting(c, f"{base}/dep"), what="the dependent marked for deletion")
        await asyncio.sleep(1.0)
        held = await c.get(f"{base}/owner")
        assert held["metadata"]["deletionTimestamp"] and "foregroundDeletion" in held["metadata"]["finalizers"]
        await c.patch(f"{base}/dep", {"metadata": {"finalizers": None}})
        await eventually(lambda: gone(c, f"{base}/owner"), what="the owner gone after its dependent")

    scenario(cluster, "gc-foreground", body)


def test_a_circle_of_owners_deleted_in_the_foreground_goes_whole(cluster: ApiserverUnderTest) -> None:
    """Conformance "should not be blocked by dependency circle": one owns two owns three owns one,
    each reference blocking; deleting one in the foreground deletes all three."""

    async def body(c: RestClient, base: str) -> None:
        made = [await c.create(base, {"metadata": {"name": n}}) for n in ("one", "two", "three")]
        for i, obj in enumerate(made):
            owner = made[i - 1]  # one is owned by three, two by one, three by two
            await c.patch(f"{base}/{obj['metadata']['name']}", {"metadata": {"ownerReferences": [owned_by(owner)]}})
        await asyncio.sleep(0.5)  # the collector has seen the circle
        await c.delete(f"{base}/one", {"propagationPolicy": "Foreground"})
        for name in ("one", "two", "three"):
            await eventually(lambda name=name: gone(c, f"{base}/{name}"), what=f"{name} deleted", timeout=20)

    scenario(cluster, "gc-circle", body)


def test_a_dependent_with_another_owner_alive_only_loses_the_reference(cluster: ApiserverUnderTest) -> None:
    """Conformance "should not delete dependents that have both valid owner and owner that's
    waiting for dependents to be deleted": owner a goes in the foreground; `both` (owned by a
    and b) stays, owned by b alone; `only-a` goes; then a goes."""

    async def body(c: RestClient, base: str) -> None:
        a = await c.create(base, {"metadata": {"name": "a"}})
        b = await c.create(base, {"metadata": {"name": "b"}})
        await c.create(base, {"metadata": {"name": "both", "ownerReferences": [owned_by(a), owned_by(b)]}})
        await c.create(base, {"metadata": {"name": "only-a", "ownerReferences": [owned_by(a)]}})
        await asyncio.sleep(0.5)  # the collector has seen them
        await c.delete(f"{base}/a", {"propagationPolicy": "Foreground"})
        await eventually(lambda: gone(c, f"{base}/a"), what="a gone after its dependents")
        assert await gone(c, f"{base}/only-a")
        kept = await c.get(f"{base}/both")
        assert [r["name"] for r in kept["metadata"]["ownerReferences"]] == ["b"]

    scenario(cluster, "gc-solid", body)


async def _deleting(c: RestClient, path: str) -> bool:
    obj = await c.get(path)
    return bool(obj["metadata"].get("deletionTimestamp"))


def test_orphan_deletion_keeps_dependents_and_drops_their_reference(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, base: str) -> None:
        owner = await c.create(base, {"metadata": {"name": "owner"}})
        await c.create(base, {"metadata": {"name": "dep", "ownerReferences": [owned_by(owner)]}})
        await asyncio.sleep(0.5)  # the collector has seen the dependent
        await c.delete(f"{base}/owner", {"propagationPolicy": "Orphan"})
        await eventually(lambda: gone(c, f"{base}/owner"), what="the owner gone")
        dep = await c.get(f"{base}/dep")
        assert not dep["metadata"].get("ownerReferences")

    scenario(cluster, "gc-orphan", body)


def test_dangling_and_partly_dangling_owners(cluster: ApiserverUnderTest) -> None:
    async def body(c: RestClient, base: str) -> None:
        alive = await c.create(base, {"metadata": {"name": "alive"}})
        ghost = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "ghost",
            "uid": "00000000-dead-beef-0000-000000000000",
        }
        await c.create(base, {"metadata": {"name": "orphaned", "ownerReferences": [ghost]}})
        await c.create(base, {"metadata": {"name": "half", "ownerReferences": [ghost, owned_by(alive, block=False)]}})
        await eventually(lambda: gone(c, f"{base}/orphaned"), what="the object with a dangling owner deleted")

        async def only_alive() -> bool:
            refs = (await c.get(f"{base}/half"))["metadata"].get("ownerReferences") or []
            return [r["name"] for r in refs] == ["alive"]

        await eventually(only_alive, what="the dangling reference removed, the object kept")

    scenario(cluster, "gc-dangling", body)


def test_graph_links_and_unlinks() -> None:
    g = Graph()
    owner = {"metadata": {"uid": "o", "name": "owner"}}
    dep = {"metadata": {"uid": "d", "name": "dep", "ownerReferences": [{"uid": "o", "blockOwnerDeletion": True}]}}
    assert g.upsert(CM, dep) == {"d", "o"}
    assert [n.uid for n in g.dependents_of("o")] == ["d"]  # kept although the owner is unseen
    g.upsert(CM, owner)
    assert [n.uid for n in g.blocking_dependents("o")] == ["d"]
    # the reference stops blocking: the owner is looked at again (its foreground deletion may go on)
    unblocked = {"metadata": {**dep["metadata"], "ownerReferences": [{"uid": "o", "blockOwnerDeletion": False}]}}
    assert g.upsert(CM, unblocked) == {"d", "o"} and g.blocking_dependents("o") == []
    assert g.upsert(CM, unblocked) == {"d"}  # nothing changed: only itself
    g.upsert(CM, dep)
    assert g.remove("o") == {"d"}
    dep["metadata"]["ownerReferences"] = []
    assert g.upsert(CM, dep) == {"d", "o"}
    assert g.dependents_of("o") == [] and g.remove("d") == set()


def test_an_owner_added_just_before_a_foreground_deletion_keeps_its_dependent(cluster: ApiserverUnderTest) -> None:
    """As conformance does it: half of a's dependents get a second owner b, and a is deleted in
    the foreground straight after, before the collector's watch may have seen every new owner:
    the collector decides on each dependent's owners as they are now, so all of those stay."""

    async def body(c: RestClient, base: str) -> None:
        a = await c.create(base, {"metadata": {"name": "a"}})
        b = await c.create(base, {"metadata": {"name": "b"}})
        names = [f"dep-{i}" for i in range(30)]
        for name in names:
            await c.create(base, {"metadata": {"name": name, "ownerReferences": [owned_by(a)]}})
        await asyncio.sleep(0.5)  # the collector has seen them with one owner
        kept = names[::2]
        for name in kept:
            await c.patch(f"{base}/{name}", {"metadata": {"ownerReferences": [owned_by(b)]}}, "strategic")
        await c.delete(f"{base}/a", {"propagationPolicy": "Foreground"})
        await eventually(lambda: gone(c, f"{base}/a"), what="a gone after its dependents", timeout=20)
        left = {o["metadata"]["name"]: o for o in (await c.get(base))["items"]}
        assert sorted(n for n in left if n.startswith("dep-")) == sorted(kept)
        assert all([r["name"] for r in left[n]["metadata"]["ownerReferences"]] == ["b"] for n in kept)

    scenario(cluster, "gc-late-owner", body)
