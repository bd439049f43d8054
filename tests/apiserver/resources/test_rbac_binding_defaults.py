"""rbac/v1 defaulting of bindings: an empty roleRef.apiGroup, and a User's or Group's subject
apiGroup, become rbac.authorization.k8s.io (kube's SetDefaults_RoleBinding/Subject), so a
binding written without them (e2e's webhook setup writes one) is stored, not refused."""

from __future__ import annotations

import pytest

from machinery.objects import Obj
from tests.apiserver.kinds_support import find, registry, run

GROUP = "rbac.authorization.k8s.io"


@pytest.mark.parametrize(("plural", "namespace"), [("rolebindings", "default"), ("clusterrolebindings", None)])
def test_a_binding_without_api_groups_is_defaulted_and_stored(plural: str, namespace: str | None) -> None:
    reg = registry(find(GROUP, plural))
    binding: Obj = {
        "metadata": {"name": "webhook-auth-reader"},
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "ServiceAccount", "name": "default", "namespace": "default"},
            {"kind": "User", "name": "jane"},
            {"kind": "Group", "name": "devs"},
        ],
    }

    stored = run(reg.create(namespace, binding))

    assert stored["roleRef"] == {"kind": "ClusterRole", "name": "view", "apiGroup": GROUP}
    assert [s.get("apiGroup") for s in stored["subjects"]] == [None, GROUP, GROUP]
