"""admissionregistration.k8s.io/v1 MutatingWebhookConfiguration: the HTTPS webhooks the admission
chain calls to change requests that match their rules."""

from __future__ import annotations

from apiserver.errors import Cause
from apiserver.resources import _admission
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def default(config: Obj) -> None:
    _admission.default_webhooks(config, mutating=True)


def validate(config: Obj, old: Obj | None) -> list[Cause]:
    return _admission.validate_webhooks(config, old, mutating=True)


RESOURCE = ResourceDef(
    group="admissionregistration.k8s.io",
    version="v1",
    kind="MutatingWebhookConfiguration",
    plural="mutatingwebhookconfigurations",
    singular="mutatingwebhookconfiguration",
    namespaced=False,
    categories=_admission.CATEGORIES,
    default=default,
    validate=validate,
    columns=(_admission.WEBHOOKS_COLUMN,),
    row=_admission.webhooks_row,
)
