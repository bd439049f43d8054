"""Access reviews answered by the authorizer: SelfSubjectAccessReview, SubjectAccessReview,
LocalSubjectAccessReview, SelfSubjectRulesReview, and authentication's SelfSubjectReview.

Each takes the posted review and returns it with `status` filled in, as kube does; nothing is
stored.  The checks on `spec` are kube's, worded as its validation words them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from apiserver import errors
from apiserver.auth.user import User
from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import Authorizer, Decision
from apiserver.authz.node import node_of
from apiserver.authz.rbac.policy import PolicySnapshot
from apiserver.errors import Cause
from machinery.objects import Obj

AUTHZ = "authorization.k8s.io"


def _field(spec: Mapping[str, Any], name: str, kind: str, where: str) -> Mapping[str, Any] | None:
    value = spec.get(name)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise errors.invalid(kind, "", [Cause("FieldValueInvalid", "must be an object", f"{where}.{name}")], AUTHZ)
    return value


def _str(value: Mapping[str, Any], name: str, kind: str, where: str) -> str:
    got = value.get(name, "")
    if got is None:
        return ""
    if not isinstance(got, str):
        raise errors.invalid(kind, "", [Cause("FieldValueInvalid", "must be a string", f"{where}.{name}")], AUTHZ)
    return got


def _strings(value: Any, kind: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise errors.invalid(kind, "", [Cause("FieldValueInvalid", "must be a list of strings", where)], AUTHZ)
    return tuple(value)


def review_attributes(user: User, spec: Mapping[str, Any], kind: str) -> Attributes:
    """The attributes a review's spec asks about (exactly one of resource / nonResource)."""
    res = _field(spec, "resourceAttributes", kind, "spec")
    non = _field(spec, "nonResourceAttributes", kind, "spec")
    if (res is None) == (non is None):
        raise errors.invalid(
            kind,
            "",
            [
                Cause(
                    "FieldValueInvalid",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    "spec.resourceAttributes",
                )
            ],
            AUTHZ,
        )
    if non is not None:
        where = "spec.nonResourceAttributes"
        return Attributes(
            user=user, verb=_str(non, "verb", kind, where), resource_request=False, path=_str(non, "path", kind, where)
        )
    assert res is not None
    where = "spec.resourceAttributes"
    return Attributes(
        user=user,
        verb=_str(res, "verb", kind, where),
        resource_request=True,
        namespace=_str(res, "namespace", kind, where),
        api_group=_str(res, "group", kind, where),
        api_version=_str(res, "version", kind, where),
        resource=_str(res, "resource", kind, where),
        subresource=_str(res, "subresource", kind, where),
        name=_str(res, "name", kind, where),
    )


def _spec(body: Obj, kind: str) -> Mapping[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, Mapping):
        raise errors.invalid(kind, "", [Cause("FieldValueRequired", "Required value", "spec")], AUTHZ)
    return spec


def _answer(body: Obj, status: Obj) -> Obj:
    out = dict(body)
    meta = out.get("metadata")
    out["metadata"] = {"creationTimestamp": None, **(meta if isinstance(meta, dict) else {})}
    out["status"] = status
    return out


class Reviews:
    """The handlers of the review resources, by plural."""

    def __init__(self, authorizer: Authorizer, policy: Callable[[], PolicySnapshot]) -> None:
        self._authorizer = authorizer
        self._policy = policy

    def handlers(self) -> dict[str, Callable[[User, str | None, Obj], Obj]]:
        return {
            "selfsubjectaccessreviews": self.self_access,
            "subjectaccessreviews": self.subject_access,
            "localsubjectaccessreviews": self.local_access,
            "selfsubjectrulesreviews": self.self_rules,
            "selfsubjectreviews": self.whoami,
        }

    def _decide(self, attrs: Attributes) -> Obj:
        verdict = self._authorizer.authorize(attrs)
        status: Obj = {"allowed": verdict.allowed}
        if verdict.decision is Decision.DENY:
            status["denied"] = True
        if verdict.reason:
            status["reason"] = verdict.reason
        return status

    def self_access(self, user: User, namespace: str | None, body: Obj) -> Obj:
        attrs = review_attributes(user, _spec(body, "SelfSubjectAccessReview"), "SelfSubjectAccessReview")
        return _answer(body, self._decide(attrs))

    def _subject(self, body: Obj, kind: str) -> tuple[User, Mapping[str, Any]]:
        spec = _spec(body, kind)
        name = _str(spec, "user", kind, "spec")
        groups = _strings(spec.get("groups"), kind, "spec.groups")
        if not name and not groups:
            raise errors.invalid(
                kind,
                "",
                [
                    Cause(
                        "FieldValueInvalid", "at least one of user or group must be specified", "spec.user,spec.groups"
                    )
                ],
                AUTHZ,
            )
        extra_raw = spec.get("extra") or {}
        if not isinstance(extra_raw, Mapping):
            raise errors.invalid(kind, "", [Cause("FieldValueInvalid", "must be an object", "spec.extra")], AUTHZ)
        extra = tuple(sorted((str(k), _strings(v, kind, f"spec.extra.{k}")) for k, v in extra_raw.items()))
        return User(name, groups, _str(spec, "uid", kind, "spec"), extra), spec

    def subject_access(self, user: User, namespace: str | None, body: Obj) -> Obj:
        subject, spec = self._subject(body, "SubjectAccessReview")
        return _answer(body, self._decide(review_attributes(subject, spec, "SubjectAccessReview")))

    def local_access(self, user: User, namespace: str | None, body: Obj) -> Obj:
        kind = "LocalSubjectAccessReview"
        subject, spec = self._subject(body, kind)
        attrs = review_attributes(subject, spec, kind)
        if not attrs.resource_request:
            raise errors.invalid(
                kind,
                "",
                [Cause("FieldValueInvalid", "disallowed on this kind of request", "spec.nonResourceAttributes")],
                AUTHZ,
            )
        if attrs.namespace != (namespace or ""):
            raise errors.invalid(
                kind,
                "",
                [
                    Cause(
                        "FieldValueInvalid",
                        "spec.resourceAttributes.namespace must match metadata.namespace",
                        "spec.resourceAttributes.namespace",
                    )
                ],
                AUTHZ,
            )
        return _answer(body, self._decide(attrs))

    def self_rules(self, user: User, namespace: str | None, body: Obj) -> Obj:
        kind = "SelfSubjectRulesReview"
        spec = body.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        ns = _str(spec, "namespace", kind, "spec")
        rules = self._policy().rules_for(user, ns)
        resource_rules = [r.to_dict() for r in rules if not r.non_resource_urls]
        non_resource_rules = [r.to_dict() for r in rules if r.non_resource_urls]
        status: Obj = {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            # the Node authorizer's and system:masters' grants are not rules: say the list is partial
            "incomplete": node_of(Attributes(user=user, verb="", resource_request=True)) is not None,
        }
        return _answer(body, status)

    def whoami(self, user: User, namespace: str | None, body: Obj) -> Obj:
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            info["uid"] = user.uid
        if user.extra:
            info["extra"] = user.extra_dict()
        return _answer(body, {"userInfo": info})
