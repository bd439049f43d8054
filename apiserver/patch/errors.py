"""The one error every patch type raises, carrying the status code Kubernetes answers with.

kube-apiserver answers 400 BadRequest when the patch body is not the shape its type needs (a JSON
patch that is not a list of operations, a merge patch that is not an object), 413 when a JSON
patch has more than 10000 operations, and 422 when a well-formed patch does not apply (a missing
path, a failed `test`, an unknown `op`).  Callers raise with the code; the HTTP layer calls
`to_status_error` (or reads `code`) so every patch type answers alike.
"""

from __future__ import annotations

from apiserver.errors import Cause, StatusError, bad_request, too_large


class PatchError(ValueError):
    """A patch that is malformed (code 400), too large (413) or does not apply (422, the default)."""

    def __init__(self, message: str, code: int = 422) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def to_status_error(self) -> StatusError:
        if self.code == 400:
            return bad_request(self.message)
        if self.code == 413:
            return too_large(self.message)
        # Kubernetes' generic 422 carries the reason in a cause; we also put it in the message,
        # which kubectl prints, so the user sees what went wrong
        cause = Cause("UnexpectedServerResponse", self.message)
        return StatusError(self.code, "Invalid", self.message, {"causes": [cause.to_dict()]})


def json_type(value: object) -> str:
    """`an object`, `a list`, `null`...: a decoded JSON value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else type(value).__name__
