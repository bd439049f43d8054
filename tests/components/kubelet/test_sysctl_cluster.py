"""On the user's path (conformance's "Sysctls should support sysctls"): a pod that sets the
safe sysctl kernel.shm_rmid_forced, bound to a kubelet (in-process, against a real cluster),
runs busybox's `/bin/sysctl` and sees its own value, in the pod's own IPC namespace, while the
node keeps its own; deleting the pod takes the namespace with the pod's directory.  Needs root
(namespaces); every wait bounded, every container killed by pid and every mount taken off."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from apiserver.pki import component_kubeconfig
from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.kubelet import containerlog, tmpfs
from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import NodeConfig
from components.kubelet.process_runtime import ProcessRuntime
from tests.apiserver.support import ApiserverUnderTest
from tests.components.kubelet.inprocess import get_or_none, stop_kubelet
from tests.support.wait import eventually

NODE = "kw-sysctl"
POD = "/api/v1/namespaces/default/pods/sysctl-pod"
NODE_VALUE = Path("/proc/sys/kernel/shm_rmid_forced")


@pytest.mark.skipif(os.geteuid() != 0, reason="a pod's IPC namespace needs root")
def test_a_pods_safe_sysctl_is_set_in_its_own_ipc_namespace(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    runtime = ProcessRuntime(tmp_path / "kubelet")
    before = NODE_VALUE.read_text()
    assert before.strip() == "0", "the test wants a node whose kernel.shm_rmid_forced is 0"

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{NODE}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            task = asyncio.create_task(Kubelet(node_client, NodeConfig(NODE, "127.0.0.1", 10250), runtime).run())
            try:
                pod = {
                    "metadata": {"name": "sysctl-pod"},
                    "spec": {
                        "nodeName": NODE,
                        "restartPolicy": "Never",
                        "securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
                        "containers": [
                            {
                                "name": "test-container",
                                "image": "busybox",
                                "command": ["/bin/sysctl", "kernel.shm_rmid_forced"],
                            }
                        ],
                    },
                }
                uid = (await admin.create("/api/v1/namespaces/default/pods", pod))["metadata"]["uid"]

                async def succeeded() -> bool:
                    return ((await admin.get(POD)).get("status") or {}).get("phase") == "Succeeded"

                await eventually(succeeded, "the pod to succeed")
                run = runtime.seen(uid, "test-container")
                assert run is not None and run.log
                assert [e.text for e in containerlog.read(Path(run.log))] == [b"kernel.shm_rmid_forced = 1"]
                assert NODE_VALUE.read_text() == before
                ipc_file = runtime.root / "pods" / uid / "ipc"
                assert os.path.ismount(ipc_file)
                await admin.delete(POD)

                async def gone() -> bool:
                    return not (runtime.root / "pods" / uid).exists() and await get_or_none(admin, POD) is None

                await eventually(gone, "the pod deleted and its directory removed")
                assert str(ipc_file) not in Path("/proc/self/mountinfo").read_text()
            finally:
                await stop_kubelet(task, runtime)
                tmpfs.unmount_under(runtime.root)
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{NODE}")

    asyncio.run(go())
