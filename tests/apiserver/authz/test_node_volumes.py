"""The Node authorizer and persistent volumes: a kubelet may get the volume bound to a claim one
of its pods uses (it mounts the volume's directory), and no other."""

from __future__ import annotations

from apiserver.auth.user import User
from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import Decision
from apiserver.authz.node import NodeAuthorizer

POD = {
    "metadata": {"namespace": "ns", "name": "db-0"},
    "spec": {"nodeName": "n1", "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]},
}
CLAIMS = {("ns", "data"): {"spec": {"volumeName": "pvc-1"}}, ("ns", "other"): {"spec": {"volumeName": "pvc-2"}}}


def decide(node: str, volume: str, verb: str = "get") -> Decision:
    authorizer = NodeAuthorizer(
        lambda n: [POD] if n == "n1" else [],
        lambda ns, name: None,
        lambda ns, name: CLAIMS.get((ns, name)),
    )
    user = User(f"system:node:{node}", ("system:nodes",))
    attrs = Attributes(user, verb, True, api_version="v1", resource="persistentvolumes", name=volume)
    return authorizer.authorize(attrs).decision


def test_a_kubelet_gets_the_volumes_of_its_pods_claims_only() -> None:
    assert decide("n1", "pvc-1") == Decision.ALLOW
    assert decide("n1", "pvc-2") == Decision.DENY  # a claim no pod of n1 uses
    assert decide("n2", "pvc-1") == Decision.DENY  # another node's pod
    assert decide("n1", "pvc-1", "delete") == Decision.NO_OPINION  # RBAC decides (and refuses)
