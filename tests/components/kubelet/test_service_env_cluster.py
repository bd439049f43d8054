"""A kubelet process against a real cluster gives a pod the `kubernetes` Service's variables (and
those of the other Services of its namespace, at their ClusterIP; its unset memory limit reads
as the node's allocatable), and they reach the API: a container prints them and connects to
KUBERNETES_SERVICE_HOST:PORT, and the kubelet's logs endpoint (through the apiserver, `kubectl
logs`) shows what it printed.  The `kubernetes` values are the apiserver's address and port (the
Service's endpoints): no service proxy runs (issue 26), see components/kubelet/envvars.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from apiserver.pki import ApiserverPKI, component_kubeconfig
from machinery.process.launch import free_ports
from machinery.quantity import parse_quantity
from tests.apiserver.support import ApiserverUnderTest
from tests.support.wait import until

NODE = "se-1"
POD = "se-pod"
NAMES = (
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "KUBERNETES_SERVICE_PORT_HTTPS",
    "KUBERNETES_PORT",
    "KUBERNETES_PORT_443_TCP",
    "KUBERNETES_PORT_443_TCP_PROTO",
    "KUBERNETES_PORT_443_TCP_PORT",
    "KUBERNETES_PORT_443_TCP_ADDR",
    "FOOSERVICE_SERVICE_HOST",
    "FOOSERVICE_SERVICE_PORT",
    "FOOSERVICE_PORT_8765_TCP_PORT",
    "MEM_LIMIT",
)
# prints each variable, then whether the API answers a TCP connection where they point
PRINT = f"""
import os, socket
for name in {NAMES!r}:
    print(name + "=" + os.environ.get(name, "<unset>"))
host, port = os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ["KUBERNETES_SERVICE_PORT"])
socket.create_connection((host, port), timeout=5).close()
print("reached", host, port)
"""


@pytest.fixture(scope="module")
def kubelet(cluster: ApiserverUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("service-env")
    creds = ApiserverPKI.of(cluster.data_dir)
    serving = creds.kubelet_serving(NODE, "127.0.0.1")
    [port] = free_ports(1)
    argv = [sys.executable, "-m", "components.cli", "kubelet"]
    argv += ["--kubeconfig", str(component_kubeconfig(cluster.data_dir, f"kubelet:{NODE}"))]
    argv += ["--node-name", NODE, "--root-dir", str(root / "kubelet"), "--port", str(port)]
    argv += ["--tls-cert-file", str(serving.cert), "--tls-private-key-file", str(serving.key)]
    argv += ["--client-ca-file", str(creds.ca)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        yield
    finally:
        cluster.kubectl("delete", "pod", POD, "--wait=false")
        until("the pod's deletion confirmed", lambda: cluster.kubectl("get", "pod", POD).returncode != 0, wait=30)
        proc.terminate()
        proc.communicate(timeout=15)
        cluster.kubectl("delete", "node", NODE)
        cluster.kubectl("delete", "service", "fooservice")


def test_a_pod_sees_the_kubernetes_service_and_reaches_it(cluster: ApiserverUnderTest, kubelet: None) -> None:
    api_port = urlsplit(cluster.url).port
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "fooservice"},
        # the ClusterIP given: this apiserver does not allocate one yet
        "spec": {"clusterIP": "10.96.87.65", "ports": [{"port": 8765, "targetPort": 8080}], "selector": {"n": "x"}},
    }
    cluster.ok("apply", "-f", "-", stdin=json.dumps(service))
    memory = until(
        "the node's allocatable posted",
        lambda: cluster.kubectl("get", "node", NODE, "-o", "jsonpath={.status.allocatable.memory}").stdout,
        wait=30,
    )
    limit = parse_quantity(memory).value
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "env",
                    "image": "python:3",
                    "command": ["python3", "-c", PRINT],  # the image's: /tmp is its own
                    "env": [{"name": "MEM_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}],
                }
            ],
        },
    }
    cluster.ok("apply", "-f", "-", stdin=json.dumps(pod))

    def finished() -> str:
        got = cluster.kubectl("get", "pod", POD, "-o", "jsonpath={.status.phase}")
        return got.stdout if got.stdout in ("Succeeded", "Failed") else ""

    until("the pod finished", finished, wait=60)
    logs = cluster.ok("logs", POD, "-c", "env")
    url = f"tcp://127.0.0.1:{api_port}"
    assert logs.splitlines() == [
        "KUBERNETES_SERVICE_HOST=127.0.0.1",
        f"KUBERNETES_SERVICE_PORT={api_port}",
        f"KUBERNETES_SERVICE_PORT_HTTPS={api_port}",
        f"KUBERNETES_PORT={url}",
        f"KUBERNETES_PORT_443_TCP={url}",
        "KUBERNETES_PORT_443_TCP_PROTO=tcp",
        f"KUBERNETES_PORT_443_TCP_PORT={api_port}",
        "KUBERNETES_PORT_443_TCP_ADDR=127.0.0.1",
        "FOOSERVICE_SERVICE_HOST=10.96.87.65",
        "FOOSERVICE_SERVICE_PORT=8765",
        "FOOSERVICE_PORT_8765_TCP_PORT=8765",
        f"MEM_LIMIT={limit}",
        f"reached 127.0.0.1 {api_port}",
    ]
    assert finished() == "Succeeded"
