"""RuntimeClass: a new pod that names a RuntimeClass gets what the class says about it, as
kube's plugin (plugin/pkg/admission/runtimeclass) does.

- An unknown class is 403 `pods "p" is forbidden: pod rejected: RuntimeClass "x" not found`
  (conformance "RuntimeClass should reject a Pod requesting a non-existent RuntimeClass"), so a
  pod never waits on a node for a runtime no node has.
- `overhead.podFixed` becomes the pod's `spec.overhead` (the scheduler and quota count it); a
  pod that brings a different overhead, or an overhead without its class defining one, is
  refused: the overhead is the class's to say.
- `scheduling.nodeSelector` is merged into the pod's (a key the pod sets to another value is a
  conflict, refused) and `scheduling.tolerations` added to the pod's, so the pod lands only on
  nodes that have the runtime.

Only pod creates: kube's plugin handles CREATE, and a pod's spec cannot change these later.  A
class the watch cache does not have yet is read from storage before the pod is refused (as
kube's plugin falls back from its lister to a client GET).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.refusal import forbidden
from machinery.objects import Obj
from machinery.quantity import QuantityError, parse_quantity

NODE_GROUP = "node.k8s.io"


class RuntimeClasses(Protocol):
    """What a RuntimeClass watch cache offers (`Cacher`)."""

    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


ClassFetcher = Callable[[str], Awaitable[Obj | None]]


def _same_resources(a: Any, b: Any) -> bool:
    """Two resource lists equal as quantities (`1000m` is `1`), kube's Semantic.DeepEqual."""
    if not isinstance(a, dict) or not isinstance(b, dict) or a.keys() != b.keys():
        return False
    try:
        return all(parse_quantity(a[k]) == parse_quantity(b[k]) for k in a)
    except (QuantityError, TypeError):
        return a == b


def _merged_tolerations(pod_tolerations: list[Any], extra: list[Any]) -> list[Any]:
    """The pod's tolerations, then each of the class's the pod does not have already."""
    merged = list(pod_tolerations)
    for toleration in extra:
        if toleration not in merged:
            merged.append(toleration)
    return merged


class RuntimeClassAdmission:
    name = "RuntimeClass"

    def __init__(self, classes: RuntimeClasses | None, fetch: ClassFetcher | None = None) -> None:
        self._classes = classes
        self._fetch = fetch

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.operation == "CREATE"
            and request.resource.group == ""
            and request.resource.plural == "pods"
            and not request.subresource
        )

    async def _class_of(self, request: AdmissionRequest) -> tuple[Obj, Obj | None] | None:
        """(the pod's spec, its RuntimeClass or None when it names none); None: not a pod spec."""
        spec = (request.object or {}).get("spec")
        if not isinstance(spec, dict):
            return None
        name = spec.get("runtimeClassName")
        if not name or not isinstance(name, str):
            return spec, None
        found = self._classes.get_object(None, name) if self._classes is not None else None
        if found is None and self._fetch is not None:
            found = await self._fetch(name)
        if found is None:
            raise forbidden(request, f'pod rejected: RuntimeClass "{name}" not found')
        return spec, found

    async def admit(self, request: AdmissionRequest) -> None:
        got = await self._class_of(request)
        if got is None or got[1] is None:
            return
        spec, runtime_class = got[0], got[1]
        fixed = (runtime_class.get("overhead") or {}).get("podFixed")
        if isinstance(fixed, dict):
            if spec.get("overhead") is not None and not _same_resources(spec["overhead"], fixed):
                raise forbidden(request, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
            spec["overhead"] = dict(fixed)
        scheduling = runtime_class.get("scheduling")
        if not isinstance(scheduling, dict):
            return
        selector = scheduling.get("nodeSelector")
        if isinstance(selector, dict) and selector:
            given = spec.get("nodeSelector")
            pod_selector: dict[str, Any] = given if isinstance(given, dict) else {}
            for key, value in selector.items():
                if key in pod_selector and pod_selector[key] != value:
                    raise forbidden(
                        request,
                        f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                        f"pod.spec.nodeSelector[{key}] = {pod_selector[key]}",
                    )
            spec["nodeSelector"] = {**pod_selector, **selector}
        tolerations = scheduling.get("tolerations")
        if isinstance(tolerations, list) and tolerations:
            present = spec.get("tolerations")
            own: list[Any] = present if isinstance(present, list) else []
            spec["tolerations"] = _merged_tolerations(own, tolerations)

    async def validate(self, request: AdmissionRequest) -> None:
        """After the other mutating plugins (and webhooks): the overhead is still the class's."""
        got = await self._class_of(request)
        if got is None:
            return
        spec, runtime_class = got
        fixed = ((runtime_class or {}).get("overhead") or {}).get("podFixed")
        if isinstance(fixed, dict):
            if not _same_resources(spec.get("overhead"), fixed):
                raise forbidden(request, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        elif spec.get("overhead") is not None:
            why = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
            raise forbidden(request, why)
