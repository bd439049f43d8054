"""rbac.authorization.k8s.io/v1 ClusterRoleBinding: grants a role's permissions to users, groups and
service accounts cluster-wide."""

from __future__ import annotations

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources import _rbac
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def validate(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(obj, namespaced=False, name_fn=v.name_is_path_segment, old=old)
    return causes + _rbac.validate_binding(obj, old, namespaced=False)


RESOURCE = ResourceDef(
    group=_rbac.GROUP,
    version="v1",
    kind="ClusterRoleBinding",
    plural="clusterrolebindings",
    singular="clusterrolebinding",
    namespaced=False,
    bumps_generation=False,
    default=_rbac.default_binding,
    validate=validate,
    columns=_rbac.BINDING_COLUMNS,
    row=_rbac.binding_row,
)
