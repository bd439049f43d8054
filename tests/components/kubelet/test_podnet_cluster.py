"""`raftkube kubelet --pod-network netns` as a process against a real cluster (root only): a pod
gets a podIP of the node's CIDR, an httpGet readiness probe reaches the server in the pod at
that IP and makes the pod Ready, kubectl port-forward reaches it there, and deleting the pod
removes its namespace.  What the test made is removed by pid and by stop_all, even when it
fails."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from apiserver.pki import ApiserverPKI, component_kubeconfig
from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.kubelet import podnet
from components.kubelet.process_runtime import ProcessRuntime
from machinery.process.launch import free_ports
from tests.apiserver.kubectl_support import kubectl_running
from tests.apiserver.support import ApiserverUnderTest
from tests.components.kubelet.inprocess import get_or_none
from tests.components.kubelet.test_kubelet_cluster import _absent, eventually
from tests.components.kubelet.test_podnet import SERVER, free_cidr

# network namespaces need root and iproute2: where they are missing these tests fail, loudly


def test_a_pod_on_a_netns_kubelet_has_its_own_ip_and_is_probed_there(
    cluster: ApiserverUnderTest, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    node, root, cidr = f"pn-{uuid.uuid4().hex[:8]}", tmp_path / "kubelet", free_cidr()
    argv = [sys.executable, "-m", "components.cli", "kubelet", "--node-name", node, "--root-dir", str(root)]
    argv += ["--kubeconfig", str(component_kubeconfig(cluster.data_dir, f"kubelet:{node}"))]
    argv += ["--pod-network", "netns", "--pod-cidr", cidr]
    creds = ApiserverPKI.of(cluster.data_dir)
    serving = creds.kubelet_serving(node, "127.0.0.1")
    kubelet_port, local = free_ports(2)
    argv += ["--port", str(kubelet_port), "--tls-cert-file", str(serving.cert)]
    argv += ["--tls-private-key-file", str(serving.key), "--client-ca-file", str(creds.ca)]
    pod = {
        "metadata": {"name": "pn-pod"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "web",
                    "image": "python",
                    "command": ["python3", "-c", SERVER],  # the image's: /tmp is its own
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                }
            ],
        },
    }

    async def go(admin: RestClient) -> None:
        processes.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True))
        await admin.create("/api/v1/namespaces/default/pods", pod)

        async def ready() -> Any:
            got = await get_or_none(admin, "/api/v1/namespaces/default/pods/pn-pod")
            st = (got or {}).get("status") or {}
            conditions = st.get("conditions") or ()
            return st if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

        # the server listens in the pod's namespace only: the probe can succeed at the pod's IP alone
        status = await eventually(ready, "the pod Ready by its httpGet probe at the pod's IP")
        assert ipaddress.IPv4Address(status["podIP"]) in ipaddress.IPv4Network(cidr)
        assert status["podIP"] != status["hostIP"] == "127.0.0.1"
        assert status["podIPs"] == [{"ip": status["podIP"]}]
        [netns] = podnet.NETNS_DIR.glob(podnet.netns_prefix(node) + "*")
        # kubectl port-forward reaches the server, which listens in the pod's namespace only
        with kubectl_running(cluster, "port-forward", "pod/pn-pod", f"{local}:8080", minor=33) as reader:
            reader.wait_for(f"Forwarding from 127.0.0.1:{local}")
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10) as answer:
                assert answer.status == 200
        await admin.delete("/api/v1/namespaces/default/pods/pn-pod")
        await eventually(lambda: _absent(admin, "/api/v1/namespaces/default/pods/pn-pod"), "the deletion confirmed")

        async def netns_gone() -> bool:
            return not netns.exists()

        await eventually(netns_gone, "the pod's namespace removed")

    async def main() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            try:
                await go(admin)
            finally:
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{node}")

    try:
        asyncio.run(main())
    finally:
        for p in processes:  # the kubelet first, then what it left: containers, namespaces, bridge
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
        ProcessRuntime(root).stop_all(grace_s=0.0, timeout_s=10.0)
