"""Admission plugins parse what a namespace's LimitRanges, ResourceQuotas and labels say once
per version of the object, not once per pod: a new version (a changed object) is read again at
once, and an object without a resourceVersion is never kept."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver import errors
from apiserver.admission import resourcequota
from apiserver.admission.by_version import ByVersion
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.limitranger import CompiledRanges, LimitRanger
from apiserver.admission.podsecurity.plugin import PodSecurity
from apiserver.auth.user import User
from apiserver.resources import core_pods
from machinery.objects import Obj
from machinery.quantity import parse_quantity

ANN = User("ann")


def pod(**container: Any) -> Obj:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i", **container}]}}


def create(obj: Obj) -> AdmissionRequest:
    return AdmissionRequest("CREATE", core_pods.RESOURCE, "", "ns", "p", ANN, obj, None)


def limit_range(version: str, cpu: str) -> Obj:
    meta = {"name": "lr", "namespace": "ns", "resourceVersion": version}
    return {"metadata": meta, "spec": {"limits": [{"type": "Container", "default": {"cpu": cpu}}]}}


def test_a_changed_limit_range_defaults_the_next_pod_with_its_new_values() -> None:
    ranges = [limit_range("1", "100m")]
    plugin = LimitRanger(lambda ns: ranges)
    first = pod()
    asyncio.run(plugin.admit(create(first)))
    assert first["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "100m"}
    ranges[0] = limit_range("2", "0.5")
    second = pod()
    asyncio.run(plugin.admit(create(second)))
    assert second["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m"}  # canonical form


def test_compiled_ranges_are_kept_per_version_and_bounded() -> None:
    compiled = CompiledRanges(keep=2)
    a = compiled.items([limit_range("1", "1")])
    assert compiled.items([limit_range("1", "1")])[0] is a[0]  # same version: parsed once
    assert compiled.items([limit_range("2", "2")])[0].default == {"cpu": "2"}
    compiled.items([limit_range("3", "3")])  # the oldest version is dropped
    assert compiled.items([limit_range("1", "1")])[0] is not a[0]
    unstored = {"spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}}]}}
    assert compiled.items([unstored])[0].default == {"cpu": "1"}  # no version: compiled, not kept


def quota(version: str, pods: str) -> Obj:
    meta = {"name": "q", "namespace": "ns", "resourceVersion": version}
    return {"metadata": meta, "spec": {"hard": {"pods": pods, "requests.cpu": "1"}}}


def test_a_quota_is_parsed_once_per_version() -> None:
    hard = ByVersion(resourcequota._hard, keep=8)
    first = hard(quota("1", "5"))
    assert dict(first) == {"pods": parse_quantity("5"), "requests.cpu": parse_quantity(1)}
    assert hard(quota("1", "5")) is first
    assert hard(quota("2", "7"))["pods"] == parse_quantity(7)


def test_a_quota_on_cpu_still_needs_every_container_to_state_it() -> None:
    hard = ByVersion(resourcequota._hard)
    two: Obj = {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "1"}}},
        {"name": "b", "resources": {"limits": {"cpu": "1"}}},  # a limit stands for the request
    ]}}  # fmt: skip
    resourcequota._require_specified(create(two), [quota("1", "5")], hard)
    two["spec"]["containers"][1]["resources"] = {}
    with pytest.raises(errors.StatusError, match=r"failed quota: q: must specify requests\.cpu"):
        resourcequota._require_specified(create(two), [quota("1", "5")], hard)


def test_a_namespace_label_change_applies_to_the_next_pod() -> None:
    namespace: Obj = {"metadata": {"name": "ns", "resourceVersion": "1", "labels": {}}}

    async def get(name: str) -> Obj | None:
        return namespace

    plugin = PodSecurity(get, lambda ns: [])
    privileged = pod(securityContext={"privileged": True})
    asyncio.run(plugin.validate(create(privileged)))  # no policy: allowed
    namespace = {
        "metadata": {"name": "ns", "resourceVersion": "2", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}
    }
    with pytest.raises(errors.StatusError, match='violates PodSecurity "baseline:latest"'):
        asyncio.run(plugin.validate(create(privileged)))
