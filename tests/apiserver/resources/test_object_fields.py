"""What a field selector sees of an object: the metadata fields every kind has and the resource's own."""

from __future__ import annotations

from apiserver.resources.base import ResourceDef, object_fields


def test_object_fields() -> None:
    pods = ResourceDef(
        "", "v1", "Pod", "pods", "pod", True, fields=lambda o: {"spec.nodeName": o.get("spec", {}).get("nodeName", "")}
    )
    nodes = ResourceDef("", "v1", "Node", "nodes", "node", False)
    pod = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    assert object_fields(pods, pod) == {"metadata.name": "p", "metadata.namespace": "ns", "spec.nodeName": "n1"}
    assert object_fields(nodes, {"metadata": {"name": "n1"}}) == {"metadata.name": "n1"}
