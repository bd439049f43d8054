"""The AdmissionReview a webhook receives, and the checks its answer must pass.

The request carries what kube's carries: uid, kind/resource/subResource as the webhook sees
them (an equivalent resource under matchPolicy Equivalent) and requestKind/requestResource/
requestSubResource as the client asked, name, namespace, operation, userInfo, object,
oldObject, dryRun and options.  The answer must be an AdmissionReview of the version sent,
with a response whose uid is the request's; a validating webhook may not patch.  Pure.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

import orjson

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.webhook.failures import CallFailure
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj

GROUP = "admission.k8s.io"
KNOWN_VERSIONS = ("v1", "v1beta1")
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass(frozen=True, slots=True)
class Invocation:
    """How one hook sees the request: the resource it matched (the requested one, or an
    equivalent one under matchPolicy Equivalent) and the objects in that resource's shape."""

    resource: ResourceDef
    subresource: str
    object: Obj | None
    old_object: Obj | None


@dataclass(frozen=True, slots=True)
class Answer:
    allowed: bool
    status: Obj | None
    patch: bytes | None  # the decoded JSON Patch document (mutating only)
    warnings: tuple[str, ...] = field(default=())


def review_version(webhook: str, accepted: tuple[str, ...]) -> str:
    for version in accepted:
        if version in KNOWN_VERSIONS:
            return version
    raise CallFailure(
        webhook,
        "could not create admission objects: webhook does not accept known AdmissionReview versions (v1, v1beta1)",
    )


def review_namespace(request: AdmissionRequest) -> str:
    """kube gives a namespace object's requests its own name as the namespace."""
    res = request.resource
    if res.group == "" and res.plural == "namespaces":
        return request.name
    return request.namespace or ""


def _gvk(res: ResourceDef) -> Obj:
    return {"group": res.group, "version": res.version, "kind": res.kind}


def _gvr(res: ResourceDef) -> Obj:
    return {"group": res.group, "version": res.version, "resource": res.plural}


def build_request(uid: str, version: str, request: AdmissionRequest, invocation: Invocation) -> Obj:
    user = request.user
    user_info: Obj = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        user_info["uid"] = user.uid
    if user.extra:
        user_info["extra"] = user.extra_dict()
    kind, request_kind = _gvk(invocation.resource), _gvk(request.resource)
    if request.operation == "CONNECT" and request.object is not None:
        # a connect's kind is its options' (v1 PodExecOptions, PodAttachOptions, ...), as kube's
        kind = request_kind = {"group": "", "version": "v1", "kind": str(request.object.get("kind") or "")}
    body: Obj = {
        "uid": uid,
        "kind": kind,
        "resource": _gvr(invocation.resource),
        "requestKind": request_kind,
        "requestResource": _gvr(request.resource),
        "name": request.name,
        "namespace": review_namespace(request),
        "operation": request.operation,
        "userInfo": user_info,
        "object": invocation.object,
        "oldObject": invocation.old_object,
        "dryRun": request.dry_run,
    }
    if request.operation != "CONNECT":  # a connect has no operation options
        options: Obj = {"kind": _OPTIONS_KIND[request.operation], "apiVersion": "meta.k8s.io/v1"}
        if request.dry_run:
            options["dryRun"] = ["All"]
        body["options"] = options
    if invocation.subresource:
        body["subResource"] = invocation.subresource
    if request.subresource:
        body["requestSubResource"] = request.subresource
    return {"kind": "AdmissionReview", "apiVersion": f"{GROUP}/{version}", "request": body}


def _invalid(webhook: str, why: str) -> CallFailure:
    return CallFailure(webhook, f"received invalid webhook response: {why}")


def parse_answer(webhook: str, body: bytes, uid: str, version: str, mutating: bool) -> Answer:
    """The webhook's answer, or CallFailure saying what is wrong with it."""
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise CallFailure(webhook, f"failed to call webhook: couldn't get version/kind; json parse error: {e}") from e
    if not isinstance(review, dict) or not review.get("kind"):
        shown = body[:200].decode("utf-8", "replace")
        raise CallFailure(webhook, f"failed to call webhook: Object 'Kind' is missing in '{shown}'")
    expected = f"{GROUP}/{version}"
    if review.get("apiVersion") != expected or review.get("kind") != "AdmissionReview":
        raise _invalid(
            webhook,
            f"expected webhook response of {expected}, Kind=AdmissionReview, "
            f"got {review.get('apiVersion')}, Kind={review.get('kind')}",
        )
    response = review.get("response")
    if response is None:
        raise _invalid(webhook, "webhook response was absent")
    if not isinstance(response, dict):
        raise _invalid(webhook, "response must be an object")
    if version == "v1" and response.get("uid") != uid:
        raise _invalid(webhook, f'expected response.uid="{uid}", got "{response.get("uid", "")}"')
    allowed = response.get("allowed", False)
    if not isinstance(allowed, bool):
        raise _invalid(webhook, "response.allowed must be a boolean")
    status = response.get("status")
    if status is not None and not isinstance(status, dict):
        raise _invalid(webhook, "response.status must be a Status object")
    warnings = response.get("warnings") or []
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        raise _invalid(webhook, "response.warnings must be a list of strings")
    patch = _patch(webhook, response, version, mutating)
    return Answer(allowed, status, patch, tuple(warnings))


def _patch(webhook: str, response: Obj, version: str, mutating: bool) -> bytes | None:
    raw, patch_type = response.get("patch"), response.get("patchType")
    if not mutating:
        if raw:
            raise _invalid(webhook, "validating webhook may not return response.patch")
        if patch_type is not None:
            raise _invalid(webhook, "validating webhook may not return response.patchType")
        return None
    if version == "v1":
        if raw and patch_type is None:
            raise _invalid(webhook, "webhook returned response.patch but not response.patchType")
        if not raw and patch_type is not None:
            raise _invalid(webhook, "webhook returned response.patchType but not response.patch")
        if patch_type is not None and patch_type != "JSONPatch":
            if not isinstance(patch_type, str) or not patch_type:
                raise _invalid(webhook, f'webhook returned invalid response.patchType of "{patch_type}"')
            raise CallFailure(webhook, f'unsupported patch type "{patch_type}"')
    if not raw:
        return None
    if not isinstance(raw, str):
        raise CallFailure(webhook, "received undecodable patch in webhook response: response.patch must be base64")
    try:
        return base64.b64decode(raw, validate=True)
    except binascii.Error as e:
        raise CallFailure(webhook, f"received undecodable patch in webhook response: {e}") from e
