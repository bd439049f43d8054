"""What a DELETE does to an object: remove it now, or mark it and keep it.

Kubernetes keeps an object that has finalizers (deletionTimestamp set, the finalizers'
owners clean up and remove them, and the last removal deletes it), and deletes pods
gracefully: a pod bound to a node gets deletionTimestamp = now + grace and stays until its
kubelet confirms with a grace-0 delete; a pod never scheduled goes at once.  A Foreground or
Orphan propagation policy adds the `foregroundDeletion` / `orphan` finalizer that the garbage
collector acts on.  Namespaces (resources declaring `spec_finalizers`) are kept
by `spec.finalizers` too: the first DELETE only marks them Terminating, later ones change
nothing while `spec.finalizers` is not empty, and the namespace controller's `/finalize` that
empties it removes the namespace (kube-apiserver's namespace storage; a later DELETE finds it gone).
Pure: the time is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from apiserver import errors
from apiserver.patch.jsonvalue import deep_copy
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj
from machinery.timestamps import format_time

POLICIES = ("Orphan", "Background", "Foreground")


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    precondition_uid: str | None = None
    precondition_resource_version: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: Obj | None, query: dict[str, str]) -> DeleteOptions:
        """From the DeleteOptions body and/or the query string (the query wins, as kube's does)."""
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise errors.bad_request("DeleteOptions: expected an object")
        grace: Any = body.get("gracePeriodSeconds")
        if "gracePeriodSeconds" in query:
            grace = query["gracePeriodSeconds"]
        if grace is not None:
            try:
                grace = int(grace)
            except (TypeError, ValueError):
                raise errors.bad_request(f"gracePeriodSeconds: invalid value {grace!r}: expected an integer") from None
            if grace < 0:
                grace = 1  # kube treats a negative grace as "as soon as possible", not immediately
        policy = query.get("propagationPolicy", body.get("propagationPolicy"))
        if policy is not None and policy not in POLICIES:
            raise errors.invalid(
                "DeleteOptions",
                "",
                [errors.Cause("FieldValueNotSupported", f'Unsupported value: "{policy}"', "propagationPolicy")],
            )
        pre = body.get("preconditions")
        if pre is None:
            pre = {}
        if not isinstance(pre, dict):
            raise errors.bad_request("preconditions: expected an object")
        dry = query.get("dryRun") == "All" or body.get("dryRun") == ["All"]
        return cls(grace, policy, pre.get("uid"), pre.get("resourceVersion"), dry)


@dataclass(frozen=True, slots=True)
class Plan:
    action: Literal["delete", "update", "nothing"]
    obj: Obj  # the object to store (update), or the object as it was (delete, nothing)


def check_preconditions(resource: ResourceDef, obj: Obj, options: DeleteOptions) -> None:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    if options.precondition_uid and options.precondition_uid != meta.get("uid"):
        raise errors.conflict(
            resource.plural,
            name,
            resource.group,
            f"Precondition failed: UID in precondition: {options.precondition_uid}, "
            f"UID in object meta: {meta.get('uid')}",
        )
    rv = options.precondition_resource_version
    if rv and rv != meta.get("resourceVersion"):
        raise errors.conflict(
            resource.plural,
            name,
            resource.group,
            f"Precondition failed: ResourceVersion in precondition: {rv}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def _grace(resource: ResourceDef, obj: Obj, options: DeleteOptions) -> int:
    if not resource.graceful:
        return 0
    spec = obj.get("spec") or {}
    if not spec.get("nodeName"):
        return 0  # never scheduled: nobody to wait for
    phase = (obj.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return 0
    if options.grace_period_seconds is not None:
        return options.grace_period_seconds
    default = spec.get("terminationGracePeriodSeconds")
    return int(default) if isinstance(default, int) and default >= 0 else 30


def spec_finalizers(resource: ResourceDef, obj: Obj) -> list[Any]:
    """The finalizers in `spec` that hold a namespace (none for any other resource)."""
    if not resource.spec_finalizers:
        return []
    spec = obj.get("spec")
    found = spec.get("finalizers") if isinstance(spec, dict) else None
    return list(found) if isinstance(found, list) else []


def _with_policy_finalizers(meta: Obj, policy: str | None) -> list[Any]:
    finalizers = list(meta.get("finalizers") or [])
    if policy == "Foreground" and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    elif policy == "Orphan" and "orphan" not in finalizers:
        finalizers.append("orphan")
    return finalizers


def _start_terminating(obj: Obj, finalizers: list[Any], now: float) -> Plan:
    """A namespace's first DELETE: Terminating, kept until the namespace controller finalizes it."""
    new = deep_copy(obj)
    new_meta = new["metadata"]
    new_meta["deletionTimestamp"] = format_time(now)
    if finalizers:
        new_meta["finalizers"] = finalizers
    status = new.get("status")
    if not isinstance(status, dict):
        status = new["status"] = {}
    status["phase"] = "Terminating"
    return Plan("update", new)


def plan_delete(resource: ResourceDef, obj: Obj, options: DeleteOptions, now: float) -> Plan:
    check_preconditions(resource, obj, options)
    meta = obj.get("metadata") or {}
    finalizers = _with_policy_finalizers(meta, options.propagation_policy)
    if resource.spec_finalizers:
        if not meta.get("deletionTimestamp"):
            return _start_terminating(obj, finalizers, now)
        if spec_finalizers(resource, obj):
            return Plan("nothing", obj)  # the namespace controller has not finished yet
    grace = _grace(resource, obj, options)
    if meta.get("deletionTimestamp"):
        # Already being deleted: a shorter grace period (the kubelet's 0) may finish it.
        current = meta.get("deletionGracePeriodSeconds")
        if not finalizers and grace == 0:
            return Plan("delete", obj)
        if isinstance(current, int) and grace < current:
            new = deep_copy(obj)
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            new["metadata"]["deletionTimestamp"] = format_time(now + grace)
            return Plan("update", new)
        return Plan("nothing", obj)
    if not finalizers and grace == 0:
        return Plan("delete", obj)
    new = deep_copy(obj)
    new_meta = new["metadata"]
    new_meta["deletionTimestamp"] = format_time(now + grace)
    new_meta["deletionGracePeriodSeconds"] = grace
    if finalizers:
        new_meta["finalizers"] = finalizers
    return Plan("update", new)


def finished(resource: ResourceDef, obj: Obj) -> bool:
    """An update that leaves a deleted object without finalizers deletes it, once its grace
    period is over: 0, or none at all (kube's ShouldDeleteDuringUpdate).

    A Terminating namespace has no grace period and is also held by `spec.finalizers`, so the
    `/finalize` that removes the last one removes the namespace, as kube-apiserver's
    ShouldDeleteNamespaceDuringUpdate does: kube's namespace controller sends no DELETE after
    it.  (A DELETE that starts the termination writes without this check.)"""
    meta = obj.get("metadata") or {}
    return (
        bool(meta.get("deletionTimestamp"))
        and not meta.get("finalizers")
        and meta.get("deletionGracePeriodSeconds") in (None, 0)
        and not spec_finalizers(resource, obj)
    )
