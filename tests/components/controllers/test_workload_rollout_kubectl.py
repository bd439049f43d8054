"""`kubectl rollout status|history|undo|restart` on a DaemonSet and a StatefulSet, with our
controllers running against the apiserver process (kubectl 1.31 and 1.33).  kubectl reads
rollout status from the workload's status fields and history from its ControllerRevisions,
and undoes by patching the template back from a revision: each works only if the controllers
keep those as kube's do."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import pytest

from components.controllers.daemonset import DaemonSetController
from components.controllers.runner import running
from components.controllers.statefulset import StatefulSetController
from tests.apiserver.support import ApiserverUnderTest, kubectl_binary
from tests.components.controllers.test_replicaset_support import api, kubelet, make_namespace


def workload(kind: str, name: str) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}},
    }
    if kind == "StatefulSet":
        spec.update(replicas=2, serviceName=name)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("minor", [31, 33])
@pytest.mark.parametrize("kind", ["DaemonSet", "StatefulSet"])
def test_kubectl_rollout_on_daemonsets_and_statefulsets(cluster: ApiserverUnderTest, kind: str, minor: int) -> None:
    ns = f"rollout-{kind.lower()}-{minor}"
    name = "app"
    resource = f"{kind.lower()}/{name}"

    def kubectl(*args: str, timeout: float = 60) -> str:
        argv = [str(kubectl_binary(minor)), "--kubeconfig", str(cluster.kubeconfig), "-n", ns, *args]
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def image() -> str:
        found = json.loads(kubectl("get", resource, "-o", "json"))
        return str(found["spec"]["template"]["spec"]["containers"][0]["image"])

    async def go() -> None:
        async with api(cluster) as client:
            await make_namespace(client, ns)
            node = f"node-{kind.lower()}-{minor}"
            await client.create("/api/v1/nodes", {"metadata": {"name": node}})
            await client.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": None}})
            async with running(client, [DaemonSetController, StatefulSetController]), kubelet(client, ns):
                await client.create(f"/apis/apps/v1/namespaces/{ns}/{kind.lower()}s", workload(kind, name))

                def script() -> None:
                    status = "--timeout=60s"
                    kubectl("rollout", "status", resource, status, timeout=90)
                    kubectl("set", "image", resource, "c=busybox:1.37")
                    kubectl("rollout", "status", resource, status, timeout=90)
                    history = kubectl("rollout", "history", resource)
                    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
                    kubectl("rollout", "undo", resource)
                    kubectl("rollout", "status", resource, status, timeout=90)
                    assert image() == "busybox:1.36"
                    kubectl("rollout", "restart", resource)
                    kubectl("rollout", "status", resource, status, timeout=90)
                    found = json.loads(kubectl("get", resource, "-o", "json"))
                    annotations = found["spec"]["template"]["metadata"].get("annotations") or {}
                    assert "kubectl.kubernetes.io/restartedAt" in annotations

                await asyncio.to_thread(script)
            await client.delete(f"/api/v1/nodes/{node}")

    asyncio.run(go())
