"""Registry.mutate(start_from=...): a caller that knows the object (the quota worker, from its
own last write) skips the store read; a stale guess costs one refused write, never a lost one."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.kinds_support import find, registry, run
from tests.apiserver.memstorage import MemStorage

Obj = dict[str, Any]


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
