"""The Node a kubelet registers, its conditions in kube's words, transition and heartbeat
times, allocatable, and when a status is worth posting."""

from __future__ import annotations

import pytest

from components.kubelet.nodestatus import (
    NodeConfig,
    NodeConfigError,
    Observed,
    allocatable,
    merge_conditions,
    needs_post,
    register,
)

CONFIG = NodeConfig(
    name="n1",
    address="127.0.0.1",
    port=10250,
    capacity={"cpu": "4", "memory": "8Gi", "pods": "110"},
    reserved={"cpu": "500m", "memory": "512Mi"},
    labels={"topology.kubernetes.io/zone": "a"},
)


def test_register_builds_the_node_kube_would() -> None:
    node = register(CONFIG, Observed(), "t0")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"
    assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "a"
    status = node["status"]
    assert status["capacity"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert status["allocatable"] == {"cpu": "3500m", "memory": "7680Mi", "pods": "110"}
    assert status["addresses"] == [
        {"type": "InternalIP", "address": "127.0.0.1"},
        {"type": "Hostname", "address": "n1"},
    ]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    assert status["nodeInfo"]["kubeletVersion"].startswith("v1.")
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert ready == {
        "type": "Ready",
        "status": "True",
        "lastHeartbeatTime": "t0",
        "lastTransitionTime": "t0",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
    }
    assert [c["type"] for c in status["conditions"]] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]


def test_heartbeats_move_transitions_only_on_change() -> None:
    held = merge_conditions([], Observed(), "t0")
    same = {c["type"]: c for c in merge_conditions(held, Observed(), "t1")}
    assert same["Ready"]["lastHeartbeatTime"] == "t1" and same["Ready"]["lastTransitionTime"] == "t0"
    down = {
        c["type"]: c
        for c in merge_conditions(
            held, Observed(memory_pressure=True, runtime_ready=False, runtime_problem="runtime gone"), "t2"
        )
    }
    assert down["Ready"]["status"] == "False" and down["Ready"]["lastTransitionTime"] == "t2"
    assert down["Ready"]["reason"] == "KubeletNotReady" and down["Ready"]["message"] == "runtime gone"
    assert down["MemoryPressure"]["reason"] == "KubeletHasInsufficientMemory"
    assert down["DiskPressure"]["lastTransitionTime"] == "t0"


def test_a_status_is_posted_on_change_or_once_a_minute() -> None:
    first = register(CONFIG, Observed(), "t0")["status"]
    assert needs_post(None, first, 0.0)
    beat = dict(first, conditions=merge_conditions(first["conditions"], Observed(), "t1"))
    assert not needs_post(first, beat, 30.0)  # only heartbeats moved
    assert needs_post(first, beat, 60.0)  # the periodic post
    changed = dict(first, conditions=merge_conditions(first["conditions"], Observed(disk_pressure=True), "t1"))
    assert needs_post(first, changed, 1.0)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        (NodeConfig("n", "127.0.0.1", 10250, capacity={"cpu": "four"}), "capacity.cpu"),
        (
            NodeConfig("n", "127.0.0.1", 10250, reserved={"gpu": "1"}),
            "reserved.gpu: not a resource of the node's capacity",
        ),
        (NodeConfig("", "127.0.0.1", 10250), "name: must not be empty"),
        (NodeConfig("n", "127.0.0.1", 0), "port: must be from 1 to 65535"),
    ],
)
def test_bad_node_settings_are_refused_naming_them(config: NodeConfig, says: str) -> None:
    with pytest.raises(NodeConfigError, match=says):
        register(config, Observed(), "t0")


def test_reservations_larger_than_capacity_leave_zero() -> None:
    config = NodeConfig(
        "n", "127.0.0.1", 10250, capacity={"cpu": "1", "memory": "1Gi", "pods": "10"}, reserved={"cpu": "2"}
    )
    assert allocatable(config)["cpu"] == "0"
