"""The upstream control plane launcher against the real peers: kube-apiserver 1.33 on etcd 3.6
answers /readyz, kubectl 1.33 lists namespaces with the admin kubeconfig, and stopping leaves
no process behind.  `peers` marker: `.ci/run -m peers` after `raftkube peers build`."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from bench.peers.upstream import PeerUnavailable, UpstreamControlPlane, check_peers
from tests.apiserver.support import kubectl_binary

pytestmark = pytest.mark.peers


def require_peers() -> None:
    try:
        check_peers()
    except PeerUnavailable as e:
        pytest.fail(str(e))  # names `raftkube peers build --only ...`


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line holds `text` (our data dir): what would be left behind."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def running(pid: int) -> bool:
    """Alive and not a zombie (exited, its status not yet collected)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kube_apiserver_on_etcd_serves_kubectl_and_stops_clean(tmp_path: Path) -> None:
    require_peers()
    plane = UpstreamControlPlane(tmp_path)
    try:
        endpoint = plane.start(timeout=120)
        pids = plane.pids()
        assert all(pids.values()), pids
        assert plane.apiserver.probe(endpoint, "/readyz")[0] == 200
        version = plane.apiserver.get_json(endpoint, "/version")
        assert version["gitVersion"] == "v1.33.13"
        kubeconfig = plane.apiserver.write_kubeconfig(endpoint)
        out = subprocess.run(
            [str(kubectl_binary(33)), "--kubeconfig", str(kubeconfig), "get", "ns", "-o", "name"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "namespace/kube-system" in out.stdout.split()
        # kube's Node authorizer judges our node identities: a kubelet may not read another node's secrets
        can = subprocess.run(
            [str(kubectl_binary(33)), "--kubeconfig", str(kubeconfig), "auth", "can-i", "list", "secrets",
             "--as", "system:node:node-1", "--as-group", "system:nodes", "-A"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert can.stdout.split()[0] == "no", can.stdout + can.stderr  # "no - can only read namespaced ..."
    finally:
        stopped = plane.stop()
    assert stopped == ["kube-apiserver", "etcd"]
    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp_path)) == []
    for pid in pids.values():
        assert pid is not None and not running(pid)
