"""The kubelet's admission of a pod bound by name (the scheduler never saw it): a host port
another running pod on the node holds refuses it for good — Failed, reason NodePorts, kube's
words, told in an event — and a free port, or a port held only by a finished pod, admits it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import NodeConfig
from machinery.host_ports import NO_FREE_PORTS, collides, first_collision, host_ports


class Recorder:
    """A client that only records what the kubelet writes."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Any]] = []
        self.created: list[Any] = []

    async def patch(self, path: str, body: Any, *args: Any, **kwargs: Any) -> Any:
        self.patches.append((path, body))
        return body

    async def create(self, path: str, body: Any, *args: Any, **kwargs: Any) -> Any:
        self.created.append(body)
        return body


def pod(name: str, port: int, phase: str = "Running", host_ip: str = "", protocol: str = "TCP") -> dict[str, Any]:
    spec_port = {
        "containerPort": port,
        "hostPort": port,
        "protocol": protocol,
        **({"hostIP": host_ip} if host_ip else {}),
    }
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"containers": [{"name": "c", "image": "x", "ports": [spec_port]}]},
        "status": {"phase": phase},
    }


def test_host_ports_collide_as_kubes() -> None:
    assert collides(("0.0.0.0", "TCP", 80), ("10.0.0.1", "TCP", 80))
    assert not collides(("10.0.0.2", "TCP", 80), ("10.0.0.1", "TCP", 80))
    assert not collides(("0.0.0.0", "UDP", 80), ("0.0.0.0", "TCP", 80))
    assert host_ports(pod("a", 81)) == [("0.0.0.0", "TCP", 81)]
    assert first_collision([("0.0.0.0", "TCP", 81)], [("0.0.0.0", "TCP", 82)]) is None


def test_a_pod_asking_for_a_held_host_port_is_refused_for_good() -> None:
    async def go() -> None:
        client = Recorder()
        kubelet = Kubelet(client, NodeConfig("n", "127.0.0.1", 10250), None)  # type: ignore[arg-type]
        held: dict[str, Any] = {
            "uid-a": SimpleNamespace(pod=pod("a", 8080)),
            "uid-done": SimpleNamespace(pod=pod("d", 9090, "Succeeded")),
        }
        kubelet.workers = held
        kubelet.network = SimpleNamespace()  # type: ignore[assignment]  # a pod network: only hostPorts count
        assert await kubelet._rejects(pod("b", 8080))
        assert not await kubelet._rejects(pod("c", 8081))
        assert not await kubelet._rejects(pod("e", 9090))  # held only by a finished pod
        assert not await kubelet._rejects(pod("f", 8080, protocol="UDP"))
        ((path, body),) = client.patches
        assert path.endswith("/namespaces/ns/pods/b/status")
        assert body["status"] == {
            "phase": "Failed",
            "reason": "NodePorts",
            "message": f"Pod was rejected: Predicate NodePorts failed: {NO_FREE_PORTS}",
        }
        await kubelet.events.flush()
        assert [e["reason"] for e in client.created] == ["NodePorts"]
        assert "uid-b" in kubelet._rejected
        await kubelet.forget_gone({"uid-a", "uid-done"})  # b deleted: forgotten
        assert "uid-b" not in kubelet._rejected

    asyncio.run(go())


def test_without_a_pod_network_every_container_port_is_the_nodes() -> None:
    """Pods share the node's network: a second pod on a port another running pod listens on is
    refused with a status that says so (not a crash loop whose probe passes on the neighbour)."""

    async def go() -> None:
        client = Recorder()
        kubelet = Kubelet(client, NodeConfig("n", "127.0.0.1", 10250), None)  # type: ignore[arg-type]
        first = pod("web-1", 8080)
        del first["spec"]["containers"][0]["ports"][0]["hostPort"]
        kubelet.workers = {"uid-web-1": SimpleNamespace(pod=first)}  # type: ignore[dict-item]
        second = pod("web-2", 8080)
        del second["spec"]["containers"][0]["ports"][0]["hostPort"]
        assert host_ports(second) == [] and host_ports(second, shared_network=True) == [("0.0.0.0", "TCP", 8080)]
        assert await kubelet._rejects(second)
        assert not await kubelet._rejects(pod("other", 8081))
        ((_, body),) = client.patches
        assert body["status"]["reason"] == "NodePorts"
        assert body["status"]["message"].endswith(
            "(pods share the node's network, no pod network here: port 8080/TCP is held by pod ns/web-1)"
        )

    asyncio.run(go())


def test_the_announced_local_volume_directory_is_absolute_from_a_relative_root(tmp_path: Any, monkeypatch: Any) -> None:
    """`raftkube up` runs kubelets with a relative data dir by default: the directory they
    announce for local volumes must still name one place (the controller writes it into the
    volumes, the kubelet mounts it later)."""
    monkeypatch.chdir(tmp_path)

    async def go() -> dict[str, Any]:
        client = Recorder()
        runtime = SimpleNamespace(root="rel/root")
        kubelet = Kubelet(client, NodeConfig("n", "127.0.0.1", 10250), runtime)  # type: ignore[arg-type]
        await kubelet.register()
        await kubelet.events.flush()
        node: dict[str, Any] = next(b for b in client.created if b.get("kind", "Node") == "Node" and "spec" in b)
        return node

    node = asyncio.run(go())
    announced = node["metadata"]["annotations"]["raftkube.io/local-volume-dir"]
    assert announced == str(tmp_path / "rel" / "root" / "local-volumes")
