"""The plugin built from the server's watch caches (keyed by (group, plural)): policies and
bindings from theirs (a cache that does not exist means no policies), namespaces from the
namespaces cache, and params from whichever cache serves the paramKind's apiVersion and kind."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.admission.policy.params import ParamLookup, ParamSource
from apiserver.admission.policy.plugin import ADMISSION_GROUP, ValidatingAdmissionPolicy
from apiserver.admission.policy.source import LivePolicies, NoObjects
from machinery.objects import Obj


def param_lookup(caches: Mapping[tuple[str, str], Any]) -> ParamLookup:
    """(apiVersion, kind) -> (cache, namespaced), from each cache's `resource` (a ResourceDef)."""
    by_kind: dict[tuple[str, str], tuple[ParamSource, bool]] = {}
    for cache in caches.values():
        res = getattr(cache, "resource", None)
        if res is not None:
            by_kind[(res.group_version, res.kind)] = (cache, bool(res.namespaced))

    def lookup(api_version: str, kind: str) -> tuple[ParamSource, bool] | None:
        return by_kind.get((api_version, kind))

    return lookup


def from_caches(caches: Mapping[tuple[str, str], Any]) -> ValidatingAdmissionPolicy:
    policies = caches.get((ADMISSION_GROUP, "validatingadmissionpolicies")) or NoObjects()
    bindings = caches.get((ADMISSION_GROUP, "validatingadmissionpolicybindings")) or NoObjects()
    namespaces = caches.get(("", "namespaces"))

    def namespace(name: str) -> Obj | None:
        if namespaces is None:
            return None
        obj = namespaces.get_object(None, name)
        return obj if isinstance(obj, dict) else None

    return ValidatingAdmissionPolicy(LivePolicies(policies, bindings), namespace, param_lookup(caches))
