"""`raftkube up --apiserver upstream` against the real peers: our controller-manager, scheduler
and a kubelet on kube-apiserver 1.33 over etcd 3.6 run a Deployment to its replicas, and
`raftkube down` leaves no process.  `peers` marker: `.ci/run -m peers` after `raftkube peers build`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bench.peers.upstream import PeerUnavailable, check_peers
from tests.apiserver.support import kubectl_binary
from tests.bench.peers.test_upstream_launch import processes_mentioning
from tests.support.cli import raftkube

pytestmark = pytest.mark.peers


def test_a_deployment_converges_on_kube_apiserver(tmp_path: Path) -> None:
    try:
        check_peers()
    except PeerUnavailable as e:
        pytest.fail(str(e))
    data = tmp_path / "data"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    up = raftkube(
        "up", "--apiserver", "upstream", "--detach", "--free-ports", "--kubelets", "1", "--data-dir", str(data),
        timeout=400, env=env,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        kubectl = [str(kubectl_binary(33)), "--kubeconfig", str(data / "kubeconfig")]

        def run(*args: str) -> str:
            p = subprocess.run([*kubectl, *args], capture_output=True, text=True, timeout=60, check=False)
            assert p.returncode == 0, f"kubectl {' '.join(args)}: {p.stderr}"
            return p.stdout

        run("create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=2")
        deadline = time.monotonic() + 120
        status: dict[str, object] = {}
        while time.monotonic() < deadline:
            status = json.loads(run("get", "deployment", "web", "-o", "json")).get("status", {})
            if status.get("readyReplicas") == 2 and status.get("updatedReplicas") == 2:
                break
            time.sleep(1)
        else:
            pods = run("get", "pods", "-o", "wide")
            events = run("get", "events", "-A")
            pytest.fail(f"not converged within 120s: {status}\n{pods}\n{events}")
        nodes = json.loads(run("get", "nodes", "-o", "json"))["items"]
        assert [n["metadata"]["name"] for n in nodes] == ["node-1"]
    finally:
        down = raftkube("down", "--data-dir", str(data), timeout=120, env=env)
        assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 15
    while processes_mentioning(str(data)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(data)) == []
