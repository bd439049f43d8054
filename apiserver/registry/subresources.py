"""The subresources that are views or actions rather than parts of the object:
`*/scale` (an autoscaling/v1 Scale over spec.replicas), `pods/binding` (set spec.nodeName
once); `pods/eviction` lives in `eviction`."""

from __future__ import annotations

from collections.abc import Callable

from apiserver import errors
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import UpdateStrategy
from machinery.objects import Obj


def scale_of(obj: Obj, selector_of: Callable[[Obj], str]) -> Obj:
    """The autoscaling/v1 Scale view; the kind says how its selector reads as text."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    selector = selector_of(obj)
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in meta
        },
        "spec": {"replicas": int(spec.get("replicas", 0) or 0)},
        "status": {"replicas": int(status.get("replicas", 0) or 0), "selector": selector},
    }


def replicas_from_scale(scale: Obj) -> int:
    spec = scale.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    replicas = spec.get("replicas", 0)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise errors.invalid(
            "Scale",
            str((scale.get("metadata") or {}).get("name", "")),
            [
                errors.Cause(
                    "FieldValueInvalid",
                    f"Invalid value: {replicas!r}: must be greater than or equal to 0",
                    "spec.replicas",
                )
            ],
            "autoscaling",
        )
    return replicas


async def write_scale(
    registry: Registry, namespace: str | None, name: str, scale: Obj, *, dry_run: bool, manager: str
) -> Obj:
    """Set spec.replicas from a written Scale (its resourceVersion, when given, a precondition); the object stored."""
    replicas = replicas_from_scale(scale)
    wanted_rv = (scale.get("metadata") or {}).get("resourceVersion")

    def set_replicas(old: Obj | None) -> Obj:
        assert old is not None
        if wanted_rv and wanted_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(registry.resource.plural, name, registry.resource.group)
        old.setdefault("spec", {})["replicas"] = replicas
        old["metadata"].pop("resourceVersion", None)
        return old

    obj, _ = await registry.mutate(namespace, name, set_replicas, dry_run=dry_run, manager=manager)
    return obj


# kube's BindingREST writes spec.nodeName straight into storage, past the pod strategy: the
# pod's generation stays (conformance 'Ephemeral Containers' reads 1 on a running pod)
BINDING = UpdateStrategy("binding", takes=("spec", "nodeName"), defaults=False)


async def bind(registry: Registry, namespace: str | None, name: str, binding: Obj, *, dry_run: bool) -> None:
    target = binding.get("target")
    node = target.get("name") if isinstance(target, dict) else None
    if not isinstance(node, str) or not node:
        raise errors.invalid("Binding", name, [errors.Cause("FieldValueRequired", "Required value", "target.name")])

    def assign(old: Obj | None) -> Obj:
        assert old is not None
        meta = old["metadata"]
        if meta.get("deletionTimestamp"):
            raise errors.conflict("pods", name, "", "pod is being deleted, cannot be assigned to a host")
        current = (old.get("spec") or {}).get("nodeName")
        if current:
            raise errors.conflict("pods", name, "", f'pod {name} is already assigned to node "{current}"')
        old.setdefault("spec", {})["nodeName"] = node
        meta.pop("resourceVersion", None)
        return old

    await registry.mutate(namespace, name, assign, subresource=BINDING, dry_run=dry_run, honour_resource_version=False)


def success(kind: str, name: str, code: int = 201) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "kind": kind},
        "code": code,
    }
