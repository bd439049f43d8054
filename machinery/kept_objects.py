"""Objects a component keeps in existence with some fields as it wants them — the apiserver's
`default/kubernetes` Service and its endpoints, its aggregation ConfigMap and local
APIServices, the DNS server's `kube-system/kube-dns` Service and slice.

The rule, once: make what is missing; when it exists, put back the fields the wanted object
sets (labels merged into the user's, `spec` field by field except the create-only ones, other
top-level fields whole) and leave everything else alone; on a lost race (made or changed
meanwhile) look again, a few times a round.  Where the object is read and written (a Registry
inside the apiserver, a REST client outside) is the caller's `ObjectStore`.
"""

from __future__ import annotations

from typing import Protocol

from machinery.objects import Obj

ATTEMPTS = 3  # writes per object a round, on conflicts (another writer raced us)
# the Service fields set on create only: immutable afterwards, so never "put back"
SERVICE_CREATE_ONLY = ("clusterIP", "clusterIPs")


class ObjectStore(Protocol):
    """One object's reads and writes, errors other than the three outcomes below raised."""

    async def get(self) -> Obj | None:
        """The object, or None when it does not exist."""
        ...

    async def create(self, obj: Obj) -> bool:
        """Create it; False when it exists already (made meanwhile)."""
        ...

    async def replace(self, obj: Obj) -> bool:
        """Replace it at the version read; False when it changed or went meanwhile."""
        ...


def put_back(want: Obj, have: Obj, create_only: tuple[str, ...] = SERVICE_CREATE_ONLY) -> Obj | None:
    """`have` with the fields `want` sets put back (labels merged), or None when nothing differs."""
    out = dict(have)
    changed = False
    for key, value in want.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            meta = dict(have.get("metadata") or {})
            labels = meta.get("labels")
            labels = labels if isinstance(labels, dict) else {}
            merged = {**labels, **value.get("labels", {})}
            if merged != labels:
                meta["labels"] = merged
                out["metadata"] = meta
                changed = True
        elif key == "spec":
            spec = dict(have["spec"]) if isinstance(have.get("spec"), dict) else {}
            for field, wanted in value.items():
                if field not in create_only and spec.get(field) != wanted:
                    spec[field] = wanted
                    changed = True
            out["spec"] = spec
        elif have.get(key) != value:
            out[key] = value
            changed = True
    return out if changed else None


async def keep_object(store: ObjectStore, want: Obj) -> str:
    """Make `want` exist with the fields it sets; what was done, for the log: "created",
    "fixed", "" (already so) or "raced" (lost every attempt this round)."""
    for _ in range(ATTEMPTS):
        have = await store.get()
        if have is None:
            if await store.create(want):
                return "created"
            continue  # made meanwhile: look again
        fixed = put_back(want, have)
        if fixed is None:
            return ""
        if await store.replace(fixed):
            return "fixed"
    return "raced"
