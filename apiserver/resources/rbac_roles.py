"""rbac.authorization.k8s.io/v1 Role: a set of permissions within a namespace."""

from __future__ import annotations

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources import _rbac
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


def validate(obj: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(obj, namespaced=True, name_fn=v.name_is_path_segment, old=old)
    return causes + _rbac.validate_rules(obj, namespaced=True)


RESOURCE = ResourceDef(
    group=_rbac.GROUP,
    version="v1",
    kind="Role",
    plural="roles",
    singular="role",
    namespaced=True,
    bumps_generation=False,
    validate=validate,
    columns=(_rbac.CREATED_AT,),
    row=_rbac.created_at_row,
    age_last=False,
)
