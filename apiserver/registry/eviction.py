"""`pods/eviction`: a delete that the pod's PodDisruptionBudget may refuse (kube's EvictionREST).

The disruption controller keeps each budget's status (how many disruptions are allowed now);
an eviction spends one of them with a compare-and-swap write of the budget before it deletes,
so concurrent evictions never spend more than the budget allows.  Refusals are kube's, so
that `kubectl drain` recognizes them and retries: 429 with a `DisruptionBudget` cause.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from apiserver import errors
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import BUILTIN_STATUS, STATUS
from machinery.disruption import budget_selects
from machinery.objects import Obj, as_dict
from machinery.pods import is_ready, is_terminating
from machinery.timestamps import format_time

DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
# more evictions than this not yet seen by the disruption controller: refuse (kube's MaxDisruptedPodSize)
MAX_DISRUPTED_PODS = 2000
# attempts at deleting a pod whose readiness may change under us (its resourceVersion is the precondition)
_DELETE_ATTEMPTS = 5
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."
SEVERAL = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."


def _count(value: Any) -> int:
    """A status count, 0 when absent or of the wrong type (the safe reading: nothing allowed)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _phase(pod: Obj) -> Any:
    return as_dict(pod.get("status")).get("phase")


def _budget_ignorable(pod: Obj) -> bool:
    """Finished, not yet running, or already going: evicting it disrupts nothing (kube's canIgnorePDB)."""
    return _phase(pod) in ("Succeeded", "Failed", "Pending") or is_terminating(pod)


def _still_processing(pdb_name: Any) -> errors.StatusError:
    cause = errors.Cause(
        DISRUPTION_BUDGET_CAUSE, f"The disruption budget {pdb_name} is still being processed by the server."
    )
    return errors.too_many_requests_because(VIOLATES, [cause], retry_after=10)


def charged(pdb: Obj, pod_name: str, now: float, *, record: bool = True) -> Obj:
    """The PDB with one disruption charged for `pod_name` (a copy), or the refusal kube gives:
    429 while the controller has not seen the PDB's spec or no disruption is allowed, 403 when the
    status is impossible.  `record`: add the pod to disruptedPods (not for a dry run)."""
    meta = as_dict(pdb.get("metadata"))
    status = as_dict(pdb.get("status"))
    name = meta.get("name")
    if _count(status.get("observedGeneration")) < _count(meta.get("generation")):
        raise _still_processing(name)
    allowed = status.get("disruptionsAllowed")
    if isinstance(allowed, int) and not isinstance(allowed, bool) and allowed < 0:
        raise errors.forbidden(
            f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is negative'
        )
    disrupted = as_dict(status.get("disruptedPods"))
    if len(disrupted) > MAX_DISRUPTED_PODS:
        raise errors.forbidden(
            f'poddisruptionbudgets.policy "{name}" is forbidden: DisruptedPods map too big - too many evictions '
            "not confirmed by PDB controller"
        )
    allowed = _count(allowed)
    if allowed == 0:
        needs = (
            f"The disruption budget {name} needs {_count(status.get('desiredHealthy'))} healthy pods "
            f"and has {_count(status.get('currentHealthy'))} currently"
        )
        raise errors.too_many_requests_because(VIOLATES, [errors.Cause(DISRUPTION_BUDGET_CAUSE, needs)])
    out = copy.deepcopy(pdb)
    new_status = out["status"] = as_dict(out.get("status"))
    new_status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        new_status["conditions"] = _insufficient(new_status.get("conditions"), now)
    if record:
        new_status["disruptedPods"] = {**disrupted, pod_name: format_time(now)}
    return out


def _insufficient(held: Any, now: float) -> list[Obj]:
    """DisruptionAllowed False/InsufficientPods (its transition time kept if it was False already)."""
    conditions = [dict(c) for c in held if isinstance(c, dict)] if isinstance(held, list) else []
    for cond in conditions:
        if cond.get("type") == "DisruptionAllowed":
            if cond.get("status") != "False" or not isinstance(cond.get("lastTransitionTime"), str):
                cond["lastTransitionTime"] = format_time(now)
            cond.update({"status": "False", "reason": "InsufficientPods", "message": ""})
            return conditions
    conditions.append(
        {
            "type": "DisruptionAllowed",
            "status": "False",
            "lastTransitionTime": format_time(now),
            "reason": "InsufficientPods",
            "message": "",
        }
    )
    return conditions


def _eviction_options(eviction: Obj, name: str, query: dict[str, str]) -> DeleteOptions:
    """The eviction's DeleteOptions (the query's dryRun/grace win, as for a DELETE)."""
    meta = eviction.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.bad_request("metadata: expected an object")
    given = (meta or {}).get("name")
    if given not in (None, "") and given != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    options = eviction.get("deleteOptions")
    if options is not None and not isinstance(options, dict):
        raise errors.bad_request("deleteOptions: expected an object")
    return DeleteOptions.parse(options, query)


def _pinned(options: DeleteOptions, pod: Obj) -> DeleteOptions:
    """The options with the pod's resourceVersion as precondition unless the client named one:
    the pod must not have become ready (and budgeted) since we decided."""
    if options.precondition_resource_version:
        return options
    rv = as_dict(pod.get("metadata")).get("resourceVersion")
    return dataclasses.replace(options, precondition_resource_version=rv)


async def evict(
    registry: Registry,
    namespace: str | None,
    name: str,
    eviction: Obj,
    query: dict[str, str],
    budgets: Registry | None = None,
) -> None:
    """Delete the pod unless its PodDisruptionBudget forbids it now (kube's EvictionREST.Create).

    A pod that cannot disrupt anything (finished, Pending, already deleting) is deleted without
    asking.  Otherwise the one PDB selecting it decides: an unready pod goes without charge when
    the budget is met (or its policy is AlwaysAllow); a ready one is charged (disruptionsAllowed
    down by one, the pod in disruptedPods) with the PDB's resourceVersion as precondition, then
    deleted.  `budgets`: the PodDisruptionBudget registry (None when the group is not served).
    PDBs are read from storage, so a charge written a moment ago counts."""
    options = _eviction_options(eviction, name, query)
    pod = await registry.get(namespace, name)
    for _ in range(_DELETE_ATTEMPTS):
        if not _budget_ignorable(pod):
            break
        enforce = _phase(pod) not in ("Succeeded", "Failed") and not is_terminating(pod)
        try:
            await _disrupt(registry, namespace, name, _pinned(options, pod) if enforce else options)
            return
        except errors.StatusError as e:
            if e.code != 409 or not enforce or options.precondition_resource_version:
                raise
        pod = await registry.get(namespace, name)  # it changed since we looked: decide again
    else:
        raise errors.conflict("pods", name, "", "the pod kept changing while it was evicted, retry")

    matching = [] if budgets is None else [b for b in await budgets.list_all(namespace) if budget_selects(b, pod)]
    if len(matching) > 1:
        raise errors.internal(SEVERAL)
    if not matching:
        await _disrupt(registry, namespace, name, options)
        return
    pdb = matching[0]
    pdb_name = as_dict(pdb.get("metadata")).get("name")
    if not is_ready(pod):
        policy = as_dict(pdb.get("spec")).get("unhealthyPodEvictionPolicy")
        status = as_dict(pdb.get("status"))
        desired = _count(status.get("desiredHealthy"))
        if policy == "AlwaysAllow" or _count(status.get("currentHealthy")) >= desired > 0:
            # an unready pod is no part of the healthy count: deleting it disrupts nothing
            try:
                await _disrupt(registry, namespace, name, _pinned(options, pod))
            except errors.StatusError as e:
                if e.code == 409 and not options.precondition_resource_version:
                    raise _still_processing(pdb_name) from None
                raise
            return
    await _charge(budgets, namespace, pdb, str(name), registry.clock(), dry_run=options.dry_run)
    await _disrupt(registry, namespace, name, options)


DISRUPTION_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "EvictionByEvictionAPI",
    "message": "Eviction API: evicting",
}


async def _disrupt(registry: Registry, namespace: str | None, name: str, options: DeleteOptions) -> None:
    """kube's addConditionAndDeletePod: the pod is marked `DisruptionTarget` (so a Job's
    podFailurePolicy can tell an eviction from a failure) under the delete's preconditions,
    then deleted, the precondition moved to the version the mark made."""
    if not options.dry_run:

        def mark(pod: Obj | None) -> Obj:
            if pod is None:
                raise errors.not_found("pods", name)
            meta = as_dict(pod.get("metadata"))
            uid, rv = options.precondition_uid, options.precondition_resource_version
            if uid and uid != meta.get("uid"):
                said = f"UID in precondition: {uid}, UID in object meta: {meta.get('uid')}"
                raise errors.conflict("pods", name, "", f"Precondition failed: {said}")
            if rv and rv != meta.get("resourceVersion"):
                now = meta.get("resourceVersion")
                said = f"ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {now}"
                raise errors.conflict("pods", name, "", f"Precondition failed: {said}")
            status = as_dict(pod.get("status"))
            held = [c for c in status.get("conditions") or () if isinstance(c, dict)]
            was = next((c for c in held if c.get("type") == "DisruptionTarget" and c.get("status") == "True"), None)
            stamp = was.get("lastTransitionTime") if was is not None else format_time(registry.clock())
            conditions = [c for c in held if c.get("type") != "DisruptionTarget"]
            conditions.append({**DISRUPTION_TARGET, "lastProbeTime": None, "lastTransitionTime": stamp})
            pod["status"] = {**status, "conditions": conditions}
            return pod

        marked, _ = await registry.mutate(
            namespace, name, mark, subresource=BUILTIN_STATUS, track=False, honour_resource_version=False
        )
        if options.precondition_resource_version:
            rv = as_dict(marked.get("metadata")).get("resourceVersion")
            options = dataclasses.replace(options, precondition_resource_version=rv)
    await registry.delete(namespace, name, options)


async def _charge(
    budgets: Registry | None, namespace: str | None, pdb: Obj, pod_name: str, now: float, *, dry_run: bool
) -> None:
    """Charge the budget in storage: each attempt re-reads the PDB and checks it again, and writes at
    the resourceVersion read (a concurrent eviction or recount makes us read again)."""
    assert budgets is not None
    if dry_run:
        charged(pdb, pod_name, now, record=False)
        return
    pdb_name = str(as_dict(pdb.get("metadata")).get("name", ""))

    def charge(old: Obj | None) -> Obj:
        assert old is not None
        return charged(old, pod_name, now)

    try:
        await budgets.mutate(namespace, pdb_name, charge, subresource=STATUS, track=False)
    except errors.StatusError as e:
        if e.code == 409:
            raise errors.StatusError(
                504, "Timeout", f'couldn\'t update PodDisruptionBudget "{pdb_name}" due to conflicts', {}
            ) from None
        raise
