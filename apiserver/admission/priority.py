"""Priority: a new pod gets `spec.priority` (and `spec.preemptionPolicy`) from the
PriorityClass it names, or from the cluster's globalDefault class when it names none.

As kube does it: an unknown class is 403 `pods "p" is forbidden: no PriorityClass with name x
was found`; a pod that sets a priority (or preemption policy) of its own that disagrees with
its class is refused; without any class the priority is 0 and the policy PreemptLowerPriority;
updates keep what the create computed.  system-cluster-critical and system-node-critical
exist even before their objects do.  Writes of PriorityClasses themselves may not mark a
second class globalDefault.

A class the watch cache does not have yet is read from storage before the pod is refused:
kube's plugin reads only its lister, so a pod created right after its class can be refused
until the cache catches up; a client that just got 201 for the class should not see that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.refusal import forbidden
from machinery import objects
from machinery.objects import Obj

SCHEDULING = "scheduling.k8s.io"
PREEMPT_LOWER = "PreemptLowerPriority"
BUILT_IN: dict[str, int] = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


class PriorityClasses(Protocol):
    """What a PriorityClass watch cache offers (`Cacher`)."""

    def objects(self) -> Iterator[Obj]: ...

    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


ClassFetcher = Callable[[str], Awaitable[Obj | None]]


class Priority:
    name = "Priority"

    def __init__(self, classes: PriorityClasses | None, fetch: ClassFetcher | None = None) -> None:
        self._classes = classes
        self._fetch = fetch

    def handles(self, request: AdmissionRequest) -> bool:
        group, plural = request.resource.group, request.resource.plural
        if group == "" and plural == "pods":
            return request.operation in ("CREATE", "UPDATE") and not request.subresource
        return group == SCHEDULING and plural == "priorityclasses" and request.operation in ("CREATE", "UPDATE")

    async def _class(self, name: str) -> tuple[int, str] | None:
        found = self._classes.get_object(None, name) if self._classes is not None else None
        if found is None and name not in BUILT_IN and self._fetch is not None:
            found = await self._fetch(name)
        if found is not None:
            value = _int(found.get("value"))
            policy = found.get("preemptionPolicy")
            return (value or 0), (policy if isinstance(policy, str) and policy else PREEMPT_LOWER)
        if name in BUILT_IN:
            return BUILT_IN[name], PREEMPT_LOWER
        return None

    def _default(self) -> tuple[str, int, str]:
        """The globalDefault class with the lowest value (name, value, policy), or none's."""
        best: Obj | None = None
        for pc in self._classes.objects() if self._classes is not None else ():
            if pc.get("globalDefault") is True:
                if best is None or (_int(pc.get("value")) or 0) < (_int(best.get("value")) or 0):
                    best = pc
        if best is None:
            return "", 0, PREEMPT_LOWER
        policy = best.get("preemptionPolicy")
        return (
            objects.name(best),
            _int(best.get("value")) or 0,
            policy if isinstance(policy, str) and policy else PREEMPT_LOWER,
        )

    async def admit(self, request: AdmissionRequest) -> None:
        if request.resource.plural != "pods" or request.object is None:
            return
        spec = request.object.get("spec")
        if not isinstance(spec, dict):
            return
        if request.operation == "UPDATE":
            old_spec = (request.old_object or {}).get("spec")
            if isinstance(old_spec, dict):
                for f in ("priority", "preemptionPolicy"):
                    if spec.get(f) is None and old_spec.get(f) is not None:
                        spec[f] = old_spec[f]
            return
        class_name = spec.get("priorityClassName")
        if not class_name:
            name, value, policy = self._default()
            if name:
                spec["priorityClassName"] = name
        else:
            found = await self._class(str(class_name))
            if found is None:
                raise forbidden(request, f"no PriorityClass with name {class_name} was found")
            value, policy = found
        given = spec.get("priority")
        if given is not None and given != value:
            raise forbidden(
                request,
                f"the integer value of priority ({given}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise forbidden(
                request,
                f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                f"priority admission controller computed {policy} from the given PriorityClass name",
            )
        spec["preemptionPolicy"] = policy

    async def validate(self, request: AdmissionRequest) -> None:
        """Only one PriorityClass may be the globalDefault."""
        if request.resource.plural != "priorityclasses" or request.object is None:
            return
        if request.object.get("globalDefault") is not True or self._classes is None:
            return
        for pc in self._classes.objects():
            if pc.get("globalDefault") is True and objects.name(pc) != request.name:
                raise forbidden(
                    request,
                    f"PriorityClass {objects.name(pc)} is already marked as default. Only one default can exist",
                )
