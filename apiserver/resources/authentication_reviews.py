"""authentication.k8s.io/v1 SelfSubjectReview: "who am I?" (`kubectl auth whoami`).

Not stored: a create is answered with the requesting user's name, uid, groups and extra."""

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
)
