"""authentication.k8s.io/v1 TokenReview: "whom does this token authenticate?", asked by webhooks,
metrics servers and pods that check a caller's service-account token.

Kube's semantics (pkg/registry/authentication/tokenreview): nothing is stored; the apiserver asks
its own token authenticators about `spec.token` (not about the requesting user) for
`spec.audiences`, or for its own audiences when none are given, and answers the review with
`status`: `authenticated`, the `user`, and the granted `audiences`.  An empty token is a 400; a
token no authenticator knows is a 201 that says `authenticated` false, and nothing about why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Protocol

from apiserver import errors
from apiserver.auth.user import User
from apiserver.errors import Cause
from machinery.objects import Obj

KIND = "TokenReview"
GROUP = "authentication.k8s.io"


class TokenReviewer(Protocol):
    """The request authenticators' chain asked about one token (`apiserver.auth.authn.Union`)."""

    def review(self, token: str, audiences: Sequence[str]) -> Awaitable[tuple[User, tuple[str, ...]] | None]: ...


class TokenReviews:
    """The answerer of `tokenreviews` creates."""

    def __init__(self, reviewer: TokenReviewer) -> None:
        self._reviewer = reviewer

    async def create(self, user: User, namespace: str | None, body: Obj) -> Obj:
        """`user` (who asks) only had to be allowed to create the review: the answer is about the token."""
        if namespace:
            raise errors.bad_request(f"namespace is not allowed on this type: {namespace}")
        spec = body.get("spec")
        if spec is None:
            spec = {}
        if not isinstance(spec, Mapping):
            raise _invalid("must be an object", "spec")
        token = spec.get("token")
        if token is not None and not isinstance(token, str):
            raise _invalid("must be a string", "spec.token")
        if not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        audiences = spec.get("audiences")
        if audiences is None:
            audiences = []
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise _invalid("must be a list of strings", "spec.audiences")
        found = await self._reviewer.review(token, audiences)
        status: Obj = {"user": {}}  # kube's json: `authenticated` false is omitted, `user` never is
        if found is not None:
            who, granted = found
            status = {"authenticated": True, "user": user_info(who)}
            if granted:
                status["audiences"] = list(granted)
        out = dict(body)
        meta = out.get("metadata")
        out["metadata"] = {"creationTimestamp": None, **(meta if isinstance(meta, dict) else {})}
        out["status"] = status
        return out


def user_info(user: User) -> dict[str, Any]:
    """authentication.k8s.io UserInfo: the fields kube leaves out when empty, left out."""
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    if user.groups:
        info["groups"] = list(user.groups)
    if user.extra:
        info["extra"] = user.extra_dict()
    return info


def _invalid(message: str, field: str) -> errors.StatusError:
    return errors.invalid(KIND, "", [Cause("FieldValueInvalid", message, field)], GROUP)
