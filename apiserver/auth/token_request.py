"""`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`: TokenRequest (authentication.k8s.io/v1).

What `kubectl create token` and a kubelet's projected volumes ask: a signed token for a
service account, for `spec.audiences` (default: the apiserver's), valid `spec.expirationSeconds`
(default 3600, from 600 to 2^32), optionally bound to a Pod, Secret or Node of the same
namespace (the token dies with that object).  Answered 201 with `status.token` and
`status.expirationTimestamp`, in kube-apiserver's order of checks and with its wording:
the body's name and namespace must match the URL (422), the service account must exist (404),
the bound object must exist (404), be a Pod that runs as this service account (400), and have
the uid the reference gives (409).  `--service-account-max-token-expiration` shortens longer
requests with a warning; a pod-bound request for kube's magic 3607 s for the apiserver's own
audiences gets a year, with `warnafter` at the requested time (kube's safe rollout of bound
tokens, `--service-account-extend-token-expiration`, on by default).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from apiserver import errors
from apiserver import validation as v
from apiserver.auth.serviceaccount_tokens import (
    DEFAULT_EXPIRATION_SECONDS,
    MAX_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
    NODES,
    PODS,
    SECRETS,
    SERVICE_ACCOUNTS,
    TokenIssuer,
)
from machinery.objects import Obj
from machinery.timestamps import format_time

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
KIND = "TokenRequest"
WARN_ONLY_EXPIRATION_SECONDS = 60 * 60 + 7
EXTENDED_EXPIRATION_SECONDS = 24 * 365 * 60 * 60
_GO_TYPES: dict[type, str] = {dict: "object", list: "array", str: "string"}
_BINDABLE = {"Pod": PODS, "Secret": SECRETS, "Node": NODES}

# (resource plural, namespace or None, name) -> the stored object; StatusError 404 when absent
Getter = Callable[[str, str | None, str], Awaitable[Obj]]


@dataclass(frozen=True, slots=True)
class Answer:
    """The TokenRequest to return (201), and warnings for the response's Warning headers."""

    body: Obj
    warnings: tuple[str, ...] = ()


class TokenRequests:
    """Answers TokenRequests with tokens from `issuer`."""

    def __init__(
        self,
        issuer: TokenIssuer,
        audiences: Sequence[str],
        get: Getter,
        *,
        max_expiration_seconds: int | None = None,
        extend_expiration: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._issuer = issuer
        self._audiences = list(audiences)
        self._get = get
        self._max = max_expiration_seconds
        self._extend = extend_expiration
        self._clock = clock

    async def create(self, namespace: str, name: str, body: Obj) -> Answer:
        req = _decode(body)
        meta = req["metadata"]
        for field, want, what in (("name", name, "name"), ("namespace", namespace, "namespace")):
            given = meta.get(field)
            if given and given != want:
                cause = v.invalid(f"metadata.{field}", given, f"must match the service account {what} if specified")
                raise errors.invalid(KIND, name, [cause], GROUP)
        sa = await self._get(SERVICE_ACCOUNTS, namespace, name)
        spec = req["spec"]
        if not spec.get("audiences"):
            spec["audiences"] = list(self._audiences)
        now = self._clock()
        meta.update(name=name, namespace=namespace, creationTimestamp=format_time(now))
        expiration = spec["expirationSeconds"]
        if expiration < MIN_EXPIRATION_SECONDS:
            cause = v.invalid("spec.expirationSeconds", expiration, "may not specify a duration less than 10 minutes")
            raise errors.invalid(KIND, "", [cause], GROUP)
        if expiration > MAX_EXPIRATION_SECONDS:
            cause = v.invalid(
                "spec.expirationSeconds", expiration, "may not specify a duration larger than 2^32 seconds"
            )
            raise errors.invalid(KIND, "", [cause], GROUP)
        pod, secret, node = await self._bound(namespace, name, spec.get("boundObjectRef"))
        warnings: list[str] = []
        if self._max is not None and expiration > self._max:
            warnings.append(f"requested expiration of {expiration} seconds shortened to {self._max} seconds")
            expiration = spec["expirationSeconds"] = self._max
        lifetime, warn_after = expiration, None
        if (
            self._extend
            and pod is not None
            and expiration == WARN_ONLY_EXPIRATION_SECONDS
            and set(spec["audiences"]) <= set(self._audiences)
        ):
            lifetime, warn_after = EXTENDED_EXPIRATION_SECONDS, expiration
        token, _ = self._issuer.issue(
            sa, spec["audiences"], lifetime, pod=pod, secret=secret, node=node, warn_after_seconds=warn_after
        )
        req["status"] = {"token": token, "expirationTimestamp": format_time(int(now) + expiration)}
        return Answer(req, tuple(warnings))

    async def _bound(self, namespace: str, name: str, ref: Obj | None) -> tuple[Obj | None, Obj | None, Obj | None]:
        """(pod, secret, node) the token is bound to (a pod's node rides along, by name at least)."""
        if ref is None:
            return None, None, None
        kind, api_version = ref.get("kind", ""), ref.get("apiVersion", "")
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        resource = _BINDABLE.get(kind) if group == "" else None
        if resource is None:
            version = api_version.rpartition("/")[2]
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        if not ref.get("name"):
            raise errors.invalid(KIND, "", [v.required("spec.boundObjectRef.name")], GROUP)
        obj = await self._get(resource, None if resource == NODES else namespace, ref["name"])
        pod = secret = node = None
        if resource == PODS:
            pod = obj
            pod_spec = obj.get("spec") or {}
            if pod_spec.get("serviceAccountName", "") != name:
                raise errors.bad_request(
                    f'cannot bind token for serviceaccount "{name}" to pod running with different serviceaccount name.'
                )
            node_name = pod_spec.get("nodeName")
            if isinstance(node_name, str) and node_name:
                try:
                    node = await self._get(NODES, None, node_name)
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
                    node = {"metadata": {"name": node_name}}
        elif resource == SECRETS:
            secret = obj
        else:
            node = obj
        uid = (obj.get("metadata") or {}).get("uid", "")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict(
                kind,
                ref.get("name", ""),
                "",
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record."
                " The object might have been deleted and then recreated",
            )
        return pod, secret, node


def _decode(body: Obj) -> Obj:
    """The request with its types checked (400 naming the field, as a decode error is in kube)
    and defaults in: metadata {}, spec {}, expirationSeconds 3600."""
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if api_version not in (None, "", API_VERSION) or kind not in (None, "", KIND):
        raise errors.bad_request(
            f"the API version in the data ({api_version}) and kind ({kind}) do not match {API_VERSION}, Kind={KIND}"
        )
    meta = _field(body, "metadata", dict, {})
    spec = _field(body, "spec", dict, {})
    for field in ("name", "namespace"):
        _field(meta, field, str, "", "metadata.")
    audiences = _field(spec, "audiences", list, [], "spec.")
    if not all(isinstance(a, str) for a in audiences):
        raise _type_error("spec.audiences", "[]string")
    expiration = spec.get("expirationSeconds")
    if expiration is None:
        expiration = DEFAULT_EXPIRATION_SECONDS
    elif not v.is_int(expiration):
        raise _type_error("spec.expirationSeconds", "int64")
    ref = spec.get("boundObjectRef")
    if ref is not None:
        if not isinstance(ref, dict):
            raise _type_error("spec.boundObjectRef", "BoundObjectReference")
        for field in ("kind", "apiVersion", "name", "uid"):
            _field(ref, field, str, "", "spec.boundObjectRef.")
    out_spec: Obj = {"audiences": audiences, "expirationSeconds": expiration}
    if ref is not None:
        out_spec["boundObjectRef"] = {k: ref[k] for k in ("kind", "apiVersion", "name", "uid") if ref.get(k)}
    return {"kind": KIND, "apiVersion": API_VERSION, "metadata": dict(meta), "spec": out_spec, "status": {}}


def _field(obj: Obj, name: str, kind: type, default: Any, prefix: str = "") -> Any:
    value = obj.get(name)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise _type_error(f"{prefix}{name}", _GO_TYPES[kind])
    return value


def _type_error(field: str, want: str) -> errors.StatusError:
    return errors.bad_request(
        f'TokenRequest in version "v1" cannot be handled as a TokenRequest: {field}: expected {want}'
    )
