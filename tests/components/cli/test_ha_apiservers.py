"""Two apiservers behind the balancer (`[apiserver] count = 2`), as an HA control plane runs:
`up` starts both and the balancer on the cluster's address, `status` shows them, the admin
kubeconfig names the balancer (kubectl) and both apiservers (our components' failover), and
default/kubernetes names the balancer.  SIGKILL one apiserver: kubectl through the balancer
does not see a single failure, the controllers and the scheduler (on the survivor) still turn
a new Deployment into scheduled pods, and the supervisor brings the killed one back.
`down` stops all of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from apiserver.launcher import LocalApiserver
from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import LocalComponent
from machinery.process.hosts import can_make_hosts, free_subnet
from machinery.process.launch import read_pid
from tests.apiserver.support import kubectl_binary, running_apiserver
from tests.support.cli import raftkube
from tests.support.wait import until


def deployment(name: str) -> dict[str, object]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]},
            },
        },
    }


def test_two_apiservers_behind_the_balancer_survive_losing_one(tmp_path: Path) -> None:
    with running_apiserver(tmp_path, "raftkube", components=True, hollow=1, apiservers=2) as cluster:
        data_dir = cluster.data_dir
        status = raftkube("status", "--data-dir", str(data_dir), "-o", "json", timeout=60)
        assert status.returncode == 0, status.stderr
        rows = {r["part"]: r for r in json.loads(status.stdout)}
        for part in ("apiserver-1", "apiserver-2", "apiserver-balancer"):
            assert rows[part]["healthy"] and rows[part]["pid"], rows.get(part)
        assert "apiserver" not in rows
        assert rows["apiserver-balancer"]["url"] == cluster.url  # the cluster's address

        members = ApiserverSet(data_dir).members()
        urls = [m.recorded().url for m in members]  # type: ignore[union-attr]
        assert len(set([*urls, cluster.url])) == 3
        admin = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
        assert admin["server"] == cluster.url
        assert admin["extensions"] == [{"name": "raftkube.io/apiservers", "extension": {"servers": urls}}]

        slice_ = json.loads(cluster.ok("get", "endpointslices", "-n", "default", "kubernetes", "-o", "json"))
        assert [p["port"] for p in slice_["ports"]] == [int(cluster.url.rsplit(":", 1)[1])]
        assert [e["addresses"] for e in slice_["endpoints"]] == [["127.0.0.1"]]

        cluster.ok("apply", "-f", "-", stdin=json.dumps(deployment("before")))

        victim = LocalApiserver(data_dir, "apiserver-1")
        pid = victim.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        for i in range(10):  # every one through the balancer, none failing
            cluster.ok("create", "configmap", f"during-{i}", "--from-literal=k=v")
        cluster.ok("apply", "-f", "-", stdin=json.dumps(deployment("after")))

        def scheduled(app: str) -> bool:
            pods = json.loads(cluster.ok("get", "pods", "-l", f"app={app}", "-o", "json"))["items"]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        assert until(
            "the Deployments' pods created and scheduled", lambda: all(map(scheduled, ("before", "after"))), wait=60
        )

        def back() -> bool:
            new = victim.pid()
            return new is not None and new != pid and victim.probe(victim.recorded())[0] == 200  # type: ignore[arg-type]

        assert until("the supervisor restarted apiserver-1", back, wait=60)
        got = json.loads(cluster.ok("get", "configmaps", "-o", "json"))["items"]
        assert {f"during-{i}" for i in range(10)} <= {c["metadata"]["name"] for c in got}

        down = raftkube("down", "--data-dir", str(data_dir), timeout=120)
        assert down.returncode == 0, down.stderr
        assert "apiserver-1" in down.stdout and "apiserver-2" in down.stdout and "apiserver-balancer" in down.stdout
        for m in members:
            assert read_pid(m.root / "pid") is None
        assert ApiserverSet(data_dir).balancer().pid() is None


@pytest.mark.skipif(can_make_hosts() is not None, reason="hosts of their own need root")
def test_with_the_store_on_hosts_every_control_plane_part_runs_on_a_host_of_its_own(tmp_path: Path) -> None:
    """`up --hosts netns` (cluster.toml's [store] hosts): the HA set's apiservers each on a host
    of the members' LAN, at its own address on the cluster's port; the balancer reaches them
    there (through `up --detach`, which passes the flag on), and default/kubernetes names each of
    them (kube's lease reconciler); the controller-managers,
    schedulers and hollow nodes on hosts of their own too, their /healthz on their address,
    reaching the apiservers over the LAN (the hollow nodes turn Ready); a killed scheduler comes
    back on its host; `down` leaves no host."""
    subnet = free_subnet()
    more = f'[store]\nmembers = 3\nhosts_subnet = "{subnet}"\n[scheduler]\nreplicas = 2\n'
    config = tmp_path / "cluster.toml"
    config.write_text(
        more + '[apiserver]\ncount = 2\nstartup_timeout = 60.0\n[kubelets]\ncount = 0\npod_network = "host"\n'
    )
    data_dir = tmp_path / "rk"
    up = raftkube(
        "up", "--detach", "--free-ports", "--hosts", "netns", "--data-dir", str(data_dir), "--config", str(config),
        "--hollow-nodes", "2", timeout=180,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        net = ApiserverSet(data_dir).host_network()
        assert net is not None
        for i, member in enumerate(ApiserverSet(data_dir).members(), start=1):
            at = member.recorded()
            assert at is not None and at.host == str(net.address(20 + i)), at
            assert _netns_of(member.pid()) == net.netns(f"a{i}")
        for name, host, index in [("controller-manager", "c1", 31), ("scheduler", "s1", 41), ("scheduler-2", "s2", 42)]:
            part = LocalComponent(data_dir, name)
            assert _netns_of(part.pid()) == net.netns(host), name
            assert part.url.startswith(f"http://{net.address(index)}:") and part.probe()[0] == 200, part.url
        hollow = LocalComponent(data_dir, "hollow-nodes")
        assert _netns_of(hollow.pid()) == net.netns("k1")
        argv = [str(kubectl_binary(33)), "--kubeconfig", str(data_dir / "kubeconfig")]
        got = subprocess.run(
            [*argv, "get", "--raw", "/readyz"], check=False, capture_output=True, text=True, timeout=30
        )
        assert got.stdout == "ok", got.stderr
        # each apiserver names itself in default/kubernetes (kube's lease reconciler), not the balancer
        lan = [str(net.address(21)), str(net.address(22))]
        get_ep = [*argv, "get", "endpoints", "kubernetes", "-o", "jsonpath={.subsets[0].addresses[*].ip}"]

        def listed() -> list[str]:
            return subprocess.run(get_ep, check=False, capture_output=True, text=True, timeout=30).stdout.split()

        until("both apiservers in default/kubernetes", lambda: listed() == lan, 30)
        ready = [*argv, "wait", "--for=condition=Ready", "node", "hollow-1", "hollow-2", "--timeout=60s"]
        got = subprocess.run(ready, check=False, capture_output=True, text=True, timeout=90)
        assert got.returncode == 0, got.stdout + got.stderr
        scheduler = LocalComponent(data_dir, "scheduler")
        killed = scheduler.pid()
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        until("the scheduler back", lambda: scheduler.pid() not in (None, killed) and scheduler.probe()[0] == 200, 60)
        assert _netns_of(scheduler.pid()) == net.netns("s1")
    finally:
        down = raftkube("down", "--data-dir", str(data_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    assert net.hosts() == []


def _netns_of(pid: int | None) -> str:
    assert pid is not None
    ns = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, check=True, timeout=10)
    return ns.stdout.strip()
