"""authentication.k8s.io/v1 reviews, never stored: SelfSubjectReview, "who am I?" (`kubectl auth
whoami`), answered with the requesting user's name, uid, groups and extra; TokenReview, "whom does
this token authenticate?", answered by the apiserver's token authenticators
(apiserver/auth/token_review.py)."""

from __future__ import annotations

from apiserver.resources.base import ResourceDef

RESOURCES = (
    ResourceDef(
        group="authentication.k8s.io",
        version="v1",
        kind="SelfSubjectReview",
        plural="selfsubjectreviews",
        singular="selfsubjectreview",
        namespaced=False,
        verbs=("create",),
        virtual="selfsubjectreviews",
    ),
    ResourceDef(
        group="authentication.k8s.io",
        version="v1",
        kind="TokenReview",
        plural="tokenreviews",
        singular="tokenreview",
        namespaced=False,
        verbs=("create",),
        virtual="tokenreviews",
    ),
)
