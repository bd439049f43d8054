"""The whole cluster through kubectl 1.33, as `raftkube up` starts it with two kubelets: a
Deployment's pods are real processes spread over the nodes, with logs and exec; it scales, rolls
out a new command and back; a Job completes and a failing one stops at its backoffLimit; a
liveness probe restarts its container; a ConfigMap volume is served from a pod
through port-forward; deleting a Deployment or a namespace ends the
processes; killing the store leader loses nothing; killing a kubelet makes its node NotReady
and its pods come back on the other node; `raftkube down` leaves no process behind."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from components.cli.launcher import LocalComponent
from machinery.process import launch
from machinery.process.launch import free_ports
from tests.apiserver.kubectl_support import kubectl_running
from tests.apiserver.support import ApiserverUnderTest, kubectl_binary, running_apiserver
from tests.support.cli import raftkube
from tests.support.nodes import schedulable
from tests.support.wait import until as wait_until

WAIT_S = 90.0
FAST_EVICTION = [  # replaced within seconds when their node goes away (kube's default is 300 s)
    {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 2}
    for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    # a killed kubelet's node is NotReady after 15 s, not kube's 40 (its lease is renewed every 10 s)
    grace = '[controller_manager]\nargs = ["--node-monitor-grace-period", "15"]\n'
    with running_apiserver(
        tmp_path_factory.mktemp("alive"), "raftkube", components=True, kubelets=2, config=grace
    ) as server:
        yield server


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    return wait_until(what, check, wait, step=0.3)


def pods(cluster: ApiserverUnderTest, selector: str, ns: str = "default") -> list[dict[str, Any]]:
    out = cluster.ok("get", "pods", "-n", ns, "-l", selector, "-o", "json")
    return list(json.loads(out)["items"])


def running(cluster: ApiserverUnderTest, selector: str, n: int, ns: str = "default") -> list[dict[str, Any]] | None:
    live = [p for p in pods(cluster, selector, ns) if not p["metadata"].get("deletionTimestamp")]
    up = [p for p in live if p.get("status", {}).get("phase") == "Running"]
    return up if len(up) == n == len(live) else None


def container_pids(cluster: ApiserverUnderTest, pod: dict[str, Any]) -> list[int]:
    uid = pod["metadata"]["uid"]
    return [
        int(orjson.loads(state.read_bytes())["pid"])
        for state in cluster.data_dir.glob(f"kubelet-*/root/containers/{uid}/*/*/state.json")
    ]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def apply(cluster: ApiserverUnderTest, obj: dict[str, Any]) -> None:
    cluster.ok("apply", "-f", "-", stdin=json.dumps(obj))


def deployment(name: str, replicas: int, script: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 2,
                    "tolerations": FAST_EVICTION,
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}],
                },
            },
        },
    }


def test_a_deployment_of_processes(cluster: ApiserverUnderTest) -> None:
    until(
        "node-1 and node-2 schedulable",
        lambda: "node-1" in cluster.ok("get", "nodes") and _schedulable_nodes(cluster) >= 2,
    )
    apply(cluster, deployment("web", 3, "echo hello from $HOSTNAME; exec sleep 3600"))
    cluster.ok("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
    up = until("3 pods Running", lambda: running(cluster, "app=web", 3))
    assert {p["spec"]["nodeName"] for p in up} == {"node-1", "node-2"}  # spread over both nodes
    for p in up:
        name = p["metadata"]["name"]
        assert until(f"{name}'s log", lambda name=name: cluster.ok("logs", name)) == f"hello from {name}\n"
        status = cluster.ok("exec", name, "--", "cat", "/proc/self/status")
        assert "Pid:" in status and "State:" in status
        pids = container_pids(cluster, p)
        assert pids and all(alive(pid) for pid in pids), (name, pids)
    # scale up and down: processes follow
    cluster.ok("scale", "deployment/web", "--replicas=5")
    until("5 pods Running", lambda: running(cluster, "app=web", 5))
    before = {p["metadata"]["name"]: container_pids(cluster, p) for p in pods(cluster, "app=web")}
    cluster.ok("scale", "deployment/web", "--replicas=1")
    [kept] = until("1 pod Running", lambda: running(cluster, "app=web", 1))
    assert len(before) == 5 and all(before.values()), before  # every pod's container found
    gone = [pid for name, pids in before.items() if name != kept["metadata"]["name"] for pid in pids]
    assert len(gone) >= 4, before
    until("the scaled-down pods' processes ended", lambda: not any(alive(pid) for pid in gone))


def test_a_config_map_volume_served_through_port_forward(cluster: ApiserverUnderTest) -> None:
    """A ConfigMap mounted where a web server in the pod serves it; kubectl exec sees the file
    and kubectl port-forward reaches the server; an update of the ConfigMap reaches the pod.
    The pod's service account token works against the apiserver."""
    port, local = free_ports(2)
    www = f"/tmp/raftkube-e2e-www-{uuid.uuid4().hex[:8]}"  # a mount point the host does not have
    try:
        apply(
            cluster,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site"}, "data": {"index.html": "v1"}},
        )
        site = deployment("site", 1, f"exec python3 -m http.server {port} --bind 127.0.0.1 --directory {www}")
        spec = site["spec"]["template"]["spec"]
        spec["volumes"] = [{"name": "www", "configMap": {"name": "site"}}]
        spec["containers"][0]["volumeMounts"] = [{"name": "www", "mountPath": www}]
        apply(cluster, site)
        [pod] = until("the site pod Running", lambda: running(cluster, "app=site", 1))
        name = pod["metadata"]["name"]
        assert cluster.ok("exec", name, "--", "cat", f"{www}/index.html") == "v1"
        assert not os.path.lexists(www)  # made and mounted in the container's namespace only
        # every pod's service account volume: its namespace, the cluster CA and a token that
        # authenticates as the pod's service account
        sa = "/var/run/secrets/kubernetes.io/serviceaccount"
        assert cluster.ok("exec", name, "--", "cat", f"{sa}/namespace") == "default"
        assert cluster.ok("exec", name, "--", "cat", f"{sa}/ca.crt").startswith("-----BEGIN CERTIFICATE-----")
        token = cluster.ok("exec", name, "--", "cat", f"{sa}/token")
        assert _whoami(cluster, token) == "system:serviceaccount:default:default"
        with kubectl_running(cluster, "port-forward", f"pod/{name}", f"{local}:{port}", minor=33) as reader:
            reader.wait_for(f"Forwarding from 127.0.0.1:{local}")
            url = f"http://127.0.0.1:{local}/index.html"
            assert until("the page through port-forward", lambda: _get(url)) == b"v1"
            cluster.ok("patch", "configmap/site", "-p", json.dumps({"data": {"index.html": "v2"}}))
            until("the update served", lambda: _get(url) == b"v2")
        cluster.ok("delete", "deployment/site", "configmap/site")
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(www)


def _whoami(cluster: ApiserverUnderTest, token: str) -> str:
    """Who the apiserver takes `token`'s bearer for (no other credential: an empty kubeconfig)."""
    ca = cluster.data_dir / "apiserver" / "pki" / "ca.crt"
    argv = [str(kubectl_binary(33)), "--kubeconfig", os.devnull, "--server", cluster.url]
    argv += ["--certificate-authority", str(ca), "--token", token, "auth", "whoami", "-o", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["status"]["userInfo"]["username"])


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return bytes(r.read())
    except OSError:
        return b""


def test_a_rolling_update_and_its_undo(cluster: ApiserverUnderTest) -> None:
    cluster.ok("scale", "deployment/web", "--replicas=2")
    until("2 pods Running", lambda: running(cluster, "app=web", 2))
    patch = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/command/2", "value": "echo v2; exec sleep 3600"}
    ]
    cluster.ok("patch", "deployment/web", "--type=json", "-p", json.dumps(patch))
    cluster.ok("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
    new = until("2 new pods Running", lambda: running(cluster, "app=web", 2))
    for p in new:
        name = p["metadata"]["name"]
        assert until(f"{name}'s log", lambda name=name: cluster.ok("logs", name)) == "v2\n"
    cluster.ok("rollout", "undo", "deployment/web")
    cluster.ok("rollout", "status", "deployment/web", "--timeout=90s", timeout=100)
    back = until("2 pods of the first revision", lambda: running(cluster, "app=web", 2))
    for p in back:
        name = p["metadata"]["name"]
        assert until(f"{name}'s log", lambda name=name: cluster.ok("logs", name)) == f"hello from {name}\n"


def test_jobs_complete_or_stop_at_their_backoff_limit(cluster: ApiserverUnderTest) -> None:
    cluster.ok("create", "job", "ok", "--image=busybox", "--", "sh", "-c", "echo done")
    cluster.ok("wait", "--for=condition=complete", "job/ok", "--timeout=60s", timeout=70)
    assert cluster.ok("logs", "job/ok") == "done\n"
    failing = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bad"},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "exit 3"]}],
                }
            },
        },
    }
    apply(cluster, failing)
    cluster.ok("wait", "--for=condition=failed", "job/bad", "--timeout=90s", timeout=100)
    job = json.loads(cluster.ok("get", "job/bad", "-o", "json"))
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded" and job["status"]["failed"] == 2


def test_a_failing_liveness_probe_restarts_the_container(cluster: ApiserverUnderTest) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "sick", "labels": {"app": "sick"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sleep", "3600"],
                    "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1},
                }
            ],
        },
    }
    apply(cluster, pod)

    def restarted() -> bool:
        rows = cluster.ok("get", "pod", "sick", "--no-headers").split()
        return len(rows) >= 4 and rows[3] != "0"  # NAME READY STATUS RESTARTS

    until("RESTARTS above 0", restarted)
    cluster.ok("delete", "pod", "sick", "--wait=false")


def test_deleting_a_namespace_ends_its_processes(cluster: ApiserverUnderTest) -> None:
    cluster.ok("create", "namespace", "doomed")
    apply(
        cluster, {**deployment("inside", 2, "exec sleep 3600"), "metadata": {"name": "inside", "namespace": "doomed"}}
    )
    up = until("2 pods Running in doomed", lambda: running(cluster, "app=inside", 2, ns="doomed"))
    pids = [pid for p in up for pid in container_pids(cluster, p)]
    assert pids and all(alive(pid) for pid in pids)
    cluster.ok("delete", "namespace", "doomed", "--timeout=90s", timeout=100)
    assert cluster.kubectl("get", "namespace", "doomed").returncode != 0
    assert not any(alive(pid) for pid in pids)


def test_killing_the_store_leader_loses_nothing(cluster: ApiserverUnderTest) -> None:
    before = {p["metadata"]["name"] for p in running(cluster, "app=web", 2) or []}
    os.kill(_store_leader_pid(cluster), signal.SIGKILL)
    cluster.ok("scale", "deployment/web", "--replicas=4", timeout=60)
    up = until("4 pods Running after the leader died", lambda: running(cluster, "app=web", 4))
    assert before <= {p["metadata"]["name"] for p in up}  # the pods that ran still do


def test_logs_and_restart_of_a_part(cluster: ApiserverUnderTest) -> None:
    data_dir = ["--data-dir", str(cluster.data_dir)]
    assert raftkube("logs", "kubelet-node-1", *data_dir).returncode == 0
    two = raftkube("logs", "apiserver", "--tail", "2", *data_dir)
    assert two.returncode == 0 and len(two.stdout.splitlines()) <= 2
    unknown = raftkube("logs", "nope", *data_dir)
    assert unknown.returncode == 2 and "known: store-1" in unknown.stderr and "kubelet-node-1" in unknown.stderr
    on_node_1 = [p for p in running(cluster, "app=web", 4) or [] if p["spec"]["nodeName"] == "node-1"]
    assert on_node_1
    pids = container_pids(cluster, on_node_1[0])
    restarted = raftkube("restart", "kubelet-node-1", *data_dir, timeout=90)
    assert restarted.returncode == 0, restarted.stderr
    time.sleep(3.0)  # a few syncs of the new kubelet
    assert pids and all(alive(pid) for pid in pids)  # adopted, not restarted
    assert running(cluster, "app=web", 4) is not None
    follower = next(
        r for r in json.loads(raftkube("status", *data_dir, "-o", "json").stdout) if r["role"] == "follower"
    )
    member = follower["part"].removeprefix("store member ")
    log = cluster.data_dir / "store" / f"member-{member}" / "member.log"
    size = log.stat().st_size
    argv = [sys.executable, "-m", "components.cli", "logs", "-f", f"store-{member}", "--tail", "1", *data_dir]
    follow = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # its last line first: -f is running and follows from here (on a busy machine its start
        # once took longer than the restart, and with --tail 0 it saw none of the new lines)
        assert follow.stdout is not None
        ready, _, _ = select.select([follow.stdout], [], [], WAIT_S)
        assert ready, "logs -f printed no tail line"
        follow.stdout.readline()
        again = raftkube("restart", f"store-{member}", *data_dir, timeout=90)
        assert again.returncode == 0, again.stderr
        until("the restarted member to log", lambda: log.stat().st_size > size)
        time.sleep(1.0)  # -f polls
    finally:
        follow.send_signal(signal.SIGINT)
        out, _ = follow.communicate(timeout=10)
    assert out and out in log.read_bytes()[size:]  # what it wrote after -f began
    cluster.ok("get", "pods")


def test_killing_a_kubelet_moves_its_pods(cluster: ApiserverUnderTest) -> None:
    on_node_2 = [p for p in running(cluster, "app=web", 4) or [] if p["spec"]["nodeName"] == "node-2"]
    assert on_node_2, "the test needs a pod on node-2"
    kubelet = LocalComponent(cluster.data_dir, "kubelet-node-2")
    pid = kubelet.pid()
    assert pid is not None
    launch.mark_stopped(kubelet.root / "pid")  # gone for good: `up` would bring back a plain kill
    os.killpg(pid, signal.SIGKILL)

    def node_2_not_ready() -> bool:
        node = json.loads(cluster.ok("get", "node", "node-2", "-o", "json"))
        return any(c["type"] == "Ready" and c["status"] != "True" for c in node["status"]["conditions"])

    until("node-2 NotReady", node_2_not_ready, wait=120.0)

    def all_on_node_1() -> bool:
        up = running(cluster, "app=web", 4)
        return up is not None and {p["spec"]["nodeName"] for p in up} == {"node-1"}

    until("every pod Running on node-1", all_on_node_1, wait=120.0)


def test_the_pods_outlive_down_and_up(cluster: ApiserverUnderTest) -> None:
    """The store keeps them; the kubelets find their containers stopped and start them again."""
    before = {p["metadata"]["name"] for p in until("4 pods Running", lambda: running(cluster, "app=web", 4))}
    data_dir = ["--data-dir", str(cluster.data_dir)]
    assert raftkube("down", *data_dir, timeout=120).returncode == 0
    config = cluster.data_dir.parent / "cluster.toml"
    up = raftkube("up", "--detach", "--kubelets", "2", "--config", str(config), *data_dir, timeout=120)
    assert up.returncode == 0, up.stderr

    def back() -> bool:
        again = running(cluster, "app=web", 4)
        return again is not None and all(p["status"]["containerStatuses"][0]["restartCount"] >= 1 for p in again)

    until("the same 4 pods Running again, each restarted", back)
    assert {p["metadata"]["name"] for p in running(cluster, "app=web", 4) or []} == before
    name = sorted(before)[0]
    assert cluster.ok("logs", name) == cluster.ok("logs", name, "--previous")  # the same command, run again


def test_down_leaves_no_process(cluster: ApiserverUnderTest) -> None:
    down = raftkube("down", "--data-dir", str(cluster.data_dir), timeout=120)
    assert down.returncode == 0, down.stderr

    def ours() -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    if str(cluster.data_dir).encode() in (proc / "cmdline").read_bytes() and alive(int(proc.name)):
                        found.append(int(proc.name))
                except OSError:
                    continue
        return found

    until("no process of the cluster left", lambda: not ours(), wait=30.0)
    containers = [
        int(orjson.loads(s.read_bytes())["pid"])
        for s in cluster.data_dir.glob("kubelet-*/root/containers/*/*/*/state.json")
    ]
    assert containers, "no container state found under the kubelets' roots"
    until("no container left", lambda: not any(alive(pid) for pid in containers), wait=30.0)


def _schedulable_nodes(cluster: ApiserverUnderTest) -> int:
    return sum(1 for n in json.loads(cluster.ok("get", "nodes", "-o", "json"))["items"] if schedulable(n))


def _store_leader_pid(cluster: ApiserverUnderTest) -> int:
    status = raftkube("status", "--data-dir", str(cluster.data_dir), "-o", "json")
    assert status.returncode == 0, status.stderr
    leader = next(r for r in json.loads(status.stdout) if r["role"] == "leader")
    return int(leader["pid"])
