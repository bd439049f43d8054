"""The upstream kube-apiserver 1.33 on raftkube's store, through the etcd API its members serve
(`raftkube up --apiserver upstream --storage raftkube`): it starts and serves, our
controller-manager, scheduler and a kubelet run a Deployment to its replicas on it, its
consistent LISTs are served from its watch cache (which needs etcd's RequestProgress), and a
store leader killed under a load of creates loses no acknowledged object.
`peers` marker: `.ci/run -m peers` after `raftkube peers build`."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest

from apiserver.launcher import LocalApiserver
from bench.peers.upstream import PeerUnavailable, check_peers
from store.launcher import LocalCluster
from tests.apiserver.support import kubectl_binary
from tests.bench.peers.test_upstream_launch import processes_mentioning
from tests.support.cli import raftkube
from tests.support.wait import until

pytestmark = pytest.mark.peers

LOAD_S = 12.0
COLLECTION = "/api/v1/namespaces/default/configmaps"
WRITERS = 4


def _create_configmaps(
    host: str, port: int, tls: ssl.SSLContext, prefix: str, stop: threading.Event, acked: list[str], errors: list[str]
) -> None:
    """POST ConfigMaps one after another until `stop`; the names kube-apiserver acknowledged
    (201) go to `acked`, anything else to `errors` (a write during the election may fail)."""
    n = 0
    conn: http.client.HTTPSConnection | None = None
    try:
        while not stop.is_set() and n < 100_000:
            n += 1
            name = f"{prefix}-{n}"
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "1"}})
            try:
                conn = conn or http.client.HTTPSConnection(host, port, timeout=30, context=tls)
                conn.request(
                    "POST", "/api/v1/namespaces/default/configmaps", body, {"Content-Type": "application/json"}
                )
                r = conn.getresponse()
                r.read()
                if r.status == 201:
                    acked.append(name)
                else:
                    errors.append(f"{name}: HTTP {r.status}")
            except (OSError, http.client.HTTPException) as e:
                errors.append(f"{name}: {e}")
                if conn is not None:
                    conn.close()
                conn = None
    finally:
        if conn is not None:
            conn.close()


def test_kube_apiserver_runs_on_the_raftkube_store(tmp_path: Path) -> None:
    try:
        check_peers(("kube-apiserver",))
    except PeerUnavailable as e:
        pytest.fail(str(e))
    data = tmp_path / "data"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    up = raftkube(
        "up", "--apiserver", "upstream", "--storage", "raftkube", "--detach", "--free-ports", "--kubelets", "1",
        "--pod-network", "host",
        "--data-dir", str(data), timeout=400, env=env,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert not (data / "etcd").exists()  # no etcd anywhere: the store is ours
        kubectl = [str(kubectl_binary(33)), "--kubeconfig", str(data / "kubeconfig")]

        def run(*args: str) -> str:
            p = subprocess.run([*kubectl, *args], capture_output=True, text=True, timeout=60, check=False)
            assert p.returncode == 0, f"kubectl {' '.join(args)}: {p.stderr}"
            return p.stdout

        run("create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=2")

        def converged() -> bool:
            status = json.loads(run("get", "deployment", "web", "-o", "json")).get("status", {})
            return status.get("readyReplicas") == 2 and status.get("updatedReplicas") == 2

        until("the Deployment's 2 replicas ready on kube-apiserver over raftkube", converged, wait=120.0, step=1.0)

        # consistent LISTs from the watch cache: kube-apiserver asks the store for progress
        # (RequestProgress) and waits for its cache to reach the store's revision
        for _ in range(3):
            run("get", "configmaps", "-A")
        metrics = run("get", "--raw", "/metrics")
        counter = r"^apiserver_watch_cache_consistent_read_total"
        labels = r'\{fallback="(\w+)",resource="/configmaps",success="(\w+)"\} (\d+)'
        served = re.findall(counter + labels, metrics, re.M)
        assert ("false", "true") in {(f, s) for f, s, n in served if int(n) > 0}, served
        assert not [x for x in served if x[1] == "false" and int(x[2]) > 0], served
        assert 'kubernetes_feature_enabled{name="ConsistentListFromCache",stage="BETA"} 1' in metrics

        # the store's leader killed while creates go on: nothing acknowledged is lost
        apiserver = LocalApiserver(data)
        endpoint = apiserver.recorded()
        assert endpoint is not None
        stop = threading.Event()
        acked: list[list[str]] = [[] for _ in range(WRITERS)]
        errors: list[list[str]] = [[] for _ in range(WRITERS)]
        writers = [
            threading.Thread(
                target=_create_configmaps,
                args=(endpoint.dial_host, endpoint.port, apiserver.admin_tls(), f"load-{i}", stop, acked[i], errors[i]),
                daemon=True,
            )
            for i in range(WRITERS)
        ]
        for w in writers:
            w.start()
        time.sleep(LOAD_S / 3)
        # a crash, not a stop through the CLI (which the supervisor would leave down on purpose)
        status = raftkube("store", "status", "--data-dir", str(data), "-o", "json", env=env)
        leader = next(r["id"] for r in json.loads(status.stdout) if r["role"] == "leader")
        pid = LocalCluster(data).pid(leader)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        time.sleep(2 * LOAD_S / 3)
        stop.set()
        for w in writers:
            w.join(timeout=60)
        written = [name for names in acked for name in names]
        assert len(written) > 50, (len(written), [e[:3] for e in errors])

        def members_back() -> bool:  # the supervisor restarts the killed member
            return all(LocalCluster(data).pid(m) is not None for m in LocalCluster(data).member_ids())

        until("the killed member restarted by up's supervisor", members_back, wait=60.0, step=0.5)
        listed = json.loads(run("get", "configmaps", "-o", "json"))["items"]
        present = {item["metadata"]["name"] for item in listed}
        lost = sorted(set(written) - present)
        assert lost == [], f"{len(lost)} acknowledged ConfigMaps lost, e.g. {lost[:5]}"
    finally:
        down = raftkube("down", "--data-dir", str(data), timeout=120, env=env)
        assert down.returncode == 0, down.stdout + down.stderr
    deadline = time.monotonic() + 15
    while processes_mentioning(str(data)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_mentioning(str(data)) == []
