"""admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration: the HTTPS webhooks the admission
chain calls to accept or refuse requests that match their rules."""

from __future__ import annotations

from apiserver.errors import Cause
from apiserver.resources import _admission
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def default(config: Obj) -> None:
    _admission.default_webhooks(config, mutating=False)


def validate(config: Obj, old: Obj | None) -> list[Cause]:
    return _admission.validate_webhooks(config, old, mutating=False)


RESOURCE = ResourceDef(
    group="admissionregistration.k8s.io",
    version="v1",
    kind="ValidatingWebhookConfiguration",
    plural="validatingwebhookconfigurations",
    singular="validatingwebhookconfiguration",
    namespaced=False,
    categories=_admission.CATEGORIES,
    default=default,
    validate=validate,
    columns=(_admission.WEBHOOKS_COLUMN,),
    row=_admission.webhooks_row,
)
