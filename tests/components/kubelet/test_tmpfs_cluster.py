"""On the user's path: a pod with a `medium: Memory` emptyDir, bound to a kubelet (in-process,
against a real cluster), has its container see tmpfs at its mountPath (what the EmptyDir tmpfs
conformance specs check with statfs), sized to the pod's memory limit; deleting the pod takes
the mount off with the pod's directory.  Needs root (mounting); every wait bounded, every
container killed by pid and every mount taken off at the end."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

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
from tests.components.kubelet.test_tmpfs import mounts_at
from tests.support.wait import eventually

NODE = "kw-tmpfs"
POD = "/api/v1/namespaces/default/pods/tmpfs-pod"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_pods_memory_empty_dir_is_tmpfs_inside_and_goes_with_the_pod(
    cluster: ApiserverUnderTest, tmp_path: Path
) -> None:
    runtime = ProcessRuntime(tmp_path / "kubelet")
    mount = f"/tmp/raftkube-tmpfs-{tmp_path.name[-10:]}"

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{NODE}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            task = asyncio.create_task(Kubelet(node_client, NodeConfig(NODE, "127.0.0.1", 10250), runtime).run())
            try:
                pod = {
                    "metadata": {"name": "tmpfs-pod"},
                    "spec": {
                        "nodeName": NODE,
                        "terminationGracePeriodSeconds": 1,
                        "volumes": [{"name": "cache", "emptyDir": {"medium": "Memory"}}],
                        "containers": [
                            {
                                "name": "app",
                                "image": "busybox",
                                "command": ["sh", "-c", f"stat -f -c 'type=%T' {mount}; exec sleep 60"],
                                "resources": {"limits": {"memory": "16Mi"}},
                                "volumeMounts": [{"name": "cache", "mountPath": mount}],
                            }
                        ],
                    },
                }
                uid = (await admin.create("/api/v1/namespaces/default/pods", pod))["metadata"]["uid"]
                volume = runtime.root / "pods" / uid / "volumes" / "cache"

                async def said() -> Any:
                    run = runtime.seen(uid, "app")
                    if run is None or not run.log or not Path(run.log).exists():
                        return None
                    return [e.text for e in containerlog.read(Path(run.log))] or None

                assert await eventually(said, "the container to say its mount's type") == [b"type=tmpfs"]
                [(fstype, options)] = mounts_at(volume)
                assert fstype == "tmpfs" and "size=16384k" in options.split(",")  # the pod's memory limit
                await admin.delete(POD)

                async def gone() -> bool:
                    return not (runtime.root / "pods" / uid).exists() and await get_or_none(admin, POD) is None

                await eventually(gone, "the pod deleted and its directory removed")
                assert mounts_at(volume) == []
            finally:
                await stop_kubelet(task, runtime)
                tmpfs.unmount_under(runtime.root)
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{NODE}")

    asyncio.run(go())
