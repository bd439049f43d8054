"""How a write through a subresource that is the object itself becomes the object to store.

Kubernetes gives each such subresource its own update strategy (deploymentStatusStrategy,
namespaceFinalizeStrategy, a CustomResourceDefinition's statusStrategy): its PrepareForUpdate
keeps the stored object and takes one part of the request's.  Here that strategy is data,
carried by the subresource's handler object and handed to the registry with the write, so the
registry runs any subresource's strategy (a kind built at run time brings its own) without
knowing subresources by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.patch.jsonvalue import deep_copy
from machinery.objects import Obj


@dataclass(frozen=True)
class UpdateStrategy:
    """A subresource's PrepareForUpdate: the stored object, with the field at `takes` from the request.

    Everything else (metadata included, but for the resourceVersion precondition the request
    names) is the stored object's."""

    # the subresource's name, as admission (AdmissionRequest.subResource) and managedFields name it
    name: str
    # the path of the one field the request sets: ("status",), ("spec", "finalizers")
    takes: tuple[str, ...]
    # what the field becomes when the request leaves it out or sends null; None: sent as it is
    # (null stays null), removed when left out (kube's status strategies on unstructured objects)
    empty: Callable[[], Any] | None = None
    # whether the kind's defaulting runs on the result (kube defaults no status write)
    defaults: bool = True
    # whether a change of the spec (all but metadata and status) moves metadata.generation
    moves_generation: bool = False

    def __post_init__(self) -> None:
        if not self.takes or any(not part for part in self.takes):
            raise ValueError(f"subresource {self.name!r}: `takes` names no field")

    def prepare(self, new: Obj, old: Obj) -> Obj:
        """The object to store: `old` (a copy) with the taken field from `new`."""
        result: Obj = deep_copy(old)
        *parents, leaf = self.takes
        sent: Any = new
        for part in self.takes:
            sent = sent.get(part, _MISSING) if isinstance(sent, dict) else _MISSING
        if self.empty is not None and (sent is _MISSING or sent is None):
            sent = self.empty()
        target = result
        for part in parents:
            inner = target.get(part)
            if not isinstance(inner, dict):
                if sent is _MISSING:
                    return _with_version(result, new)  # nothing to remove below a missing parent
                inner = target[part] = {}
            target = inner
        if sent is _MISSING:
            target.pop(leaf, None)
        else:
            target[leaf] = sent
        return _with_version(result, new)


def _with_version(result: Obj, new: Obj) -> Obj:
    # the resourceVersion the request names stays its precondition
    new_meta = new.get("metadata")
    version = new_meta.get("resourceVersion") if isinstance(new_meta, dict) else None
    if version:
        meta = result.get("metadata")
        if not isinstance(meta, dict):
            meta = result["metadata"] = {}
        meta["resourceVersion"] = version
    return result


_MISSING: Any = object()

# /status of every kind that has one (kube's *StatusStrategy): the request's status, the stored rest
STATUS = UpdateStrategy("status", takes=("status",), defaults=False)

# namespaces/finalize (kube's namespaceFinalizeStrategy): only spec.finalizers, the namespace
# controller's list; left out or null, it empties
FINALIZE = UpdateStrategy("finalize", takes=("spec", "finalizers"), empty=list)
