"""The kubelet in-process against a real cluster, as `system:node:<name>`: it registers its
Node (Ready) and Lease, runs a pod bound to it as real processes until the pod is Running and
Ready with its output in the CRI log, reports a ConfigMap's value through the environment, and
on deletion stops the containers and confirms the deletion; its status posts keep the Node's
resources that others added."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from apiserver.pki import component_kubeconfig
from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.kubelet import containerlog
from components.kubelet.containerlog import timestamp
from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import STATUS_PERIOD_S, NodeConfig
from components.kubelet.process_runtime import ProcessRuntime
from tests.apiserver.support import ApiserverUnderTest
from tests.components.kubelet.inprocess import get_or_none, stop_kubelet
from tests.support.wait import eventually

NODE = "kw-1"
WAIT_S = 30.0


def test_a_pod_bound_to_the_node_runs_and_is_deleted(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    runtime = ProcessRuntime(tmp_path / "kubelet")

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{NODE}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            kubelet = Kubelet(node_client, NodeConfig(NODE, "127.0.0.1", 10250), runtime)
            task = asyncio.create_task(kubelet.run())
            try:

                async def node_ready() -> bool:
                    with contextlib.suppress(NotFoundError):
                        node = await admin.get(f"/api/v1/nodes/{NODE}")
                        return any(
                            c["type"] == "Ready" and c["status"] == "True"
                            for c in node.get("status", {}).get("conditions") or ()
                        )
                    return False

                await eventually(node_ready, "the node registered and Ready")
                lease = await eventually(
                    lambda: get_or_none(
                        admin, f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{NODE}"
                    ),
                    "the node's Lease",
                )
                assert lease["spec"]["holderIdentity"] == NODE
                await admin.create(
                    "/api/v1/namespaces/default/configmaps",
                    {"metadata": {"name": "kw-settings"}, "data": {"GREETING": "hi"}},
                )
                pod = {
                    "metadata": {"name": "kw-pod"},
                    "spec": {
                        "nodeName": NODE,
                        "terminationGracePeriodSeconds": 2,
                        "containers": [
                            {
                                "name": "app",
                                "image": "busybox",
                                "command": ["sh", "-c", "echo $GREETING from $POD; exec sleep 60"],
                                "env": [
                                    {
                                        "name": "GREETING",
                                        "valueFrom": {"configMapKeyRef": {"name": "kw-settings", "key": "GREETING"}},
                                    },
                                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                ],
                            }
                        ],
                    },
                }
                await admin.create("/api/v1/namespaces/default/pods", pod)

                async def running_and_ready() -> Any:
                    got = await admin.get("/api/v1/namespaces/default/pods/kw-pod")
                    st = got.get("status") or {}
                    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or ())
                    return got if st.get("phase") == "Running" and ready else None

                got = await eventually(running_and_ready, "the pod Running and Ready")
                assert got["status"]["podIP"] == "127.0.0.1"
                [app] = got["status"]["containerStatuses"]
                assert app["ready"] and "running" in app["state"] and app["restartCount"] == 0
                uid = got["metadata"]["uid"]
                run = runtime.seen(uid, "app")
                assert run is not None and run.running

                async def logged() -> Any:
                    return [e.text for e in containerlog.read(Path(run.log))]

                assert await eventually(logged, "the container's output") == [b"hi from kw-pod"]
                state = runtime.root / "containers" / uid / "app" / "0" / "state.json"
                container_pid = int(orjson.loads(state.read_bytes())["pid"])
                await admin.delete("/api/v1/namespaces/default/pods/kw-pod")

                async def gone() -> bool:
                    return await get_or_none(admin, "/api/v1/namespaces/default/pods/kw-pod") is None

                await eventually(gone, "the kubelet to confirm the deletion")
                assert not Path(f"/proc/{container_pid}").exists()  # the process ended before the confirmation

                async def forgotten() -> bool:
                    return runtime.running_pods() == []

                # its runs and logs go once the kubelet's watch reports the pod gone, which may
                # come a moment after the confirmation this test saw (kube's housekeeping too)
                await eventually(forgotten, "the kubelet to remove the pod's runs and logs")
            finally:
                await stop_kubelet(task, runtime)
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{NODE}")

    asyncio.run(go())


def test_images_run_through_the_table_or_back_off_their_pull(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    """The pause image runs (Running, Ready) with kube's image and imageID; an image the table
    does not know, with no command, waits in ErrImagePull, then ImagePullBackOff."""
    node = "kw-img"
    runtime = ProcessRuntime(tmp_path / "kubelet")
    pods = "/api/v1/namespaces/default/pods"

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{node}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            task = asyncio.create_task(Kubelet(node_client, NodeConfig(node, "127.0.0.1", 10250), runtime).run())
            try:
                for name, image in (("kw-pause", "registry.k8s.io/pause:3.10"), ("kw-nopull", "example.com/nope:1")):
                    spec = {"nodeName": node, "terminationGracePeriodSeconds": 2}
                    spec["containers"] = [{"name": "c", "image": image}]
                    await admin.create(pods, {"metadata": {"name": name}, "spec": spec})

                async def status_of(name: str) -> Any:
                    return ((await admin.get(f"{pods}/{name}")).get("status") or {}).get("containerStatuses")

                async def pause_ready() -> Any:
                    got = await status_of("kw-pause")
                    return got if got and got[0]["ready"] and "running" in got[0]["state"] else None

                [pause] = await eventually(pause_ready, "the pause container Running and Ready")
                assert pause["image"] == "registry.k8s.io/pause:3.10"
                assert pause["imageID"].startswith("registry.k8s.io/pause@sha256:")
                got = await admin.get(f"{pods}/kw-pause")
                assert got["status"]["phase"] == "Running"
                seen: list[str] = []

                async def backed_off() -> bool:
                    got = await status_of("kw-nopull")
                    waiting = (got[0]["state"].get("waiting") or {}) if got else {}
                    if waiting.get("reason") and waiting["reason"] not in seen:
                        seen.append(waiting["reason"])
                        assert "kubelets.images" in waiting["message"], waiting
                    return "ImagePullBackOff" in seen

                await eventually(backed_off, "the unknown image in ImagePullBackOff")
                assert seen[:2] == ["ErrImagePull", "ImagePullBackOff"] or seen == ["ImagePullBackOff"], seen
                assert (await admin.get(f"{pods}/kw-nopull"))["status"]["phase"] == "Pending"
            finally:
                await stop_kubelet(task, runtime)
                for name in ("kw-pause", "kw-nopull"):
                    with contextlib.suppress(NotFoundError):
                        await admin.delete(f"{pods}/{name}", params={"gracePeriodSeconds": "0"})
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{node}")

    asyncio.run(go())


def start_kubelet(cluster: ApiserverUnderTest, node: str, root: Path) -> subprocess.Popen[bytes]:
    kubeconfig_path = component_kubeconfig(cluster.data_dir, f"kubelet:{node}")
    argv = [sys.executable, "-m", "components.cli", "kubelet", "--kubeconfig", str(kubeconfig_path)]
    argv += ["--node-name", node, "--root-dir", str(root)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def test_a_restarted_kubelet_process_adopts_its_running_pod(
    cluster: ApiserverUnderTest, tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    node, root = "kw-2", tmp_path / "kubelet"

    async def pod_status(admin: RestClient) -> Any:
        got = await get_or_none(admin, "/api/v1/namespaces/default/pods/kw-adopt")
        return (got or {}).get("status") or {}

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            processes.append(start_kubelet(cluster, node, root))
            pod = {
                "metadata": {"name": "kw-adopt"},
                "spec": {
                    "nodeName": node,
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "60"]}],
                },
            }
            await admin.create("/api/v1/namespaces/default/pods", pod)

            async def running() -> Any:
                st = await pod_status(admin)
                return st if st.get("phase") == "Running" else None

            first = await eventually(running, "the pod Running under the first kubelet")
            started = first["containerStatuses"][0]["state"]["running"]["startedAt"]
            processes[0].send_signal(signal.SIGTERM)
            _, err = await asyncio.to_thread(processes[0].communicate, None, 15)
            assert processes[0].returncode == 0, err.decode()
            processes.append(start_kubelet(cluster, node, root))
            await asyncio.sleep(3.0)  # a few syncs of the new kubelet
            again = await pod_status(admin)
            app = again["containerStatuses"][0]
            assert again["phase"] == "Running" and app["restartCount"] == 0
            assert app["state"]["running"]["startedAt"] == started  # the same process, adopted
            await admin.delete("/api/v1/namespaces/default/pods/kw-adopt")
            await eventually(
                lambda: _absent(admin, "/api/v1/namespaces/default/pods/kw-adopt"), "the deletion confirmed"
            )
            with contextlib.suppress(NotFoundError):
                await admin.delete(f"/api/v1/nodes/{node}")

    asyncio.run(go())


async def _absent(client: RestClient, path: str) -> bool:
    return await get_or_none(client, path) is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--node-name", "Bad_Name", "--root-dir", "/tmp/x"], "--node-name: 'Bad_Name' is not a valid node name"),
        (["--node-name", "n", "--root-dir", "/tmp/x", "--capacity", "cpu"], "--capacity: expected name=quantity"),
        (["--node-name", "n", "--root-dir", "/tmp/x", "--system-reserved", "gpu=1"], "reserved.gpu: not a resource"),
        (["--node-name", "n", "--root-dir", "/tmp/x", "--port", "0"], "--port must be from 1 to 65535"),
        (["--node-name", "n", "--root-dir", "/tmp/x", "--images", "[{"], "--images: not JSON"),
        (["--node-name", "n", "--root-dir", "/tmp/x", "--images", '[{"image": "x"}]'], "--images[0] runs nothing"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "components.cli", "kubelet", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_node_status_posts_keep_resources_the_kubelet_does_not_own(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    """An extended resource someone else adds to the Node's capacity and allocatable (a device
    plugin's, or kube's e2e framework's strategic merge patch) outlives the kubelet's periodic
    status post and a restarted kubelet's registration: the kubelet patches only what it owns,
    as kube's kubelet keeps capacity it did not set."""
    node, fake = "kw-ext", "example.com/fakecpu"
    now = [1_000_000.0]

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{node}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            config = NodeConfig(node, "127.0.0.1", 10250)
            try:
                await Kubelet(node_client, config, ProcessRuntime(tmp_path / "a"), lambda: now[0]).register()
                extended = {"status": {"capacity": {fake: "1k"}, "allocatable": {fake: "1k"}}}
                await admin.patch(f"/api/v1/nodes/{node}/status", extended, "strategic")
                kubelet = Kubelet(node_client, config, ProcessRuntime(tmp_path / "b"), lambda: now[0])
                await kubelet.register()  # as after a restart: the whole status posted again
                now[0] += STATUS_PERIOD_S
                await kubelet.node_status_once()  # the periodic post
                status = (await admin.get(f"/api/v1/nodes/{node}"))["status"]
                ready = next(c for c in status["conditions"] if c["type"] == "Ready")
                assert ready["lastHeartbeatTime"] == timestamp(int(now[0] * 1e9))  # the post happened
                for held in (status["capacity"], status["allocatable"]):
                    assert held[fake] == "1k" and held["cpu"] == "4"
            finally:
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{node}")

    asyncio.run(go())


def test_a_pod_kept_by_a_finalizer_shows_how_it_ended(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    """Kube's status manager writes a deleted pod's final status before it deletes: a pod that
    a finalizer keeps (the garbage collector's foregroundDeletion, a job's tracking) shows its
    containers terminated, not running for good (conformance's "Garbage collector should not
    be blocked by dependency circle" saw them so)."""
    runtime = ProcessRuntime(tmp_path / "kubelet")
    node = "kw-final"
    path = "/api/v1/namespaces/default/pods/kw-kept"

    async def go() -> None:
        node_config = kubeconfig.load(component_kubeconfig(cluster.data_dir, f"kubelet:{node}"))
        async with RestClient(node_config) as node_client, RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            task = asyncio.create_task(Kubelet(node_client, NodeConfig(node, "127.0.0.1", 10250), runtime).run())
            try:
                pod = {
                    "metadata": {"name": "kw-kept", "finalizers": ["example.com/keep"]},
                    "spec": {
                        "nodeName": node,
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "app", "image": "busybox", "command": ["sleep", "60"]}],
                    },
                }
                await admin.create("/api/v1/namespaces/default/pods", pod)

                async def running() -> Any:
                    got = await get_or_none(admin, path)
                    return got if (got or {}).get("status", {}).get("phase") == "Running" else None

                await eventually(running, "the pod Running")
                await admin.delete(path)

                async def ended() -> Any:
                    got = await get_or_none(admin, path)
                    [app] = (got or {}).get("status", {}).get("containerStatuses") or [{}]
                    return got if "terminated" in (app.get("state") or {}) else None

                got = await eventually(ended, "the kept pod's container shown terminated")
                assert got["metadata"]["deletionTimestamp"] and got["metadata"]["finalizers"] == ["example.com/keep"]
                assert got["status"]["phase"] in ("Failed", "Succeeded")
            finally:
                with contextlib.suppress(NotFoundError):
                    await admin.patch(path, {"metadata": {"finalizers": None}})
                await stop_kubelet(task, runtime)
                with contextlib.suppress(NotFoundError):
                    await admin.delete(f"/api/v1/nodes/{node}")

    asyncio.run(go())
