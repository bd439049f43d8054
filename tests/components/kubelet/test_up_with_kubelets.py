"""`raftkube up` with two kubelets: both nodes register Ready, a Deployment's pods run as real
processes spread over them, `kubectl describe` shows the kubelet's events, and `raftkube down`
leaves no process behind (kubelets, shims and containers included)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.apiserver.support import ApiserverUnderTest, running_apiserver
from tests.support.cli import raftkube
from tests.support.nodes import schedulable
from tests.support.wait import until as wait_until

WAIT_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    with running_apiserver(
        tmp_path_factory.mktemp("up-kubelets"), "raftkube", components=True, kubelets=2, hollow=3
    ) as server:
        yield server


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    return wait_until(what, check, wait, step=0.2)


def schedulable_nodes(http: Any) -> set[str]:
    return {n["metadata"]["name"] for n in http.get("/api/v1/nodes").json().get("items") or [] if schedulable(n)}


def processes_under(root: Path) -> list[int]:
    """Pids whose command line names `root` (kubelets and shims) or runs from it."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if str(root).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_two_kubelets_run_a_deployment_and_down_leaves_nothing(cluster: ApiserverUnderTest) -> None:
    with cluster.http() as http:
        want = {"node-1", "node-2", "hollow-1", "hollow-2", "hollow-3"}
        assert until("node-1, node-2 and three hollow nodes schedulable", lambda: schedulable_nodes(http) >= want)
        hollow = http.get("/api/v1/nodes", params={"labelSelector": "raftkube.io/hollow=true"}).json()["items"]
        assert sorted(n["metadata"]["name"] for n in hollow) == ["hollow-1", "hollow-2", "hollow-3"]
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "sleepers"},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "sleepers"}},
                "template": {
                    "metadata": {"labels": {"app": "sleepers"}},
                    "spec": {
                        "terminationGracePeriodSeconds": 2,
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {"key": "raftkube.io/hollow", "operator": "DoesNotExist"}
                                            ]
                                        }
                                    ]
                                }
                            }
                        },
                        "containers": [
                            {
                                "name": "c",
                                "image": "busybox",
                                "command": ["sh", "-c", "echo up on $NODE; exec sleep 300"],
                                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                            }
                        ],
                    },
                },
            },
        }
        assert http.post("/apis/apps/v1/namespaces/default/deployments", json=deployment).status_code == 201

        def running_pods() -> list[dict[str, Any]] | None:
            pods = http.get("/api/v1/namespaces/default/pods", params={"labelSelector": "app=sleepers"}).json()["items"]
            up = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
            return up if len(up) == 3 else None

        pods = until("3 pods Running", running_pods)
        assert {p["spec"]["nodeName"] for p in pods} == {"node-1", "node-2"}  # spread over both nodes
    # every kubelet `up` started serves logs and exec to the apiserver
    for p in pods:
        name, node = p["metadata"]["name"], p["spec"]["nodeName"]
        until(f"{name}'s log", lambda name=name, node=node: cluster.ok("logs", name) == f"up on {node}\n")
        assert cluster.ok("exec", name, "--", "sh", "-c", "echo $NODE") == f"{node}\n"
    # the kubelet tells what it did, beside the scheduler (kube's reasons, as kubectl describe shows them)
    name = pods[0]["metadata"]["name"]

    def described() -> str | None:
        out = cluster.ok("describe", "pod", name)
        return out if "Started container c" in out else None

    events = until(f"{name}'s kubelet events in kubectl describe", described).split("Events:")[1]
    for reason, source, message in [
        ("Scheduled", "default-scheduler", f"Successfully assigned default/{name} to"),
        ("Pulled", "kubelet", 'Container image "busybox" already present on machine'),
        ("Created", "kubelet", "Created container: c"),
        ("Started", "kubelet", "Started container c"),
    ]:
        assert any(reason in line and source in line and message in line for line in events.splitlines()), events
    assert processes_under(cluster.data_dir)  # the kubelets and the shims name the data dir
    containers = [
        int(orjson.loads(state.read_bytes())["pid"])
        for state in cluster.data_dir.glob("kubelet-*/root/containers/*/*/*/state.json")
    ]
    assert len(containers) >= 3
    down = raftkube("down", "--data-dir", str(cluster.data_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    until("no kubelet or shim left", lambda: not processes_under(cluster.data_dir))
    until("no container left", lambda: not [pid for pid in containers if Path(f"/proc/{pid}").exists()])
