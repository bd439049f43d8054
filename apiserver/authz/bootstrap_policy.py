"""The bootstrap roles and bindings (machinery/bootstrap_policy.py) written at the
apiserver's start: created when absent, extended with what they miss, never narrowed.
"""

from __future__ import annotations

import copy
import logging

from apiserver import errors
from apiserver.registry.generic import Registry
from machinery.bootstrap_policy import bootstrap_objects, namespaced_objects, reconcile
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")


async def ensure_bootstrap_policy(
    cluster_roles: Registry,
    cluster_role_bindings: Registry,
    roles: Registry | None = None,
    role_bindings: Registry | None = None,
) -> dict[str, int]:
    """Create or extend the bootstrap roles and bindings (another apiserver may race us: fine);
    the namespaced ones too when their registries are given.  Returns, per resource (plural),
    the newest resourceVersion among its bootstrap objects as written or found: a watch cache
    that has reached it holds the whole policy."""
    newest: dict[str, int] = {}
    cluster_wide, cluster_bindings = bootstrap_objects()
    kinds = [(cluster_roles, cluster_wide), (cluster_role_bindings, cluster_bindings)]
    if roles is not None and role_bindings is not None:
        namespaced, namespaced_bindings = namespaced_objects()
        kinds += [(roles, namespaced), (role_bindings, namespaced_bindings)]
    for registry, objs in kinds:
        for wanted in objs:
            name = wanted["metadata"]["name"]
            namespace = wanted["metadata"].get("namespace")

            def change(current: Obj | None, wanted: Obj = wanted) -> Obj:
                result = reconcile(current, wanted)
                if result is None:
                    assert current is not None
                    return current  # unchanged: the registry writes nothing
                return copy.deepcopy(result)

            try:
                obj, _ = await registry.mutate(
                    namespace, name, change, create_if_missing=True, manager="kube-apiserver"
                )
            except errors.StatusError as e:
                log.warning("could not reconcile the bootstrap %s %s yet: %s", registry.resource.kind, name, e.message)
                continue
            revision = int(obj["metadata"]["resourceVersion"])
            plural = registry.resource.plural
            newest[plural] = max(newest.get(plural, 0), revision)
    return newest
