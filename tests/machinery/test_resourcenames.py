"""Which resource names are native, extended, hugepages or attachable volumes, and which the
scheduler counts by name (kube's v1helper and IsScalarResourceName, case by case)."""

from __future__ import annotations

import pytest

from machinery.resourcenames import is_extended, is_native, is_scalar


@pytest.mark.parametrize(
    ("name", "native", "extended", "scalar"),
    [
        ("cpu", True, False, False),
        ("memory", True, False, False),
        ("pods", True, False, False),
        ("example.com/fakecpu", False, True, True),
        ("scheduling.k8s.io/foo", False, True, True),
        ("nvidia.com/gpu", False, True, True),
        ("kubernetes.io/foo", True, False, True),  # native, written with its domain
        ("hugepages-2Mi", True, False, True),
        ("attachable-volumes-aws-ebs", True, False, True),
        ("requests.example.com/foo", False, False, False),  # a quota name, not a resource
        ("example.com/" + "x" * 64, False, False, False),  # not a qualified name
        ("Example.com/foo", False, False, False),  # the domain is not a DNS subdomain
    ],
)
def test_resource_name_kinds(name: str, native: bool, extended: bool, scalar: bool) -> None:
    assert (is_native(name), is_extended(name), is_scalar(name)) == (native, extended, scalar)
