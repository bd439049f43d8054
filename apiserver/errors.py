"""Kubernetes API errors: every failure a client sees is one `metav1.Status`.

Handlers raise `StatusError`; the HTTP layer turns it into the Status body with the same
code.  The constructors below word messages as kube-apiserver does, because kubectl prints
them verbatim (`Error from server (NotFound): pods "p" not found`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Cause:
    """One reason an object is invalid: `field` is a path such as `spec.containers[0].image`."""

    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueDuplicate, ...
    message: str
    field: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


@dataclass
class StatusError(Exception):
    code: int
    reason: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)
    # the Status's ListMeta.continue: where a list whose continue token expired can go on
    # from (kube's inconsistent continuation, a token at the latest revision)
    continue_token: str = ""

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": self.continue_token} if self.continue_token else {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def _details(resource: str, name: str, group: str = "") -> dict[str, Any]:
    d: dict[str, Any] = {"kind": resource}
    if name:
        d["name"] = name
    if group:
        d["group"] = group
    return d


def qualified(resource: str, group: str) -> str:
    """`deployments.apps`, or `pods` for the core group: how Kubernetes names a resource in messages."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        404, "NotFound", f'{qualified(resource, group)} "{name}" not found', _details(resource, name, group)
    )


def already_exists(resource: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{qualified(resource, group)} "{name}" already exists', _details(resource, name, group)
    )


def conflict(resource: str, name: str, group: str = "", why: str = "") -> StatusError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        _details(resource, name, group),
    )


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> StatusError:
    """422: `Deployment.apps "d" is invalid: spec.replicas: Invalid value: -1: must be ...`."""
    gk = f"{kind}.{group}" if group else kind
    text = "; ".join(f"{c.field}: {c.message}" if c.field else c.message for c in causes) or "invalid"
    details = {"kind": kind, "name": name, "causes": [c.to_dict() for c in causes]}
    if group:
        details["group"] = group
    return StatusError(422, "Invalid", f'{gk} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def unauthorized(message: str = "Unauthorized") -> StatusError:
    return StatusError(401, "Unauthorized", message)


def forbidden(message: str) -> StatusError:
    return StatusError(403, "Forbidden", message)


def method_not_allowed(message: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def not_acceptable(message: str) -> StatusError:
    """406: the client accepts no format this answer can be given in."""
    return StatusError(406, "NotAcceptable", message)


def gone(message: str, continue_token: str = "") -> StatusError:
    """410 Expired: a resourceVersion older than the watch cache's window or the store's compaction;
    `continue_token`: for an expired continue token, the token that goes on inconsistently."""
    return StatusError(410, "Expired", message, continue_token=continue_token)


def too_large(message: str) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(message: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", message)


def too_many_requests(message: str, retry_after: int = 1) -> StatusError:
    return StatusError(429, "TooManyRequests", message, {"retryAfterSeconds": retry_after})


def too_many_requests_because(message: str, causes: list[Cause], retry_after: int = 0) -> StatusError:
    """429 with `details.causes` (an eviction refused by a disruption budget): kubectl drain retries
    on 429 and prints the message.  retryAfterSeconds is omitted when 0, as kube's omitempty does."""
    details: dict[str, Any] = {
        "causes": [{k: val for k, val in c.to_dict().items() if k != "field" or val} for c in causes]
    }
    if retry_after > 0:
        details["retryAfterSeconds"] = retry_after
    return StatusError(429, "TooManyRequests", message, details)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", message)


def unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def timeout(message: str) -> StatusError:
    return StatusError(504, "Timeout", message)
