"""Registry.mutate(start_from=...): a caller that knows the object (the quota worker, from its
own last write) skips the store read; a stale guess costs one refused write, never a lost one."""

from __future__ import annotations

import copy
from typing import Any

from machinery.objects import Obj
from tests.apiserver.kinds_support import find, registry, run
from tests.apiserver.memstorage import MemStorage


class CountingStorage(MemStorage):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, key: str) -> Any:
        self.gets += 1
        return await super().get(key)


def add_one(obj: Obj | None) -> Obj:
    assert obj is not None
    data = obj.setdefault("data", {})
    data["n"] = str(int(data.get("n", "0")) + 1)
    return obj


def test_a_current_guess_is_written_without_reading_the_store() -> None:
    storage = CountingStorage()
    reg = registry(find("", "configmaps"), storage)

    async def go() -> None:
        created = await reg.create("default", {"metadata": {"name": "c"}, "data": {"n": "0"}})
        guess = copy.deepcopy(created)
        before = storage.gets
        written, _ = await reg.mutate("default", "c", add_one, honour_resource_version=False, start_from=guess)
        assert storage.gets == before
        assert written["data"]["n"] == "1"
        assert guess["data"]["n"] == "0"  # the caller's copy is not changed
        again, _ = await reg.mutate("default", "c", add_one, honour_resource_version=False, start_from=written)
        assert again["data"]["n"] == "2" and storage.gets == before

    run(go())


def test_a_stale_guess_is_refused_by_the_store_and_the_fresh_object_is_mutated() -> None:
    storage = CountingStorage()
    reg = registry(find("", "configmaps"), storage)

    async def go() -> None:
        stale = await reg.create("default", {"metadata": {"name": "c"}, "data": {"n": "0"}})
        await reg.mutate("default", "c", add_one)  # someone else's write: n=1
        written, _ = await reg.mutate(
            "default", "c", add_one, honour_resource_version=False, start_from=copy.deepcopy(stale)
        )
        assert written["data"]["n"] == "2"  # not 1: the stale guess did not win
        assert (await reg.get("default", "c"))["data"]["n"] == "2"

    run(go())


def test_a_guess_of_a_deleted_object_ends_in_not_found() -> None:
    reg = registry(find("", "configmaps"))

    async def go() -> None:
        gone = await reg.create("default", {"metadata": {"name": "c"}})
        await reg.storage.delete(reg.resource.key("default", "c"), int(gone["metadata"]["resourceVersion"]))
        try:
            await reg.mutate("default", "c", add_one, honour_resource_version=False, start_from=gone)
        except Exception as e:
            assert getattr(e, "code", None) == 404
        else:
            raise AssertionError("a mutation of a deleted object was written")

    run(go())


def test_a_write_that_loses_a_race_is_retried_unless_it_named_a_resource_version() -> None:
    """A patch applied to the object read keeps that object's resourceVersion without asking
    for it: losing the race to another writer retries on the fresh object, as kube's patcher
    does (two controllers patching pods/status at once both land).  A body that named a
    resourceVersion (a PUT, a patch carrying one) gets 409 Conflict instead."""
    reg = registry(find("", "configmaps"))

    async def go() -> None:
        await reg.create("default", {"metadata": {"name": "c"}, "data": {"n": "0"}})
        raced = False

        async def patch_with_a_race(old: Obj | None) -> Obj:
            nonlocal raced
            if not raced:  # another writer lands between our read and our write
                raced = True
                await reg.mutate("default", "c", add_one)
            return add_one(old)

        written, _ = await reg.mutate("default", "c", patch_with_a_race)
        assert written["data"]["n"] == "2"  # both increments landed

        pinned = (await reg.get("default", "c"))["metadata"]["resourceVersion"]
        raced = False

        async def put_with_a_race(old: Obj | None) -> Obj:
            nonlocal raced
            if not raced:
                raced = True
                await reg.mutate("default", "c", add_one)
            new = add_one(old)
            new["metadata"]["resourceVersion"] = pinned
            return new

        try:
            await reg.mutate("default", "c", put_with_a_race)
        except Exception as e:
            assert getattr(e, "code", None) == 409
        else:
            raise AssertionError("a write pinned to a stale resourceVersion was retried past it")

    run(go())
