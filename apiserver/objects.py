"""How an object is kept in storage, and read back.

An object is stored as its JSON bytes without `metadata.resourceVersion`: the version is the
key's mod revision, which only exists once the write has committed, so readers put it back
(as kube-apiserver's etcd3 store does).
"""

from __future__ import annotations

import orjson

from machinery.objects import Obj


def for_storage(obj: Obj) -> bytes:
    """The bytes to store: the object without its resourceVersion (it does not mutate `obj`)."""
    meta = obj.get("metadata") or {}
    if "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return orjson.dumps(obj)


def from_storage(value: bytes, revision: int) -> Obj:
    """The object as clients see it: decoded, with resourceVersion = the revision it was written at."""
    obj: Obj = orjson.loads(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return obj
