"""What the four RBAC kinds share: policy rules, role references and subjects, and their columns.
Enforced by the RBAC authorizer (apiserver/authz/rbac/)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, get, mapping, text

GROUP = "rbac.authorization.k8s.io"


def validate_rules(obj: Obj, *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    for i, rule in enumerate(v.as_list(obj.get("rules"), "rules", causes)):
        here = v.index("rules", i)
        rule = v.as_dict(rule, here, causes)
        lists = {
            f: v.as_list(rule.get(f), v.child(here, f), causes)
            for f in ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
        }
        if not lists["verbs"]:
            causes.append(v.required(v.child(here, "verbs"), "verbs must contain at least one value"))
        urls = lists["nonResourceURLs"]
        if urls:
            if namespaced:
                causes.append(
                    v.invalid(
                        v.child(here, "nonResourceURLs"), urls, "namespaced rules cannot apply to non-resource URLs"
                    )
                )
            if lists["apiGroups"] or lists["resources"] or lists["resourceNames"]:
                causes.append(
                    v.invalid(
                        v.child(here, "nonResourceURLs"),
                        urls,
                        "rules cannot apply to both regular resources and non-resource URLs",
                    )
                )
            continue
        if not lists["apiGroups"]:
            causes.append(v.required(v.child(here, "apiGroups"), "resource rules must supply at least one api group"))
        if not lists["resources"]:
            causes.append(v.required(v.child(here, "resources"), "resource rules must supply at least one resource"))
    return causes


def default_binding(obj: Obj) -> None:
    """rbac/v1 SetDefaults_(Cluster)RoleBinding and SetDefaults_Subject: an empty roleRef.apiGroup
    is the RBAC group, and so is a User's or Group's subject apiGroup (clients, e2e's webhook
    setup among them, leave it out).  A malformed field is left for validation to name."""
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    subjects = obj.get("subjects")
    for subject in subjects if isinstance(subjects, list) else ():
        if isinstance(subject, dict) and not subject.get("apiGroup") and subject.get("kind") in ("User", "Group"):
            subject["apiGroup"] = GROUP


def validate_binding(obj: Obj, old: Obj | None, *, namespaced: bool) -> list[Cause]:
    causes: list[Cause] = []
    ref = v.as_dict(obj.get("roleRef"), "roleRef", causes)
    kinds = ("Role", "ClusterRole") if namespaced else ("ClusterRole",)
    kind = ref.get("kind")
    if not kind:
        causes.append(v.required("roleRef.kind"))
    else:
        causes += v.validate_enum(kind, "roleRef.kind", kinds)
    causes += v.validate_enum(ref.get("apiGroup"), "roleRef.apiGroup", (GROUP,), optional=False)
    name = ref.get("name")
    if not name:
        causes.append(v.required("roleRef.name"))
    elif isinstance(name, str):
        causes += [v.invalid("roleRef.name", name, m) for m in v.name_is_path_segment(name, False)]
    for i, subject in enumerate(v.as_list(obj.get("subjects"), "subjects", causes)):
        here = v.index("subjects", i)
        subject = v.as_dict(subject, here, causes)
        if not subject.get("name"):
            causes.append(v.required(v.child(here, "name")))
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            if subject.get("apiGroup"):
                causes.append(v.not_supported(v.child(here, "apiGroup"), subject.get("apiGroup"), ("",)))
            if not namespaced and not subject.get("namespace"):
                causes.append(v.required(v.child(here, "namespace")))
        elif kind in ("User", "Group"):
            if subject.get("apiGroup") != GROUP:
                causes.append(v.not_supported(v.child(here, "apiGroup"), subject.get("apiGroup", ""), (GROUP,)))
        else:
            causes.append(v.not_supported(v.child(here, "kind"), kind or "", ("ServiceAccount", "User", "Group")))
    if old is not None and obj.get("roleRef") != old.get("roleRef"):
        causes.append(v.invalid("roleRef", obj.get("roleRef"), "cannot change roleRef"))
    return causes


# Roles have no printer in kube: the default table shows Name and "Created At".
CREATED_AT = Column(
    "Created At",
    "date",
    description="CreationTimestamp is a timestamp representing the server time when this object was created.",
)


def created_at_row(obj: Obj, now: float) -> list[Any]:
    return [text(mapping(obj, "metadata"), "creationTimestamp") or "0001-01-01T00:00:00Z"]


BINDING_COLUMNS = (
    Column("Role", description="RoleRef can only reference the current namespace or a ClusterRole."),
    Column("Users", priority=1, description="Users in the roleBinding"),
    Column("Groups", priority=1, description="Groups in the roleBinding"),
    Column("ServiceAccounts", priority=1, description="ServiceAccounts in the roleBinding"),
)


def binding_row(obj: Obj, now: float) -> list[Any]:
    subjects = dicts(obj, "subjects")

    def names(kind: str) -> str:
        return ", ".join(text(s, "name") for s in subjects if text(s, "kind") == kind)

    sas = ", ".join(
        f"{text(s, 'namespace')}/{text(s, 'name')}" for s in subjects if text(s, "kind") == "ServiceAccount"
    )
    ref = get(obj, "roleRef")
    return [f"{text(ref, 'kind')}/{text(ref, 'name')}", names("User"), names("Group"), sas]
