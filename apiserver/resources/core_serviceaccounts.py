"""core/v1 ServiceAccount: an identity for processes in pods."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, items


def validate(sa: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(sa, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    for field in ("secrets", "imagePullSecrets"):
        for i, ref in enumerate(v.as_list(sa.get(field), field, causes)):
            here = v.index(field, i)
            ref = v.as_dict(ref, here, causes)
            if not ref.get("name"):
                causes.append(v.required(v.child(here, "name")))
    automount = sa.get("automountServiceAccountToken")
    if automount is not None and not isinstance(automount, bool):
        causes.append(v.invalid("automountServiceAccountToken", automount, "must be a boolean"))
    return causes


def row(sa: Obj, now: float) -> list[Any]:
    return [len(items(sa, "secrets"))]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="ServiceAccount",
    plural="serviceaccounts",
    singular="serviceaccount",
    namespaced=True,
    short_names=("sa",),
    bumps_generation=False,
    validate=validate,
    columns=(
        Column(
            "Secrets",
            description="Secrets is a list of the secrets in the same namespace that pods running using this "
            "ServiceAccount are allowed to use.",
        ),
    ),
    row=row,
    # TokenRequest: apiserver.auth.token_request, routed by apiserver.http.resources
    subresources=(
        Subresource(name="token", kind="TokenRequest", group="authentication.k8s.io", version="v1", verbs=("create",)),
    ),
)
