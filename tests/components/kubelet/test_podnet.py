"""The pod network for real (root only): pods get different addresses of the node's CIDR and a
namespace with eth0; the host reaches a server in a pod at the pod's IP, and so does another
pod; a restarted kubelet re-adopts a pod's network; removing a pod removes its namespace and
veth and frees its address; stop_all leaves no namespace and no bridge.  Each test has its
own node name and a CIDR no route of the host uses, and removes what it made even when it
fails."""

from __future__ import annotations

import ipaddress
import shutil
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.kubelet import podnet
from components.kubelet.envvars import Sources
from components.kubelet.podworker import PodWorker, ready_pod
from components.kubelet.process_runtime import ProcessRuntime
from machinery.objects import Obj
from tests.support.network import free_cidr
from tests.support.wait import until

# network namespaces need root and iproute2: where they are missing these tests fail, loudly

NO_SOURCES = Sources(lambda ns, n: None, lambda ns, n: None)
IP = shutil.which("ip") or "ip"
SERVER = "import http.server as h; h.HTTPServer(('0.0.0.0', 8080), h.SimpleHTTPRequestHandler).serve_forever()"


@pytest.fixture
def network(runtime: ProcessRuntime) -> Iterator[podnet.PodNetwork]:
    """A node's pod network on the runtime's root; torn down after the test (its containers
    are killed by the runtime fixture, which ends after this one)."""
    net = podnet.PodNetwork(runtime.root, f"t-{uuid.uuid4().hex[:12]}", free_cidr())
    try:
        yield net
    finally:
        podnet.teardown_all(runtime.root)
        leftovers = [p.name for p in podnet.NETNS_DIR.glob(podnet.netns_prefix(net.node) + "*")]
        assert leftovers == [] and not podnet.link_exists(net.bridge)


def pod(uid: str, script: str) -> Obj:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
        "spec": {"containers": [{"name": "app", "image": "busybox", "command": ["sh", "-c", script]}]},
    }


def start(runtime: ProcessRuntime, network: podnet.PodNetwork, uid: str, script: str) -> PodWorker:
    worker = PodWorker(pod(uid, script), runtime, NO_SOURCES, host_ip="127.0.0.1")
    address = network.setup(uid)
    worker.pod_ip, worker.netns = address.ip, address.netns
    return worker


def running(worker: PodWorker) -> Obj:
    def check() -> Obj | None:
        status = worker.sync(time.time())
        return status if ready_pod(status) else None

    return until(f"pod {worker.uid} Running and Ready", check)


def log_of(runtime: ProcessRuntime, uid: str) -> str:
    run = runtime.seen(uid, "app")
    return Path(run.log).read_text() if run is not None and Path(run.log).exists() else ""


def get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status)
    except OSError:
        return 0


def test_pods_get_their_own_addresses_and_are_reached_there(
    runtime: ProcessRuntime, network: podnet.PodNetwork
) -> None:
    a = start(runtime, network, "a", f'exec {sys.executable} -c "{SERVER}"')
    b = start(runtime, network, "b", f"{IP} -o -4 addr show dev eth0; cat /proc/net/dev; exec sleep 30")
    ip_a, ip_b = ipaddress.IPv4Address(a.pod_ip), ipaddress.IPv4Address(b.pod_ip)
    assert ip_a != ip_b and {ip_a, ip_b} <= set(network.net.hosts()) and network.gateway not in (ip_a, ip_b)
    status = running(a)
    assert status["podIP"] == a.pod_ip and status["podIPs"] == [{"ip": a.pod_ip}] and status["hostIP"] == "127.0.0.1"
    running(b)
    assert until("the host reaching pod a's server at its IP", lambda: get(f"http://{a.pod_ip}:8080/") == 200)
    out = until("pod b's view of its interfaces", lambda: "eth0" in (t := log_of(runtime, "b")) and "lo:" in t and t)
    assert f"inet {b.pod_ip}/24" in out  # eth0 holds the pod's address, seen from inside
    probe = f"import urllib.request as u; print(u.urlopen('http://{a.pod_ip}:8080/', timeout=5).status)"
    c = start(runtime, network, "c", f'{sys.executable} -c "{probe}"; exec sleep 30')
    running(c)
    assert until("pod c reaching pod a", lambda: "200" in log_of(runtime, "c"))


def test_a_restarted_kubelet_adopts_the_pod_network(runtime: ProcessRuntime, network: podnet.PodNetwork) -> None:
    first = network.setup("a")
    veth = podnet.veth_name(network.node, "a")
    index = Path(f"/sys/class/net/{veth}/ifindex").read_text()
    again = podnet.PodNetwork(runtime.root, network.node, str(network.net))  # the kubelet came back
    assert again.setup("a") == first
    assert Path(f"/sys/class/net/{veth}/ifindex").read_text() == index  # not made again
    assert again.held() == {"a": first.ip}


def test_removing_a_pod_removes_its_network_and_frees_its_address(
    runtime: ProcessRuntime, network: podnet.PodNetwork
) -> None:
    a = start(runtime, network, "a", "exec sleep 30")
    running(a)
    network.setup("b")
    runtime.stop("a", "app", 0.0, time.time())
    until("pod a's container to end", lambda: not a.running())
    network.teardown("a")
    assert not Path(a.netns or "").exists() and not podnet.link_exists(podnet.veth_name(network.node, "a"))
    assert set(network.held()) == {"b"}
    assert network.setup("c").ip == a.pod_ip  # the freed address is the lowest again


def test_stop_all_leaves_no_pod_network(runtime: ProcessRuntime, network: podnet.PodNetwork) -> None:
    a = start(runtime, network, "a", "exec sleep 30")
    running(a)
    network.setup("b")
    assert runtime.stop_all(grace_s=0.0, timeout_s=10.0) == 1
    assert list(podnet.NETNS_DIR.glob(podnet.netns_prefix(network.node) + "*")) == []
    assert not podnet.link_exists(network.bridge) and not podnet.link_exists(podnet.veth_name(network.node, "a"))
    assert not network.state_path.exists()


def test_ip_errors_say_what_failed(network: podnet.PodNetwork) -> None:
    with pytest.raises(podnet.PodNetError, match=r"`ip link del rk-no-such-link` failed: .*rk-no-such-link"):
        podnet.run_ip(["link", "del", "rk-no-such-link"])


def test_concurrent_setups_and_teardowns_never_share_an_address(network: podnet.PodNetwork) -> None:
    """The kubelet sets pods up and tears them down in worker threads, several at once; the
    address state must not lose a change (a lost one once handed a live pod's address to a
    new pod: two namespaces answering for one IP)."""
    from concurrent.futures import ThreadPoolExecutor

    first = [uuid.uuid4().hex for _ in range(6)]
    for uid in first:
        network.setup(uid)
    second = [uuid.uuid4().hex for _ in range(6)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(
            pool.map(
                lambda job: job[0](job[1]),
                [(network.teardown, u) for u in first] + [(network.setup, u) for u in second],
            )
        )
    held = network.held()
    assert sorted(held) == sorted(second)
    assert len(set(held.values())) == len(second)  # every live pod its own address
    namespaces = sorted(p.name for p in podnet.NETNS_DIR.glob(podnet.netns_prefix(network.node) + "*"))
    assert namespaces == sorted(podnet.netns_name(network.node, u) for u in second)


def test_a_bridge_no_pod_ever_used_is_torn_down(network: podnet.PodNetwork) -> None:
    """The kubelet makes its bridge at its start; `down` (teardown_all) must find it even when
    no pod ever ran on the node: a bridge left with 10.244.1.1 shadowed the next cluster's
    node-1 (its DNS server) from this machine (CI of 76fb950, test_node_hosts)."""
    network.ensure_bridge()
    assert podnet.link_exists(network.bridge) and network.state_path.exists()
    assert podnet.teardown_all(network.root) == 0
    assert not podnet.link_exists(network.bridge) and not network.state_path.exists()
