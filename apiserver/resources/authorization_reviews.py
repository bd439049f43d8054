"""authorization.k8s.io/v1 access reviews: "may this user do this?", asked of the authorizer.

Not stored: a create is answered with the request plus its `status` (see apiserver/authz/reviews.py).
`kubectl auth can-i` posts SelfSubjectAccessReviews, `--list` a SelfSubjectRulesReview.
"""

from __future__ import annotations

from apiserver.resources.base import ResourceDef

GROUP = "authorization.k8s.io"


def _review(kind: str, plural: str, namespaced: bool = False) -> ResourceDef:
    return ResourceDef(
        group=GROUP,
        version="v1",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        verbs=("create",),
        virtual=plural,
    )


RESOURCES = (
    _review("LocalSubjectAccessReview", "localsubjectaccessreviews", namespaced=True),
    _review("SelfSubjectAccessReview", "selfsubjectaccessreviews"),
    _review("SelfSubjectRulesReview", "selfsubjectrulesreviews"),
    _review("SubjectAccessReview", "subjectaccessreviews"),
)
