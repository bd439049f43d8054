"""The networking issue's own end-to-end path, as a user walks it (root, as CI runs): `raftkube
up` on the pod network with two kubelets, kubectl 1.33, busybox pods.

Two replicas of a web server on one port on one node both run (each pod its own address); a
pod on the other node reaches both through the Service's name (cluster DNS, the search path in
its resolv.conf) and its ClusterIP (the service proxy), over many requests; the host reaches
the NodePort on each node's address, and a host port on its node's; a headless StatefulSet's
members resolve by name; a pod being deleted leaves the rotation while its process still runs
(its preStop hook holds it); and `raftkube down` leaves no network namespace, link, nft table or route behind."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.cli.launcher import LocalComponent
from components.kubelet import podnet
from tests.apiserver.support import ApiserverUnderTest
from tests.support.cli import raftkube
from tests.support.detached import detached_cluster
from tests.support.wait import until as wait_until

NS = "default"
WAIT_S = 120.0
NODES = ("node-1", "node-2")
CONFIG = '[store]\nmembers = 1\n[apiserver]\nstartup_timeout = 60.0\n[kubelets]\ncount = 2\npod_network = "netns"\n'

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the pod network needs root")  # CI runs as root


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    return wait_until(what, check, wait, step=0.5)


def _stop_parts(data_dir: Path) -> None:
    for name in (*(f"kubelet-{n}" for n in NODES), *(f"proxy-{n}" for n in NODES), "cluster-dns"):
        LocalComponent(data_dir, name).stop(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    tmp = tmp_path_factory.mktemp("network")
    with detached_cluster(tmp, CONFIG, "--hollow-nodes", "0", also_stop=_stop_parts) as up:
        yield up


def get(cluster: ApiserverUnderTest, *what: str) -> Any:
    return json.loads(cluster.ok("get", "-n", NS, *what, "-o", "json"))


def ready_pods(cluster: ApiserverUnderTest, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in get(cluster, "pods", "-l", selector)["items"]
        if not p["metadata"].get("deletionTimestamp")
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", []))
    ]


def web_server(name: str, node: str, replicas: int, pre_stop_s: int = 0) -> dict[str, Any]:
    """busybox httpd on 8080 answering its pod's name; ready when it answers."""
    container: dict[str, Any] = {
        "name": "web",
        "image": "busybox",
        "command": ["sh", "-c", "hostname > /www/index.html && exec busybox httpd -f -p 8080 -h /www"],
        "ports": [{"containerPort": 8080}],
        "volumeMounts": [{"name": "www", "mountPath": "/www"}],
        # A generous timeout: a replica that turns unready on a loaded machine sends a Service's
        # traffic to its terminating neighbours (kube's fallback), which no test here is about.
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1, "timeoutSeconds": 5},
    }
    if pre_stop_s:
        container["lifecycle"] = {"preStop": {"exec": {"command": ["sleep", str(pre_stop_s)]}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [container],
                    "volumes": [{"name": "www", "emptyDir": {}}],
                },
            },
        },
    }


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}], **spec},
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


def fetch_many(cluster: ApiserverUnderTest, url: str, count: int) -> list[str]:
    """What `count` HTTP requests from the client pod to `url` (host[:port]) were answered with
    (each the answering pod's name, or FAILED)."""
    # nc, not wget: Debian's busybox (what CI's busybox image runs) crashes in wget
    host, _, port = url.partition(":")
    request = 'printf "GET / HTTP/1.0\\r\\n\\r\\n"'
    once = f"{request} | busybox nc -w 3 {host} {port or 80} | tail -n 1 | grep . || echo FAILED"
    script = f"for i in $(seq {count}); do {once}; done"
    return cluster.ok("exec", "-n", NS, "client", "--", "sh", "-c", script).split()


def apply(cluster: ApiserverUnderTest, *objs: dict[str, Any]) -> None:
    for obj in objs:
        cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(obj))


def test_status_shows_a_proxy_per_node_and_the_dns_server(cluster: ApiserverUnderTest) -> None:
    proc = raftkube("status", "--data-dir", str(cluster.data_dir), "-o", "json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {r["part"]: r for r in json.loads(proc.stdout)}
    for part in ("proxy-node-1", "proxy-node-2", "cluster-dns"):
        assert rows[part]["healthy"] and rows[part]["pid"], rows.get(part)


def test_two_replicas_on_one_port_on_one_node_are_both_reached_by_name_cluster_ip_and_node_port(
    cluster: ApiserverUnderTest,
) -> None:
    apply(cluster, web_server("web", "node-1", 2), service("web", type="NodePort"), CLIENT)
    pods = until("both replicas Ready on node-1", lambda: (p := ready_pods(cluster, "app=web")) and len(p) == 2 and p)
    assert {p["spec"]["nodeName"] for p in pods} == {"node-1"}
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2 and all(ip.startswith("10.244.1.") for ip in ips)
    names = {p["metadata"]["name"] for p in pods}
    until("the client Running", lambda: get(cluster, "pod", "client")["status"].get("phase") == "Running")
    svc = get(cluster, "service", "web")
    cluster_ip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
    assert cluster_ip.startswith("10.96.") and 30000 <= node_port <= 32767
    resolv = cluster.ok("exec", "-n", NS, "client", "--", "cat", "/etc/resolv.conf")
    assert "nameserver 10.96.0.10" in resolv and "search default.svc.cluster.local" in resolv
    for url in ("web", cluster_ip, "web.default.svc.cluster.local"):

        def both(url: str = url) -> list[str] | None:
            answers = fetch_many(cluster, url, 30)
            return answers if set(answers) == names else None

        assert len(until(f"{url} answered by both replicas", both)) == 30
    seen: set[str] = set()
    for node in ("10.244.1.1", "10.244.2.1"):  # every node's address serves the NodePort
        for _ in range(20):
            with urllib.request.urlopen(f"http://{node}:{node_port}/", timeout=5) as r:
                seen.add(r.read().decode().strip())
    assert seen == names


def test_a_host_port_answers_on_its_nodes_address(cluster: ApiserverUnderTest) -> None:
    server = web_server("hp", "node-2", 1)
    server["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8081}]
    apply(cluster, server)
    (pod,) = until("the host-port pod Ready", lambda: ready_pods(cluster, "app=hp"))

    def answered() -> str | None:
        try:
            with urllib.request.urlopen("http://10.244.2.1:8081/", timeout=3) as r:
                return str(r.read().decode().strip())
        except OSError:
            return None

    assert until("node-2's address:8081 answers", answered, wait=30.0) == pod["metadata"]["name"]


def test_a_headless_stateful_sets_members_resolve_by_name(cluster: ApiserverUnderTest) -> None:
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "db"},
        "spec": {"clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 80}]},
    }
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "serviceName": "db",
            "replicas": 2,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "db", "image": "busybox", "command": ["sleep", "3600"]}],
                },
            },
        },
    }
    apply(cluster, headless, sts, CLIENT)
    pods = until("2 members Ready", lambda: (p := ready_pods(cluster, "app=db")) and len(p) == 2 and p)
    for pod in pods:
        name = f"{pod['metadata']['name']}.db.default.svc.cluster.local"

        def resolved(name: str = name, ip: str = pod["status"]["podIP"]) -> bool:
            out = cluster.kubectl("exec", "-n", NS, "client", "--", "busybox", "nslookup", name + ".")
            return out.returncode == 0 and ip in out.stdout

        until(f"{name} resolves to its pod", resolved, wait=60.0)
    both = cluster.ok("exec", "-n", NS, "client", "--", "busybox", "nslookup", "db.default.svc.cluster.local.")
    assert all(p["status"]["podIP"] in both for p in pods)


def test_a_pod_being_deleted_leaves_the_rotation_before_its_process_stops(cluster: ApiserverUnderTest) -> None:
    apply(cluster, web_server("slow", "node-1", 2, pre_stop_s=15), service("slow"), CLIENT)
    pods = until("both Ready", lambda: (p := ready_pods(cluster, "app=slow")) and len(p) == 2 and p)
    until("the client Running", lambda: get(cluster, "pod", "client")["status"].get("phase") == "Running")
    until("both answer", lambda: set(fetch_many(cluster, "slow", 20)) == {p["metadata"]["name"] for p in pods})
    leaving, staying = pods[0]["metadata"]["name"], pods[1]["metadata"]["name"]
    cluster.ok("delete", "pod", "-n", NS, leaving, "--wait=false")
    deleted_at = time.monotonic()

    def out_of_rotation() -> bool:
        # The ReplicaSet's replacement may join the rotation at any moment: the requirement is
        # only that the leaving pod, still running its preStop hook, gets nothing.
        answers = fetch_many(cluster, "slow", 10)
        return leaving not in answers and "FAILED" not in answers

    until("requests avoid the leaving pod", out_of_rotation, wait=10.0)
    answers = fetch_many(cluster, "slow", 20)
    if leaving in answers or answers.count("FAILED") > 1:
        slices = cluster.ok("get", "endpointslices", "-n", NS, "-l", "kubernetes.io/service-name=slow", "-o", "yaml")
        conditions = cluster.ok("get", "pods", "-n", NS, "-l", "app=slow", "-o", "jsonpath={.items[*].status}")
        pytest.fail(f"answers {answers}, leaving {leaving}\nslices:\n{slices}\npods:\n{conditions}")
    assert staying in answers
    still = get(cluster, "pod", leaving)  # its preStop hook holds it: still there, still running
    assert still["metadata"].get("deletionTimestamp") and time.monotonic() - deleted_at < 15
    assert any(c.get("state", {}).get("running") for c in still["status"]["containerStatuses"])


def _leftovers() -> list[str]:
    """What a pod network of NODES left on this machine."""
    left: list[str] = []
    for node in NODES:
        prefix = podnet.netns_prefix(node)
        left += [p.name for p in podnet.NETNS_DIR.glob(prefix + "*")] if podnet.NETNS_DIR.is_dir() else []
        if podnet.link_exists(podnet.bridge_name(node)):
            left.append(podnet.bridge_name(node))
    routes = subprocess.run(["ip", "route", "show"], capture_output=True, text=True, check=True).stdout
    left += [line for line in routes.splitlines() if line.startswith("10.244.")]
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    left += [line for line in tables.splitlines() if "rk-proxy-" in line or "rk-hostports-" in line]
    return left


def test_down_leaves_no_namespace_link_table_or_route(cluster: ApiserverUnderTest) -> None:
    """Last in this module: it stops the cluster."""
    assert _leftovers(), "the running cluster has a pod network to check for"
    assert raftkube("down", "--data-dir", str(cluster.data_dir), timeout=120).returncode == 0
    assert _leftovers() == []
