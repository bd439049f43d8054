"""Each node a host of its own (`raftkube up --hosts netns`, the HA set, the pod network), as a
cluster of machines on one LAN: kubelet-node-<i>, its service proxy (and node-1's DNS server) run
in host n<i>'s network namespace, at its LAN address, with the machine's mounts.  A pod on
node-2 reaches a web server on node-1 by the Service's name (DNS on node-1's host, the proxy on
node-2's, the pod CIDRs routed through this machine); the machine reaches the NodePort at
node-2's address and the pod's IP; `kubectl logs` reaches node-1's kubelet from an apiserver on
a host of its own; a killed kubelet comes back on its host and keeps its pods; `down` leaves
no host, pod namespace or route."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import LocalComponent
from components.kubelet import podnet
from machinery.process.hosts import can_make_hosts, free_subnet
from tests.apiserver.support import kubectl_binary
from tests.support.cli import raftkube
from tests.support.wait import until

pytestmark = pytest.mark.skipif(can_make_hosts() is not None, reason="hosts of their own need root")

WEB = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "nodeName": "node-1",
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "web",
                "image": "busybox",
                "command": [
                    "sh",
                    "-c",
                    "hostname > /www/index.html && echo serving && exec busybox httpd -f -p 8080 -h /www",
                ],
                "volumeMounts": [{"name": "www", "mountPath": "/www"}],
            }
        ],
        "volumes": [{"name": "www", "emptyDir": {}}],
    },
}
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "web"},
    "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
}
CLIENT = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "client"},
    "spec": {
        "nodeName": "node-2",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}],
    },
}


def _logs(kubectl: list[str], pod: str) -> str | None:
    """The pod's log, or None while kubectl cannot get it."""
    got = subprocess.run([*kubectl, "logs", pod], capture_output=True, text=True, timeout=60, check=False)
    return got.stdout.strip() if got.returncode == 0 else None


def _netns_of(pid: int | None) -> str:
    assert pid is not None
    inode = os.stat(f"/proc/{pid}/ns/net").st_ino
    return next(p.name for p in podnet.NETNS_DIR.iterdir() if os.stat(p).st_ino == inode)


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return str(r.read().decode().strip())
    except OSError:
        return None


def _leftovers(tag_prefix: str) -> list[str]:
    left = [p.name for p in podnet.NETNS_DIR.glob("*") if p.name.startswith(tag_prefix)]
    left += [p.name for n in ("node-1", "node-2") for p in podnet.NETNS_DIR.glob(podnet.netns_prefix(n) + "*")]
    routes = subprocess.run(["ip", "route", "show"], capture_output=True, text=True, check=True, timeout=10).stdout
    return left + [line for line in routes.splitlines() if line.startswith("10.244.")]


def _why_unreached(kubectl: Callable[..., str], data_dir: Path, n2: str, fetch: str) -> str:
    """What the client on node-2 sees step by step, and what node-2's proxy and the DNS server
    hold and logged: the failure says which link of name -> ClusterIP -> pod broke."""

    def run(argv: list[str]) -> str:
        try:
            got = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            return (got.stdout + got.stderr).strip()
        except (OSError, subprocess.SubprocessError) as e:
            return repr(e)

    def client(script: str) -> str:
        try:
            return kubectl("exec", "client", "--", "sh", "-c", script).strip()
        except AssertionError as e:
            return str(e)

    service_ip = kubectl("get", "service", "web", "-o", "jsonpath={.spec.clusterIP}").strip()
    web_ip = kubectl("get", "pod", "web", "-o", "jsonpath={.status.podIP}").strip()
    lines = [
        "resolv.conf: " + client("cat /etc/resolv.conf"),
        "nslookup: " + client("busybox nslookup web.default.svc.cluster.local 2>&1"),
        f"by ClusterIP {service_ip}: " + client(fetch.format(service_ip)),
        f"by pod IP {web_ip}:8080: " + client(fetch.replace(" 80 ", " 8080 ").format(web_ip)),
        "slices: " + kubectl("get", "endpointslices", "-A", "-o", "wide"),
        "this machine's addresses: " + run(["ip", "-br", "addr"]),
        "this machine's routes: " + run(["ip", "route"]),
        "node-2's routes: "
        + run(["ip", "-n", n2, "route"])
        + "\n"
        + run(["ip", "-n", n2, "route", "get", "10.244.1.1"]),
        "node-2's rules: " + run(["ip", "netns", "exec", n2, "nft", "list", "ruleset"])[:12000],
    ]
    for part in ("proxy-node-2", "cluster-dns"):
        log = data_dir / part / f"{part}.log"
        lines.append(f"{part}.log: " + (log.read_text(errors="replace")[-3000:] if log.exists() else "(none)"))
    return "\n".join(lines)


def test_each_node_runs_on_a_host_of_its_own_and_its_pods_are_reached_over_the_lan(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text(
        f'[store]\nmembers = 1\nhosts_subnet = "{free_subnet()}"\n[apiserver]\ncount = 2\nstartup_timeout = 60.0\n'
        '[kubelets]\ncount = 2\npod_network = "netns"\n'
    )
    data_dir = tmp_path / "rk"
    up = raftkube(
        "up", "--detach", "--free-ports", "--hosts", "netns", "--data-dir", str(data_dir), "--config", str(config),
        "--hollow-nodes", "0", timeout=180,
    )  # fmt: skip
    net = ApiserverSet(data_dir).host_network()
    assert net is not None
    tag = net.netns("")
    try:
        assert up.returncode == 0, up.stderr
        for name, host in [
            ("kubelet-node-1", "n1"), ("kubelet-node-2", "n2"), ("proxy-node-1", "n1"), ("proxy-node-2", "n2"),
            ("cluster-dns", "n1"),
        ]:  # fmt: skip
            part = LocalComponent(data_dir, name)
            assert _netns_of(part.pid()) == net.netns(host), name
            assert part.url.startswith(f"http://{net.address(60 + int(host[1:]))}:") and part.probe()[0] == 200
        kubectl = [str(kubectl_binary(33)), "--kubeconfig", str(data_dir / "kubeconfig")]

        def ok(*args: str, stdin: str | None = None) -> str:
            got = subprocess.run(
                [*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
            )
            assert got.returncode == 0, f"kubectl {' '.join(args)}: {got.stderr}"
            return got.stdout

        for obj in (WEB, SERVICE, CLIENT):
            ok("apply", "-f", "-", stdin=json.dumps(obj))
        ok("wait", "--for=condition=Ready", "pod/web", "pod/client", "--timeout=90s")
        pods = {
            p["metadata"]["name"]: p["status"]["podIP"] for p in json.loads(ok("get", "pods", "-o", "json"))["items"]
        }
        assert pods["web"].startswith("10.244.1.") and pods["client"].startswith("10.244.2.")
        fetch = 'printf "GET / HTTP/1.0\\r\\n\\r\\n" | busybox nc -w 3 {} 80 2>&1 | tail -n 1'
        try:
            until(
                "the client on node-2 reaches web on node-1 by name",
                lambda: (
                    ok("exec", "client", "--", "sh", "-c", fetch.format("web.default.svc.cluster.local")).strip()
                    == "web"
                ),
                60,
            )
        except AssertionError as failed:
            raise AssertionError(f"{failed}\n{_why_unreached(ok, data_dir, net.netns('n2'), fetch)}") from None
        node_port = json.loads(ok("get", "service", "web", "-o", "json"))["spec"]["ports"][0]["nodePort"]
        assert (
            until("node-2's NodePort from this machine", lambda: _get(f"http://10.244.2.1:{node_port}/"), 30) == "web"
        )
        assert _get(f"http://{pods['web']}:8080/") == "web"
        assert ok("logs", "web").strip() == "serving"  # an apiserver on its host reached node-1's kubelet
        kubelet = LocalComponent(data_dir, "kubelet-node-1")
        killed = kubelet.pid()
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        until("the kubelet back", lambda: kubelet.pid() not in (None, killed) and kubelet.probe()[0] == 200, 60)
        assert _netns_of(kubelet.pid()) == net.netns("n1")
        # healthy before it has re-learned its pods from the apiserver, the new kubelet answers
        # "not found on this node" for a while, as kube's kubelet does for a pod its pod manager lacks
        until("node-1's new kubelet serves web's log", lambda: _logs(kubectl, "web") == "serving", 30)
        assert _get(f"http://{pods['web']}:8080/") == "web"
        assert _leftovers(tag), "the running cluster has hosts and routes to check for"
    finally:
        down = raftkube("down", "--data-dir", str(data_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    assert _leftovers(tag) == []
