"""The admission chain a server runs: plugins by name, in kube's order, from config.

A plugin module adds a factory to `PLUGINS` (name -> build(context) -> plugin); a plugin with
an `admit` method runs in the mutating phase, one with `validate` in the validating phase,
one with both in both.  `--enable-admission-plugins` / `--disable-admission-plugins` pick
from the default list, as kube-apiserver's flags do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver import errors
from apiserver.admission.default_storage_class import DefaultStorageClass
from apiserver.admission.default_tolerations import DefaultTolerationSeconds
from apiserver.admission.interface import AdmissionChain, MutatingPlugin, ValidatingPlugin
from apiserver.admission.limitranger import LimitRanger
from apiserver.admission.namespace_lifecycle import NamespaceLifecycle
from apiserver.admission.namespaces import live, namespace_getter
from apiserver.admission.node_restriction import NodeRestriction
from apiserver.admission.podsecurity.plugin import PodSecurity
from apiserver.admission.policy import wiring as validating_policy
from apiserver.admission.priority import Priority
from apiserver.admission.pvc_resize import PersistentVolumeClaimResize
from apiserver.admission.rbac_escalation import RBACEscalation
from apiserver.admission.resourcequota import ResourceQuota
from apiserver.admission.runtimeclass import NODE_GROUP, RuntimeClassAdmission
from apiserver.admission.serviceaccount import ServiceAccountAdmission
from apiserver.admission.taint_nodes import TaintNodesByCondition
from apiserver.admission.webhook.wiring import mutating_plugin, validating_plugin
from apiserver.authz.assembly import Authorization
from apiserver.registry.generic import Registry
from apiserver.resources.base import ResourceDef


@dataclass(frozen=True)
class AdmissionContext:
    """What plugins may read: the registries and watch caches by (group, plural), the
    authorizer, and the clock."""

    registries: Mapping[tuple[str, str], Registry]
    caches: Mapping[tuple[str, str], Any]
    authorization: Authorization
    clock: Callable[[], float]
    # every resource served when asked, custom kinds' versions included (webhooks match a
    # request against each version of one stored resource)
    served: Callable[[], Iterable[ResourceDef]] | None = None


Factory = Callable[[AdmissionContext], Any]  # the plugin, or None when the server lacks what it needs
NAMESPACES = ("", "namespaces")


def _pods_in(ctx: AdmissionContext) -> Callable[[str], list[dict[str, Any]]]:
    """The pods of one namespace, from the pods watch cache (none without one)."""
    cache = ctx.caches.get(("", "pods"))

    def pods(namespace: str) -> list[dict[str, Any]]:
        if cache is None:
            return []
        return list(cache.objects(namespace))

    return pods


def _node_by_name(ctx: AdmissionContext) -> Callable[[str], dict[str, Any] | None]:
    cache = ctx.caches.get(("", "nodes"))
    return lambda name: cache.get_object(None, name) if cache is not None else None


def _service_accounts(ctx: AdmissionContext) -> ServiceAccountAdmission:
    cache = ctx.caches.get(("", "serviceaccounts"))
    registry = ctx.registries.get(("", "serviceaccounts"))

    async def fetch(namespace: str, name: str) -> dict[str, Any] | None:
        if registry is None:
            return None
        try:
            return await registry.get(namespace, name)
        except errors.StatusError:
            return None

    return ServiceAccountAdmission(lambda ns, name: cache.get_object(ns, name) if cache is not None else None, fetch)


def _objects_in(ctx: AdmissionContext, kind: tuple[str, str]) -> Callable[[str], Iterable[dict[str, Any]]]:
    """namespace -> the cached objects of `kind` there (none when the kind is not served)."""

    def objects(namespace: str) -> Iterable[dict[str, Any]]:
        cache = ctx.caches.get(kind)
        if cache is None:
            return ()
        return list(cache.objects(namespace))

    return objects


def _limit_ranger(ctx: AdmissionContext) -> LimitRanger:
    return LimitRanger(_objects_in(ctx, ("", "limitranges")))


def _resource_quota(ctx: AdmissionContext) -> ResourceQuota | None:
    quotas = ctx.registries.get(("", "resourcequotas"))
    if quotas is None:
        return None  # a server without the kind (some tests) has no quotas to charge

    def objects_in(namespace: str, resource: ResourceDef) -> Iterable[dict[str, Any]]:
        return _objects_in(ctx, (resource.group, resource.plural))(namespace)

    plugin = ResourceQuota(quotas, _objects_in(ctx, ("", "resourcequotas")), objects_in)
    for registry in ctx.registries.values():
        registry.after_delete.append(plugin.release)
    return plugin


def _priority(ctx: AdmissionContext) -> Priority:
    kind = ("scheduling.k8s.io", "priorityclasses")
    registry = ctx.registries.get(kind)
    return Priority(ctx.caches.get(kind), lambda name: live(registry, name))


def _runtime_class(ctx: AdmissionContext) -> RuntimeClassAdmission:
    kind = (NODE_GROUP, "runtimeclasses")
    registry = ctx.registries.get(kind)
    return RuntimeClassAdmission(ctx.caches.get(kind), lambda name: live(registry, name))


PLUGINS: dict[str, Factory] = {
    "LimitRanger": _limit_ranger,
    "ResourceQuota": _resource_quota,
    "ServiceAccount": _service_accounts,
    "NamespaceLifecycle": lambda ctx: NamespaceLifecycle(
        ctx.caches.get(NAMESPACES), ctx.registries.get(NAMESPACES), ctx.clock
    ),
    "NodeRestriction": lambda ctx: NodeRestriction(_node_by_name(ctx)),
    "TaintNodesByCondition": lambda ctx: TaintNodesByCondition(),
    "PodSecurity": lambda ctx: PodSecurity(
        namespace_getter(ctx.caches.get(NAMESPACES), ctx.registries.get(NAMESPACES)), _pods_in(ctx)
    ),
    "Priority": _priority,
    "DefaultTolerationSeconds": lambda ctx: DefaultTolerationSeconds(),
    "DefaultStorageClass": lambda ctx: DefaultStorageClass(ctx.caches.get(("storage.k8s.io", "storageclasses"))),
    "PersistentVolumeClaimResize": lambda ctx: PersistentVolumeClaimResize(
        ctx.caches.get(("storage.k8s.io", "storageclasses"))
    ),
    "RuntimeClass": _runtime_class,
    "RBACEscalation": lambda ctx: RBACEscalation(ctx.authorization.policy, ctx.authorization.allowed),
    "ValidatingAdmissionPolicy": lambda ctx: validating_policy.from_caches(ctx.caches),
    # webhook configurations come from the caches of ("admissionregistration.k8s.io",
    # "mutatingwebhookconfigurations") / "validatingwebhookconfigurations", looked up per request
    "MutatingAdmissionWebhook": lambda ctx: mutating_plugin(ctx.caches, ctx.registries, ctx.served),
    "ValidatingAdmissionWebhook": lambda ctx: validating_plugin(ctx.caches, ctx.registries, ctx.served),
}

# kube-apiserver's recommended order; names not (yet) in PLUGINS are skipped
ORDER = (
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "RBACEscalation",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)


def plugin_names(enable: Sequence[str] = (), disable: Sequence[str] = ()) -> list[str]:
    """The plugins to run, in order: every known one, minus `disable`; `enable` names must exist.
    ValueError names an unknown plugin."""
    for name in (*enable, *disable):
        if name not in PLUGINS:
            raise ValueError(f"unknown admission plugin {name!r}; the plugins are {', '.join(sorted(PLUGINS))}")
    return [n for n in ORDER if n in PLUGINS and n not in disable]


def build_chain(names: Sequence[str], ctx: AdmissionContext) -> AdmissionChain:
    mutating: list[MutatingPlugin] = []
    validating: list[ValidatingPlugin] = []
    for name in names:
        plugin = PLUGINS[name](ctx)
        if plugin is None:
            continue
        if hasattr(plugin, "admit"):
            mutating.append(plugin)
        if hasattr(plugin, "validate"):
            validating.append(plugin)
    return AdmissionChain(mutating, validating)
