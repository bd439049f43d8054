"""Building the two webhook plugins from what the server has: its watch caches and registries.

Everything is looked up when a request needs it, not when the plugin is built: the caches of
the webhook configurations may be wired after the plugins, and a missing cache means no
configurations (the plugin then handles nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from apiserver import errors
from apiserver.admission.webhook.client import ServiceResolver, WebhookClient
from apiserver.admission.webhook.config import CompiledHooks, ConfigSource
from apiserver.admission.webhook.dispatch import Dispatcher, equivalents_among
from apiserver.admission.webhook.mutating import MutatingWebhook
from apiserver.admission.webhook.validating import ValidatingWebhook
from apiserver.resources.base import ResourceDef

REGISTRATION = "admissionregistration.k8s.io"
MUTATING_CONFIGURATIONS = (REGISTRATION, "mutatingwebhookconfigurations")
VALIDATING_CONFIGURATIONS = (REGISTRATION, "validatingwebhookconfigurations")
NAMESPACES = ("", "namespaces")


def dispatcher(
    caches: Mapping[tuple[str, str], Any],
    registries: Mapping[tuple[str, str], Any],
    configurations: tuple[str, str],
    *,
    mutating: bool,
    resolve_service: ServiceResolver | None = None,
) -> Dispatcher:
    def source() -> ConfigSource | None:
        found: ConfigSource | None = caches.get(configurations)
        return found

    async def namespace(name: str) -> dict[str, Any] | None:
        cache = caches.get(NAMESPACES)
        found = cache.get_object(None, name) if cache is not None else None
        if found is None:  # the cache may lag a namespace created a moment ago: ask storage
            registry = registries.get(NAMESPACES)
            if registry is not None:
                with contextlib.suppress(errors.StatusError):
                    found = await registry.get(None, name)
        return found if isinstance(found, dict) else None

    resources: list[ResourceDef] = [r.resource for r in registries.values() if hasattr(r, "resource")]
    return Dispatcher(
        CompiledHooks(source, mutating=mutating),
        WebhookClient(resolve_service=resolve_service),
        namespace,
        equivalents_among(resources),
    )


def mutating_plugin(
    caches: Mapping[tuple[str, str], Any], registries: Mapping[tuple[str, str], Any]
) -> MutatingWebhook:
    return MutatingWebhook(dispatcher(caches, registries, MUTATING_CONFIGURATIONS, mutating=True))


def validating_plugin(
    caches: Mapping[tuple[str, str], Any], registries: Mapping[tuple[str, str], Any]
) -> ValidatingWebhook:
    return ValidatingWebhook(dispatcher(caches, registries, VALIDATING_CONFIGURATIONS, mutating=False))
