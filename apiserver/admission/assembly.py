"""The admission chain a server runs: plugins by name, in kube's order, from config.

A plugin module adds a factory to `PLUGINS` (name -> build(context) -> plugin); a plugin with
an `admit` method runs in the mutating phase, one with `validate` in the validating phase,
one with both in both.  `--enable-admission-plugins` / `--disable-admission-plugins` pick
from the default list, as kube-apiserver's flags do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver.admission.interface import AdmissionChain, MutatingPlugin, ValidatingPlugin
from apiserver.admission.rbac_escalation import RBACEscalation
from apiserver.admission.webhook.wiring import mutating_plugin, validating_plugin
from apiserver.authz.assembly import Authorization
from apiserver.registry.generic import Registry


@dataclass(frozen=True)
class AdmissionContext:
    """What plugins may read: the registries and watch caches by (group, plural), the
    authorizer, and the clock."""

    registries: Mapping[tuple[str, str], Registry]
    caches: Mapping[tuple[str, str], Any]
    authorization: Authorization
    clock: Callable[[], float]


Factory = Callable[[AdmissionContext], Any]

PLUGINS: dict[str, Factory] = {
    "RBACEscalation": lambda ctx: RBACEscalation(ctx.authorization.policy, ctx.authorization.allowed),
    # webhook configurations come from the caches of ("admissionregistration.k8s.io",
    # "mutatingwebhookconfigurations") / "validatingwebhookconfigurations", looked up per request
    "MutatingAdmissionWebhook": lambda ctx: mutating_plugin(ctx.caches, ctx.registries),
    "ValidatingAdmissionWebhook": lambda ctx: validating_plugin(ctx.caches, ctx.registries),
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
        if hasattr(plugin, "admit"):
            mutating.append(plugin)
        if hasattr(plugin, "validate"):
            validating.append(plugin)
    return AdmissionChain(mutating, validating)
