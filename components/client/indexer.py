"""The informer's local store: objects by key, plus secondary indexes kept in step with it.

Keys are `namespace/name` (just `name` for cluster-scoped objects), as client-go's
MetaNamespaceKeyFunc.  An index function maps an object to the values it is filed under
(a pod under its node name; any object under each owner's UID); `by_index` answers "every
pod on node-1" without a scan.  Objects are stored as given and must be treated as
read-only by everyone who reads them (no per-read copies: controllers copy before changing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from machinery.objects import Obj

IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"
NODE_NAME_INDEX = "spec.nodeName"
OWNER_UID_INDEX = "ownerUID"
LABEL_INDEX = "label"


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """(namespace or None, name) of a key."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else (None, ns)


def resource_version(obj: Mapping[str, Any]) -> int:
    """The object's resourceVersion as a number (0 when absent or not a number)."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else 0


def by_namespace(obj: Obj) -> Iterable[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return (ns,) if ns else ()


def by_node_name(obj: Obj) -> Iterable[str]:
    node = (obj.get("spec") or {}).get("nodeName")
    return (node,) if isinstance(node, str) and node else ()


def by_owner_uid(obj: Obj) -> Iterable[str]:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return tuple(o["uid"] for o in owners if isinstance(o, dict) and isinstance(o.get("uid"), str))


def by_label(obj: Obj) -> Iterable[str]:
    """Every `key=value` label, so `by_index(LABEL_INDEX, "app=web")` finds the app's objects."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return tuple(f"{k}={v}" for k, v in labels.items()) if isinstance(labels, dict) else ()


STANDARD_INDEXERS: dict[str, IndexFunc] = {
    NAMESPACE_INDEX: by_namespace,
    NODE_NAME_INDEX: by_node_name,
    OWNER_UID_INDEX: by_owner_uid,
    LABEL_INDEX: by_label,
}


class Indexer:
    """A key -> object map with indexes; every change goes through `put` or `remove`."""

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = dict(STANDARD_INDEXERS if indexers is None else indexers)
        # index name -> value -> keys filed under it
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """More indexes (built from what is stored now); a name already in use is an error."""
        for name, fn in indexers.items():
            if name in self._indexers:
                raise ValueError(f"index {name!r} exists already")
            self._indexers[name] = fn
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._file(name, key, obj)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        """The keys held now (a copy: the store may change while the caller iterates)."""
        return iter(list(self._items))

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def keys(self) -> list[str]:
        return list(self._items)

    def items(self) -> Iterator[tuple[str, Obj]]:
        return iter(list(self._items.items()))

    def objects(self) -> list[Obj]:
        return list(self._items.values())

    def put(self, obj: Obj) -> Obj | None:
        """Store `obj` under its key; returns what it replaced."""
        key = key_of(obj)
        old = self._items.get(key)
        if old is not None:
            self._unfile(key, old)
        self._items[key] = obj
        for name in self._indexers:
            self._file(name, key, obj)
        return old

    def remove(self, key: str) -> Obj | None:
        old = self._items.pop(key, None)
        if old is not None:
            self._unfile(key, old)
        return old

    def by_index(self, index: str, value: str) -> list[Obj]:
        if index not in self._indices:
            raise KeyError(f"no index {index!r} (have {sorted(self._indices)})")
        return [self._items[k] for k in self._indices[index].get(value, ())]

    def index_keys(self, index: str, value: str) -> list[str]:
        if index not in self._indices:
            raise KeyError(f"no index {index!r} (have {sorted(self._indices)})")
        return sorted(self._indices[index].get(value, ()))

    def _file(self, name: str, key: str, obj: Obj) -> None:
        index = self._indices[name]
        for value in self._indexers[name](obj):
            index.setdefault(value, set()).add(key)

    def _unfile(self, key: str, obj: Obj) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
