"""What each built-in kind's /status takes from the request: kube's *StatusStrategy (v1.33
pkg/registry/*/*/strategy.go), its PrepareForUpdate and GetResetFields, as data per kind."""

from __future__ import annotations

from apiserver.http.subresources.object_view import ObjectViewHandler
from apiserver.registry.strategy import LABELS, OBJECT_META, OWNER_REFERENCES, SPEC
from apiserver.resources import catalog

# the fields each kind resets besides spec; every other kind with /status resets spec only
MORE_RESETS = {
    "deployments": (LABELS,),
    "pods": (OWNER_REFERENCES,),
    "validatingadmissionpolicies": OBJECT_META,  # metav1.ResetObjectMetaForStatus
    "flowschemas": OBJECT_META,
    "prioritylevelconfigurations": OBJECT_META,
}


def test_every_built_in_status_starts_from_the_request_and_resets_what_kube_resets() -> None:
    seen = set()
    for r in catalog():
        sub = r.subresource("status")
        if sub is None:
            continue
        assert isinstance(sub.handler, ObjectViewHandler), r.plural
        strategy = sub.handler.strategy
        assert strategy.from_request and not strategy.defaults, r.plural
        assert strategy.resets == (SPEC, *MORE_RESETS.get(r.plural, ())), r.plural
        seen.add(r.plural)
    assert set(MORE_RESETS) <= seen and {"namespaces", "nodes", "services", "statefulsets", "daemonsets"} <= seen
