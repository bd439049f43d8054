"""The built-in resources the machinery names are the ones the apiserver serves."""

from __future__ import annotations

from apiserver.resources import catalog
from machinery.resources import BUILT_IN, NAMESPACED, GroupResource


def test_built_in_resources_are_the_apiservers_catalog_at_the_preferred_version() -> None:
    preferred: dict[GroupResource, tuple[str, str, bool]] = {}
    for r in catalog():  # the catalog lists a resource's preferred version first
        if r.computed:
            continue  # metrics.k8s.io: read-only figures, nothing a quota or a client stores
        preferred.setdefault(GroupResource(r.group, r.plural), (r.version, r.kind, r.namespaced))
    named = {r.group_resource: (r.version, r.kind, r.namespaced) for r in BUILT_IN}
    assert len(named) == len(BUILT_IN)
    assert named == preferred


def test_namespaced_are_the_kinds_a_quota_may_count() -> None:
    assert GroupResource("", "pods") in NAMESPACED
    assert GroupResource("", "namespaces") not in NAMESPACED
    assert NAMESPACED[GroupResource("autoscaling", "horizontalpodautoscalers")].version == "v2"
