"""How a write through a subresource that is the object itself becomes the object to store.

Kubernetes gives each such subresource its own update strategy (deploymentStatusStrategy,
namespaceFinalizeStrategy, a CustomResourceDefinition's statusStrategy).  Its PrepareForUpdate
does one of two things: keep the stored object and take one part of the request's (`takes`: a
custom resource's /status, /finalize, /approval), or keep the request's object and reset some
parts to the stored ones (`resets`: the built-in kinds' /status, whose GetResetFields is
typically `spec`; the registry then keeps the system metadata as for any update, so annotations
a client writes through /status are kept).  Here that strategy is data,
carried by the subresource's handler object and handed to the registry with the write, so the
registry runs any subresource's strategy (a kind built at run time brings its own) without
knowing subresources by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from apiserver.errors import Cause
from apiserver.patch.jsonvalue import deep_copy
from machinery.objects import Obj

# (the object to store, the stored one) -> causes, as a kind's own validation of an update
UpdateValidation = Callable[[Obj, Obj], list[Cause]]


@dataclass(frozen=True)
class UpdateStrategy:
    """A subresource's PrepareForUpdate, one of:

    - `takes`: the stored object, with the field at that path from the request; everything else
      (metadata included, but for the resourceVersion precondition the request names) is the
      stored object's;
    - `resets`: the request's object, with the fields at those paths from the stored object (or
      absent where it has none); system metadata is then kept as for an update of the object
      itself (apiserver/registry/meta.py: prepare_update)."""

    # the subresource's name, as admission (AdmissionRequest.subResource) and managedFields name it
    name: str
    # the path of the one field the request sets: ("status",), ("spec", "finalizers")
    takes: tuple[str, ...] = ()
    # the paths of the fields the request cannot set (kube's GetResetFields): (("spec",),)
    resets: tuple[tuple[str, ...], ...] | None = None
    # what the field becomes when the request leaves it out or sends null; None: sent as it is
    # (null stays null), removed when left out (kube's status strategies on unstructured objects)
    empty: Callable[[], Any] | None = None
    # whether the kind's defaulting runs on the result (kube defaults no status write)
    defaults: bool = True
    # whether a change of the spec (all but metadata and status) moves metadata.generation
    moves_generation: bool = False
    # the subresource's own ValidateUpdate, in place of the kind's (kube's
    # podEphemeralContainersStrategy checks what a pod update may not change, the added
    # containers, differently); None: the kind's validation
    validate: UpdateValidation | None = None

    def __post_init__(self) -> None:
        if self.resets is not None:
            if self.takes or self.empty is not None:
                raise ValueError(f"subresource {self.name!r}: `resets` goes with neither `takes` nor `empty`")
            if any(not path or not all(path) for path in self.resets):
                raise ValueError(f"subresource {self.name!r}: a path of `resets` names no field")
        elif not self.takes or any(not part for part in self.takes):
            raise ValueError(f"subresource {self.name!r}: `takes` names no field")

    @property
    def from_request(self) -> bool:
        """Whether the result starts from the request's object (its metadata included)."""
        return self.resets is not None

    def prepare(self, new: Obj, old: Obj) -> Obj:
        """The object to store (before the system metadata rules of a `resets` strategy)."""
        if self.resets is not None:
            return _reset(new, old, self.resets)
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


def _reset(new: Obj, old: Obj, paths: tuple[tuple[str, ...], ...]) -> Obj:
    """`new` (a copy) with the field at each path as `old` has it, or absent where `old` has none."""
    result: Obj = deep_copy(new)
    for path in paths:
        *parents, leaf = path
        kept: Any = old
        for part in path:
            kept = kept.get(part, _MISSING) if isinstance(kept, dict) else _MISSING
        target: Any = result
        for part in parents:
            inner = target.get(part)
            if not isinstance(inner, dict):
                if kept is _MISSING:
                    break  # nothing to remove below a missing parent
                inner = target[part] = {}
            target = inner
        else:
            if kept is _MISSING:
                target.pop(leaf, None)
            else:
                target[leaf] = deep_copy(kept)
    return result


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

# /status of a custom resource (kube's CustomResourceDefinition statusStrategy), the default of a
# kind built at run time, and of internal writers that send the stored object with a new status:
# the request's status, the stored rest
STATUS = UpdateStrategy("status", takes=("status",), defaults=False)

# /status of the built-in kinds (kube's *StatusStrategy): the request's object, spec reset (and, per
# kind, the fields its GetResetFields names besides)
SPEC = ("spec",)
LABELS = ("metadata", "labels")
OWNER_REFERENCES = ("metadata", "ownerReferences")
# metav1.ResetObjectMetaForStatus: every user-set metadata field (the system ones the registry keeps)
OBJECT_META = (LABELS, ("metadata", "annotations"), ("metadata", "finalizers"), OWNER_REFERENCES)


def status_resetting(*paths: tuple[str, ...]) -> UpdateStrategy:
    """A built-in kind's /status strategy: everything from the request but spec and `paths`."""
    return UpdateStrategy("status", resets=(SPEC, *paths), defaults=False)


BUILTIN_STATUS = status_resetting()

# namespaces/finalize (kube's namespaceFinalizeStrategy): only spec.finalizers, the namespace
# controller's list; left out or null, it empties
FINALIZE = UpdateStrategy("finalize", takes=("spec", "finalizers"), empty=list)
