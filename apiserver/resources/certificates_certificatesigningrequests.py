"""certificates.k8s.io/v1 CertificateSigningRequest: a request for a certificate from a signer,
approved or denied through /approval and answered through /status."""

from __future__ import annotations

from typing import Any

from apiserver.age import human_duration, since
from apiserver.http.subresources.object_view import STATUS_VIEW, ObjectViewHandler
from apiserver.registry.strategy import UpdateStrategy
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column, Subresource
from machinery.objects import Obj, dicts, get, text


def condition(csr: Obj) -> str:
    """printers.go's extractCSRStatus: the condition types, comma-joined, `Issued` when a
    certificate is there, `Pending` when nothing happened yet."""
    found = [text(c, "type") for c in dicts(csr, "status.conditions") if text(c, "type")]
    if get(csr, "status.certificate"):
        found.append("Issued")
    return ",".join(found) or "Pending"


def row(csr: Obj, now: float) -> list[Any]:
    seconds = get(csr, "spec.expirationSeconds")
    duration = human_duration(seconds) if isinstance(seconds, int) and not isinstance(seconds, bool) else "<none>"
    return [
        since(get(csr, "metadata.creationTimestamp"), now),
        text(csr, "spec.signerName"),
        text(csr, "spec.username"),
        duration,
        condition(csr),
    ]


# kube's csrApprovalStrategy: the request's object with the stored spec and the stored status
# but its conditions (approving or denying sets no certificate; metadata such as annotations comes
# with the request, as conformance's "patching /approval" checks); no defaulting, and the spec
# (so the generation) cannot move through it
APPROVAL = UpdateStrategy("approval", resets=(("spec",), ("status", "certificate")), defaults=False)


def fields(csr: Obj) -> dict[str, str]:
    """kube's SelectableFields of a CSR: spec.signerName besides the name."""
    return {"spec.signerName": text(csr, "spec.signerName")}


RESOURCE = stored_kind(
    group="certificates.k8s.io",
    version="v1",
    kind="CertificateSigningRequest",
    plural="certificatesigningrequests",
    namespaced=False,
    short_names=("csr",),
    status={},
    status_view=STATUS_VIEW,
    extra_subresources=(Subresource("approval", "CertificateSigningRequest", handler=ObjectViewHandler(APPROVAL)),),
    immutable=("spec",),
    age_last=False,
    columns=(
        Column(
            "Age",
            "date",
            description="CreationTimestamp is a timestamp representing the server time when this object was created.",
        ),
        Column("SignerName", description="Only CSRs with this signer name are processed by its signer."),
        Column("Requestor", description="Name of the user that requested the certificate."),
        Column("RequestedDuration", description="The requested duration of the issued certificate."),
        Column("Condition", description="The state of the request."),
    ),
    row=row,
    fields=fields,
    field_selectors=("spec.signerName",),
)
