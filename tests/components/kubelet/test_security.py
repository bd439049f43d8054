"""Who a container runs as (kube's effective securityContext) and runAsNonRoot's refusal; its
no_new_privs flag and its capabilities."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.kubelet import security
from components.kubelet.security import RunAs, SecurityContextError, capabilities, no_new_privs, run_as


def pod(pod_sc: dict[str, Any] | None = None, **container_sc: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if container_sc:
        container["securityContext"] = container_sc
    p = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {"containers": [container]}}
    if pod_sc is not None:
        p["spec"]["securityContext"] = pod_sc
    return p, container


def test_nothing_said_runs_as_the_kubelet() -> None:
    assert run_as(*pod()) is None
    assert run_as(*pod({})) is None


def test_the_containers_ids_win_over_the_pods_and_groups_gather() -> None:
    p, c = pod({"runAsUser": 1001, "runAsGroup": 2002, "supplementalGroups": [3003, 3003], "fsGroup": 4004})
    assert run_as(p, c) == RunAs(1001, 2002, (3003, 4004))
    p, c = pod({"runAsUser": 1001, "runAsGroup": 2002}, runAsUser=1002)
    assert run_as(p, c) == RunAs(1002, 2002)
    p, c = pod(None, runAsUser=1002)
    assert run_as(p, c) == RunAs(1002, 0)  # no group said: the image user's, 0


def test_run_as_non_root_refuses_root_in_kubes_words() -> None:
    with pytest.raises(SecurityContextError, match="container has runAsNonRoot and image will run as root"):
        run_as(*pod({"runAsNonRoot": True}))
    with pytest.raises(SecurityContextError, match="container's runAsUser breaks non-root policy"):
        run_as(*pod({"runAsNonRoot": True}, runAsUser=0))
    p, c = pod({"runAsNonRoot": True, "runAsUser": 1000})
    assert run_as(p, c) == RunAs(1000, 0)
    p, c = pod({"runAsNonRoot": True}, runAsNonRoot=False)  # the container's word wins
    assert run_as(p, c) is None


@pytest.mark.parametrize("bad", [-1, "1000", True, 2**31, 1.5])
def test_ids_that_are_not_ids_are_refused_naming_the_field(bad: Any) -> None:
    with pytest.raises(SecurityContextError, match=r"container\.securityContext\.runAsUser"):
        run_as(*pod(None, runAsUser=bad))


def test_only_allow_privilege_escalation_false_sets_no_new_privs() -> None:
    assert no_new_privs({"securityContext": {"allowPrivilegeEscalation": False}})
    for container in ({}, {"securityContext": {"allowPrivilegeEscalation": True}}, {"securityContext": None}):
        assert not no_new_privs(container)


def test_a_container_keeps_the_runtimes_default_capabilities_changed_as_containerd_changes_them() -> None:
    caps = security.CAPABILITIES
    assert capabilities({}) == security.DEFAULT_CAPABILITIES
    assert caps["NET_ADMIN"] not in security.DEFAULT_CAPABILITIES and caps["CHOWN"] in security.DEFAULT_CAPABILITIES
    assert capabilities({"securityContext": {"privileged": True, "capabilities": {"drop": ["ALL"]}}}) is None
    asked = {"securityContext": {"capabilities": {"add": ["NET_ADMIN", "cap_sys_time"], "drop": ["CHOWN"]}}}
    want = (security.DEFAULT_CAPABILITIES | {caps["NET_ADMIN"], caps["SYS_TIME"]}) - {caps["CHOWN"]}
    assert capabilities(asked) == want
    every_but_chown = {"securityContext": {"capabilities": {"add": ["ALL"], "drop": ["CHOWN"]}}}
    assert capabilities(every_but_chown) == frozenset(caps.values()) - {caps["CHOWN"]}
    only_kill = {"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["KILL"]}}}
    assert capabilities(only_kill) == {caps["KILL"]}


@pytest.mark.parametrize(
    ("asked", "field"),
    [
        ({"add": ["NET_WIZARD"]}, "spec.containers[c].securityContext.capabilities.add[0]"),
        ({"drop": ["KILL", 7]}, "spec.containers[c].securityContext.capabilities.drop[1]"),
        ({"add": "NET_ADMIN"}, "spec.containers[c].securityContext.capabilities.add"),
    ],
)
def test_a_capability_that_is_not_one_is_refused_naming_the_field(asked: dict[str, Any], field: str) -> None:
    with pytest.raises(SecurityContextError, match=re.escape(field)):
        capabilities({"securityContext": {"capabilities": asked}}, "spec.containers[c]")
