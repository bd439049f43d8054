"""Building the two webhook plugins from what the server has: its watch caches and registries.

Everything is looked up when a request needs it, not when the plugin is built: the caches of
the webhook configurations may be wired after the plugins, and a missing cache means no
configurations (the plugin then handles nothing).  A `clientConfig.service` is reached through
the Service's EndpointSlices (`apiserver.service_routing`), read from the watch caches (the
Service from storage when the cache does not have it yet).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from apiserver import errors
from apiserver.admission.webhook.client import ServiceResolver, WebhookClient
from apiserver.admission.webhook.config import CompiledHooks, ConfigSource
from apiserver.admission.webhook.dispatch import Dispatcher, equivalents_among
from apiserver.admission.webhook.mutating import MutatingWebhook
from apiserver.admission.webhook.validating import ValidatingWebhook
from apiserver.resources.base import ResourceDef
from apiserver.service_routing import EndpointServiceResolver
from machinery.objects import Obj

REGISTRATION = "admissionregistration.k8s.io"
MUTATING_CONFIGURATIONS = (REGISTRATION, "mutatingwebhookconfigurations")
VALIDATING_CONFIGURATIONS = (REGISTRATION, "validatingwebhookconfigurations")
NAMESPACES = ("", "namespaces")
SERVICES = ("", "services")
ENDPOINT_SLICES = ("discovery.k8s.io", "endpointslices")
Getter = Callable[[str | None, str], Awaitable[Obj | None]]


def _cached_or_stored(
    caches: Mapping[tuple[str, str], Any], registries: Mapping[tuple[str, str], Any], kind: tuple[str, str]
) -> Getter:
    """`(namespace, name) -> object or None`: the cache's view, else storage's (the cache may lag
    an object created a moment ago, such as a service made just before its webhook)."""

    async def get(namespace: str | None, name: str) -> Obj | None:
        cache = caches.get(kind)
        found = cache.get_object(namespace, name) if cache is not None else None
        if found is None:
            registry = registries.get(kind)
            if registry is not None:
                with contextlib.suppress(errors.StatusError):
                    found = await registry.get(namespace, name)
        return found if isinstance(found, dict) else None

    return get


def service_resolver(
    caches: Mapping[tuple[str, str], Any], registries: Mapping[tuple[str, str], Any]
) -> ServiceResolver:
    """Service references resolved through the Services and the EndpointSlices' watch cache."""
    service = _cached_or_stored(caches, registries, SERVICES)

    async def services(namespace: str, name: str) -> Obj | None:
        return await service(namespace, name)

    def slices(namespace: str) -> Iterable[Obj]:
        cache = caches.get(ENDPOINT_SLICES)
        return cache.objects(namespace) if cache is not None else ()

    return EndpointServiceResolver(services, slices).resolve


def dispatcher(
    caches: Mapping[tuple[str, str], Any],
    registries: Mapping[tuple[str, str], Any],
    configurations: tuple[str, str],
    *,
    mutating: bool,
    resolve_service: ServiceResolver | None = None,
    served: Callable[[], Iterable[ResourceDef]] | None = None,
) -> Dispatcher:
    def source() -> ConfigSource | None:
        found: ConfigSource | None = caches.get(configurations)
        return found

    namespace_of = _cached_or_stored(caches, registries, NAMESPACES)

    async def namespace(name: str) -> dict[str, Any] | None:
        return await namespace_of(None, name)

    def resources() -> Iterable[ResourceDef]:
        if served is not None:
            return served()
        return [r.resource for r in registries.values() if hasattr(r, "resource")]

    return Dispatcher(
        CompiledHooks(source, mutating=mutating),
        WebhookClient(resolve_service=resolve_service or service_resolver(caches, registries)),
        namespace,
        equivalents_among(resources),
    )


def mutating_plugin(
    caches: Mapping[tuple[str, str], Any],
    registries: Mapping[tuple[str, str], Any],
    served: Callable[[], Iterable[ResourceDef]] | None = None,
) -> MutatingWebhook:
    return MutatingWebhook(dispatcher(caches, registries, MUTATING_CONFIGURATIONS, mutating=True, served=served))


def validating_plugin(
    caches: Mapping[tuple[str, str], Any],
    registries: Mapping[tuple[str, str], Any],
    served: Callable[[], Iterable[ResourceDef]] | None = None,
) -> ValidatingWebhook:
    return ValidatingWebhook(dispatcher(caches, registries, VALIDATING_CONFIGURATIONS, mutating=False, served=served))
