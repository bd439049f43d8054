"""Webhook errors, worded as kube-apiserver words them (kubectl prints them verbatim).

Two kinds, as in kube: a *call failure* (the webhook could not be reached, timed out, or
answered something unusable) is subject to the hook's failurePolicy: Ignore goes on, Fail
answers 500 InternalError `Internal error occurred: failed calling webhook "name": ...`;
a *rejection* (the webhook answered `allowed: false`) always refuses, with the webhook's own
status code (at least 400) and `admission webhook "name" denied the request: <message>`.
"""

from __future__ import annotations

from typing import Any

from apiserver.errors import StatusError


class CallFailure(Exception):
    """kube's ErrCallingWebhook: failurePolicy decides whether the request goes on."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(webhook, reason)
        self.webhook = webhook
        self.reason = reason

    def __str__(self) -> str:
        return f'failed calling webhook "{self.webhook}": {self.reason}'


def internal_error(message: str) -> StatusError:
    """apierrors.NewInternalError: the message prefixed, and repeated as the one cause."""
    return StatusError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def call_failed(failure: CallFailure) -> StatusError:
    return internal_error(str(failure))


def rejected(webhook: str, result: dict[str, Any] | None) -> StatusError:
    """kube's ToStatusErr: the webhook's Status, its code raised to at least 400, its message
    prefixed with who denied the request."""
    result = result or {}
    denied = f'admission webhook "{webhook}" denied the request'
    code = result.get("code")
    if isinstance(code, bool) or not isinstance(code, int) or code < 400 or code > 599:
        code = 400
    message, reason = result.get("message"), result.get("reason")
    message = message if isinstance(message, str) else ""
    reason = reason if isinstance(reason, str) else ""
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    details = result.get("details")
    return StatusError(code, reason, text, details if isinstance(details, dict) else {})


def dry_run_unsupported(webhook: str) -> StatusError:
    """A webhook with side effects is never called for a dry run: 400, whatever failurePolicy says."""
    return StatusError(400, "BadRequest", f'admission webhook "{webhook}" does not support dry run')


_HTTP_MESSAGES = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: "the server does not allow access to the requested resource",
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    415: "the server responded with the status code 415 but did not return more information",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be processing the request",
}


def http_status_message(code: int, body: bytes) -> str:
    """What client-go says of a non-2xx answer that is not a Status object."""
    if code in _HTTP_MESSAGES:
        return _HTTP_MESSAGES[code]
    if code >= 500:
        text = body[:1024].decode("utf-8", "replace").strip()
        return f'an error on the server ("{text}") has prevented the request from succeeding'
    return f"the server responded with the status code {code} but did not return more information"
