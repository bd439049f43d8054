"""The garbage collector's ownership graph: who owns whom, by UID, across every resource.

Pure bookkeeping (no I/O): the collector feeds it every object its informers see and asks
which UIDs a change affects.  An owner known only from someone's ownerReference is not in
`nodes` (it may not exist: the collector asks the apiserver before calling it dangling).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.client.listwatch import Resource
from machinery.objects import Obj, owner_references

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


@dataclass(frozen=True)
class OwnerRef:
    uid: str
    api_version: str
    kind: str
    name: str
    block: bool  # blockOwnerDeletion: a foreground deletion of the owner waits for this dependent


@dataclass
class Node:
    uid: str
    resource: Resource
    namespace: str | None
    name: str
    owners: tuple[OwnerRef, ...]
    deleting: bool
    finalizers: frozenset[str]
    dependents: set[str] = field(default_factory=set)


def owner_refs(obj: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    out = []
    for r in owner_references(obj):
        if isinstance(r.get("uid"), str) and r["uid"]:
            out.append(
                OwnerRef(
                    r["uid"],
                    str(r.get("apiVersion") or ""),
                    str(r.get("kind") or ""),
                    str(r.get("name") or ""),
                    r.get("blockOwnerDeletion") is True,
                )
            )
    return tuple(out)


class Graph:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        # owner uid -> dependents' uids (kept for owners not observed yet, too)
        self._dependents: dict[str, set[str]] = {}

    def upsert(self, resource: Resource, obj: Obj) -> set[str]:
        """Record `obj`; returns the UIDs to look at: itself, and owners it stopped or started
        naming, or whose reference changed whether it blocks."""
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not isinstance(uid, str) or not uid:
            return set()
        old = self.nodes.get(uid)
        node = Node(
            uid,
            resource,
            meta.get("namespace") or None,
            str(meta.get("name") or ""),
            owner_refs(obj),
            bool(meta.get("deletionTimestamp")),
            frozenset(f for f in meta.get("finalizers") or () if isinstance(f, str)),
        )
        node.dependents = self._dependents.setdefault(uid, set())
        self.nodes[uid] = node
        before = {o.uid for o in old.owners} if old else set()
        after = {o.uid for o in node.owners}
        for gone in before - after:
            self._unlink(gone, uid)
        for new in after - before:
            self._dependents.setdefault(new, set()).add(uid)
        # an owner whose reference stopped (or started) blocking: its foreground deletion may go on
        reblocked = (
            {o for o, _ in {(o.uid, o.block) for o in old.owners} ^ {(o.uid, o.block) for o in node.owners}}
            if old
            else set()
        )
        return {uid} | (before ^ after) | reblocked

    def remove(self, uid: str) -> set[str]:
        """Forget a deleted object; returns the UIDs to look at: its dependents and its owners."""
        node = self.nodes.pop(uid, None)
        if node is None:
            return set()
        for o in node.owners:
            self._unlink(o.uid, uid)
        dependents = set(self._dependents.get(uid, ()))
        if not dependents:
            self._dependents.pop(uid, None)
        return dependents | {o.uid for o in node.owners}

    def dependents_of(self, uid: str) -> list[Node]:
        return [self.nodes[d] for d in self._dependents.get(uid, ()) if d in self.nodes]

    def blocking_dependents(self, uid: str) -> list[Node]:
        """Dependents that hold up `uid`'s foreground deletion."""
        return [d for d in self.dependents_of(uid) if any(o.uid == uid and o.block for o in d.owners)]

    def _unlink(self, owner: str, dependent: str) -> None:
        deps = self._dependents.get(owner)
        if deps is not None:
            deps.discard(dependent)
            if not deps and owner not in self.nodes:
                del self._dependents[owner]


def dangling_split(node: Node, exists: Mapping[str, bool]) -> tuple[list[OwnerRef], list[OwnerRef]]:
    """(owners that exist, owners that are gone), by the verdicts in `exists` (uid -> bool)."""
    alive = [o for o in node.owners if exists.get(o.uid, True)]
    gone = [o for o in node.owners if not exists.get(o.uid, True)]
    return alive, gone


def uids(nodes: Iterable[Node]) -> list[str]:
    return sorted(n.uid for n in nodes)
