"""The kubelet: one node's agent, talking to the apiserver as `system:node:<name>`.

It registers its Node, renews its Lease in `kube-node-lease` every 10 s, posts node status on
change or every minute, and watches only the pods bound to it (`spec.nodeName=<name>`).  A
sync loop gives each pod a `PodWorker` step (at least every second, at once on a pod event),
runs the probes that are due, reads what a pod's env and volumes need (podsources.py), patches
`pods/status` when it changed, and confirms a deleted pod's deletion (DELETE with grace 0)
once its containers have stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from components.client.events import NORMAL, WARNING, EventRecorder, ObjectRef, reference
from components.client.indexer import NAMESPACE_INDEX
from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    NotFoundError,
    RestClient,
    TransportError,
    path_of,
)
from components.kubelet import nodestatus, podipc, podworker, prober, released_volumes, tmpfs
from components.kubelet.containerlog import timestamp
from components.kubelet.envvars import build
from components.kubelet.hooks import HookRun
from components.kubelet.hostports import HostPorts
from components.kubelet.images import HostImages
from components.kubelet.podipc import PodIpcError
from components.kubelet.podnet import PodNetError, PodNetwork
from components.kubelet.podsources import PodSources, ServiceLister
from components.kubelet.podvolumes import PodVolumes
from components.kubelet.podworker import PodWorker
from components.kubelet.resolv import ClusterDNS
from machinery import local_volumes
from machinery.clock import wait_event
from machinery.host_ports import NO_FREE_PORTS, collides, first_collision, host_ports
from machinery.objects import Obj

log = logging.getLogger("raftkube.kubelet")
PODS = Resource("", "v1", "pods", True, "Pod")
SERVICES = Resource("", "v1", "services", True, "Service")
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40
SYNC_PERIOD_S = 1.0
RELEASED_VOLUMES_PERIOD_S = 10.0  # how soon a deleted local volume's directory goes


NODE_PORTS = "NodePorts"


def micro_time(now: float) -> str:
    """metav1.MicroTime, as Lease renewTime carries it."""
    stamp = timestamp(int(now * 1e9))
    return stamp[:26] + "Z"


def _handler_env(worker: PodWorker, container: Obj) -> dict[str, str]:
    """The environment a probe's or a hook's exec runs with: the container's own (empty when it
    cannot be built; the container then never started either)."""
    try:
        env = build(worker.downward_view(), container, worker.sources).values
    except Exception:
        env = {}
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", **env}


class Runtime(podworker.Runtime, Protocol):
    def remove_pod(self, uid: str, namespace: str, pod: str) -> None: ...

    def running_pods(self) -> list[str]: ...


class Kubelet:
    """One node.  `bound`: the pods bound to it, when another informer already has them (hollow
    nodes share one); otherwise the kubelet watches `spec.nodeName=<name>` itself.  `services`:
    a namespace's Services, likewise (otherwise the kubelet watches every Service, as kube's).  `network`:
    the pod network that gives each pod a namespace and IP of its own (None: the host's)."""

    def __init__(
        self,
        client: RestClient,
        config: nodestatus.NodeConfig,
        runtime: Runtime,
        clock: Callable[[], float] = time.time,
        *,
        bound: Callable[[], list[Obj]] | None = None,
        sync_period: float = SYNC_PERIOD_S,
        network: PodNetwork | None = None,
        images: HostImages | None = None,
        services: ServiceLister | None = None,
        private_tmp: bool = True,
        dns: ClusterDNS | None = None,
    ) -> None:
        self.client = client
        self.dns = dns  # --cluster-dns and --cluster-domain: pods' resolv.conf (resolv.py)
        self.private_tmp = private_tmp  # each container run its own /tmp (container_tmp.py)
        self.images = images or HostImages()  # what a container's image runs (the shipped table)
        self.network = network
        # host ports forwarded into pods' namespaces (hostports.py); none on the host's network,
        # where a pod's port already is the node's
        self.host_ports = HostPorts(config.name, config.address, network.bridge) if network is not None else None
        self.config = config
        self.runtime = runtime
        self.sources = PodSources(client)
        # a cluster DNS server is given where a service proxy runs too (`up` on the pod network):
        # pods then reach ClusterIPs, the `kubernetes` Service's included
        self.sources.proxied = dns is not None
        self._own_services = services is None  # watch them in run(); else another informer has them
        if services is not None:
            self.sources.services = services
        self.clock = clock
        self.bound = bound
        self.sync_period = sync_period
        self._lease: Obj | None = None  # as last written: renewed with one PUT
        self._hook_tasks: set[asyncio.Task[None]] = set()
        self.factory = InformerFactory(client)
        self.workers: dict[str, PodWorker] = {}
        self._posted: dict[str, Obj] = {}  # pod uid -> the status last posted
        # pods this kubelet refused to run (kube's admission: a host port another pod holds);
        # a refused pod is Failed for good and never gets a worker
        self._rejected: set[str] = set()
        self._node_status: Obj | None = None
        self._node_posted_at = 0.0
        self._wake = asyncio.Event()
        self.events = EventRecorder(client, "kubelet", config.name, host=config.name)

    # -- the node -------------------------------------------------------------------------------

    async def register(self) -> None:
        node = nodestatus.register(self.config, nodestatus.Observed(), timestamp(int(self.clock() * 1e9)))
        name = self.config.name
        if self._has_files():  # where this node keeps local volumes (machinery/local_volumes.py)
            directory = str(self._volume_dir())
            node["metadata"]["annotations"] = {local_volumes.VOLUME_DIR_ANNOTATION: directory}
        try:
            await self.client.create("/api/v1/nodes", {k: v for k, v in node.items() if k != "status"})
        except AlreadyExistsError:
            meta = {k: node["metadata"][k] for k in ("labels", "annotations") if k in node["metadata"]}
            await self.client.patch(f"/api/v1/nodes/{name}", {"metadata": meta})
        await self._post_node_status(node["status"])
        # kube's node reference carries the node's name as its uid
        self.events.record(ObjectRef("v1", "Node", "", name, name), NORMAL, "Starting", "Starting kubelet.")

    async def _post_node_status(self, status: Obj) -> None:
        await self.client.patch(f"/api/v1/nodes/{self.config.name}/status", {"status": status})
        self._node_status = status
        self._node_posted_at = self.clock()

    async def node_status_once(self) -> None:
        held = (self._node_status or {}).get("conditions") or []
        now = self.clock()
        status = dict(self._node_status or {})
        status["conditions"] = nodestatus.merge_conditions(held, nodestatus.Observed(), timestamp(int(now * 1e9)))
        if nodestatus.needs_post(self._node_status, status, now - self._node_posted_at):
            await self._post_node_status(status)

    async def renew_lease_once(self) -> None:
        name, now = self.config.name, self.clock()
        path = path_of("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE, name)
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_S, "renewTime": micro_time(now)}
        lease = self._lease
        if lease is not None:
            try:
                self._lease = await self.client.replace(path, {**lease, "spec": {**(lease.get("spec") or {}), **spec}})
                return
            except (ConflictError, NotFoundError):
                self._lease = None  # changed or gone under us: read it again
        try:
            lease = await self.client.get(path)
        except NotFoundError:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name}, "spec": spec}
            self._lease = await self.client.create(
                path_of("coordination.k8s.io", "v1", "leases", LEASE_NAMESPACE), body
            )
            return
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        self._lease = await self.client.replace(path, lease)

    # -- pods -----------------------------------------------------------------------------------

    def _volume_dir(self) -> Path:
        """Where this node keeps local volumes: absolute, since the controller writes it into
        volumes the kubelet later mounts from any working directory (`raftkube up` runs with a
        relative data dir by default)."""
        return Path(self.runtime.root).resolve() / local_volumes.VOLUME_DIR_NAME  # type: ignore[attr-defined]

    async def remove_released_volumes_once(self) -> None:
        """The directories of this node's deleted local volumes removed (released_volumes.py)."""
        for name in await released_volumes.remove_released_once(self.client, self.config.name, self._volume_dir()):
            log.info("kubelet %s: removed the directory of deleted volume %s", self.config.name, name)

    def _has_files(self) -> bool:
        """Whether this runtime's containers have files (volumes, tokens); fake ones do not."""
        return getattr(self.runtime, "root", None) is not None and not getattr(self.runtime, "simulated", False)

    async def sync_pod(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        uid, ns, name = str(meta.get("uid") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")
        now = self.clock()
        if uid in self._rejected or (uid not in self.workers and await self._rejects(pod)):
            if meta.get("deletionTimestamp"):
                await self._delete_now(ns, name, uid)
            return
        sources = await self.sources.read(pod, tokens=self._has_files(), allocatable=self._allocatable())
        worker = self.workers.get(uid)
        if worker is None:
            volumes = self._volumes_of(uid)
            worker = PodWorker(
                pod,
                self.runtime,
                sources,
                self.config.address,
                volumes=volumes,
                images=self.images,
                private_tmp=self.private_tmp,
                dns=self.dns,
            )
            self.workers[uid] = worker
        if (worker.netns is None and self._needs_network(pod)) or (worker.ipcns is None and self._needs_ipc(pod)):
            await self._make_sandbox(worker, pod)  # until it is whole, no container starts
        worker.pod, worker.sources = pod, sources
        await self._probe(worker, now)
        status = worker.sync(now)
        self._start_hooks(worker)
        for event in worker.take_events():
            ref = reference(pod, "v1", "Pod", event.field_path)
            self.events.record(ref, event.type, event.reason, event.message)
        if self._posted.get(uid) != status:
            # first, also for a pod being deleted: one that finalizers keep shows how it ended
            # (kube's status manager writes the final status before it deletes)
            with contextlib.suppress(NotFoundError):
                await self.client.patch(path_of("", "v1", "pods", ns, name, "status"), {"status": status})
                self._posted[uid] = status
        if meta.get("deletionTimestamp") and not worker.running():
            await self._delete_now(ns, name, uid)

    async def _delete_now(self, ns: str, name: str, uid: str) -> None:
        """The pod's containers are gone: its object goes too (grace 0, this uid only)."""
        with contextlib.suppress(NotFoundError):
            await self.client.delete(
                path_of("", "v1", "pods", ns, name),
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}},
            )

    async def _rejects(self, pod: Obj) -> bool:
        """kube's kubelet admission of a new pod, for what its scheduler could not see (a pod
        bound by spec.nodeName): a host port another running pod here holds refuses it —
        phase Failed, reason NodePorts, for good.  Whether it was refused."""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        shared = self.network is None  # no pod network: every containerPort is the node's
        wanted = host_ports(pod, shared)
        if not wanted:
            return False
        holders = [
            (port, w.pod)
            for w in self.workers.values()
            if (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            for port in host_ports(w.pod, shared)
        ]
        collision = first_collision(wanted, [port for port, _ in holders])
        if collision is None:
            return False
        meta = pod.get("metadata") or {}
        uid, ns, name = str(meta.get("uid") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")
        self._rejected.add(uid)
        message = f"Pod was rejected: Predicate {NODE_PORTS} failed: {NO_FREE_PORTS}"
        if shared:
            holder = next(p for port, p in holders if collides(collision, port))
            held_by = f"{(holder.get('metadata') or {}).get('namespace')}/{(holder.get('metadata') or {}).get('name')}"
            message += (
                f" (pods share the node's network, no pod network here: port {collision[2]}/{collision[1]}"
                f" is held by pod {held_by})"
            )
        status = {"phase": "Failed", "reason": NODE_PORTS, "message": message}
        self.events.record(reference(pod, "v1", "Pod"), WARNING, NODE_PORTS, message)
        with contextlib.suppress(NotFoundError):
            await self.client.patch(path_of("", "v1", "pods", ns, name, "status"), {"status": status})
        return True

    def _allocatable(self) -> Obj:
        """The node's allocatable as last posted (kube's kubelet reads its Node object)."""
        return dict((self._node_status or {}).get("allocatable") or {})

    def _volumes_of(self, uid: str) -> PodVolumes | None:
        """Where the pod's volumes live: beside its containers' runs (none for fake containers)."""
        if not self._has_files():
            return None
        return PodVolumes(Path(self.runtime.root) / "pods" / uid / "volumes")  # type: ignore[attr-defined]

    def _needs_network(self, pod: Obj) -> bool:
        """With a pod network, every pod but a hostNetwork one gets its own."""
        return self.network is not None and (pod.get("spec") or {}).get("hostNetwork") is not True

    def _needs_ipc(self, pod: Obj) -> bool:
        """A kubelet that runs processes as root gives every pod but a hostIPC one its own IPC
        namespace (podipc.py)."""
        return self._has_files() and podipc.usable() and (pod.get("spec") or {}).get("hostIPC") is not True

    async def _make_sandbox(self, worker: PodWorker, pod: Obj) -> None:
        """Give the worker its pod's own namespaces: its network (with a pod network) and its IPC
        namespace; when one cannot be had now, the pod's containers wait with kube's reason
        (FailedCreatePodSandBox) and the next sync tries again."""
        try:
            if worker.netns is None and self._needs_network(pod):
                assert self.network is not None
                address = await asyncio.to_thread(self.network.setup, worker.uid)
                worker.pod_ip, worker.netns = address.ip, address.netns
            if worker.ipcns is None and self._needs_ipc(pod):
                pod_dir = Path(self.runtime.root) / "pods" / worker.uid  # type: ignore[attr-defined]
                worker.ipcns = await asyncio.to_thread(podipc.ensure, pod_dir)
        except (PodNetError, PodIpcError) as e:
            meta = pod.get("metadata") or {}
            log.warning("pod %s/%s: no pod sandbox: %s", meta.get("namespace"), meta.get("name"), e)
            if worker.sandbox_error != f"FailedCreatePodSandBox: {e}":
                failed = f"Failed to create pod sandbox: {e}"
                self.events.record(reference(pod, "v1", "Pod"), WARNING, "FailedCreatePodSandBox", failed)
            worker.sandbox_error = f"FailedCreatePodSandBox: {e}"
            return
        worker.sandbox_error = ""

    async def _probe(self, worker: PodWorker, now: float) -> None:
        due = worker.due_probes(now)
        if not due:
            return

        if getattr(self.runtime, "simulated", False):
            # a fake container has nothing to probe (and a hollow node must not run a pod's
            # commands on this machine): every probe succeeds
            for container, _spec, tracker in due:
                worker.record_probe(container, tracker, True, now)
            return

        async def one(container: str, spec: Obj, tracker: Any) -> None:
            env = _handler_env(worker, spec)
            pid = self._main_pid(worker, container)
            outcome = await prober.run(tracker.probe, spec, worker.pod_ip, env, spec.get("workingDir"), pid)
            worker.record_probe(container, tracker, outcome.ok, self.clock(), outcome.reason)

        await asyncio.gather(*(one(c, s, t) for c, s, t in due))

    def _main_pid(self, worker: PodWorker, container: str) -> int:
        """The container's main process, whose namespaces a probe's or hook's exec joins."""
        main_pid = getattr(self.runtime, "main_pid", None)
        return int(main_pid(worker.uid, container)) if main_pid is not None else 0

    def _start_hooks(self, worker: PodWorker) -> None:
        """Each due lifecycle hook as a task of its own: a long preStop must not hold up the
        other pods' syncs.  Its end wakes the sync loop."""
        for run in worker.due_hooks():
            if getattr(self.runtime, "simulated", False):
                worker.hook_done(run, True, "")
                continue
            task = asyncio.create_task(self._run_hook(worker, run))
            self._hook_tasks.add(task)
            task.add_done_callback(self._hook_tasks.discard)

    async def _run_hook(self, worker: PodWorker, run: HookRun) -> None:
        containers = (worker.pod.get("spec") or {}).get("containers") or ()
        spec: Obj = next((c for c in containers if isinstance(c, dict) and c.get("name") == run.container), {})
        outcome = await prober.run_handler(
            run.handler.kind,
            run.handler.action,
            max(0.1, run.deadline - self.clock()),
            spec,
            worker.pod_ip,
            _handler_env(worker, spec),
            spec.get("workingDir"),
            self._main_pid(worker, run.container),
        )
        if not outcome.ok:
            log.info("%s hook of %s failed: %s", run.hook, run.container, outcome.reason)
        worker.hook_done(run, outcome.ok, outcome.reason)
        self.wake()

    def find(self, namespace: str, name: str) -> PodWorker | None:
        """The worker of the pod bound here with that name (for the kubelet's server)."""
        for worker in self.workers.values():
            meta = worker.pod.get("metadata") or {}
            if meta.get("name") == name and meta.get("namespace") == namespace:
                return worker
        return None

    def pods(self) -> list[Obj]:
        return [w.pod for w in self.workers.values()]

    def _pods_with_addresses(self) -> list[tuple[Obj, str]]:
        """(pod, IP) of the pods here with a network namespace of their own that are not done."""
        return [
            (w.pod, w.pod_ip)
            for w in self.workers.values()
            if w.netns is not None and (w.pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]

    async def forget_gone(self, present: set[str]) -> None:
        """Pods no longer bound here (deleted for good): stop their containers, drop their runs."""
        self._rejected.intersection_update(present)
        for uid in [u for u in self.workers if u not in present]:
            worker = self.workers.pop(uid)
            for name in worker.container_names():
                self.runtime.stop(uid, name, 0.0, self.clock())
            meta = worker.pod.get("metadata") or {}
            self.runtime.remove_pod(uid, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            if worker.volumes is not None:
                worker.volumes.remove()
            self.sources.forget(uid)
            self._posted.pop(uid, None)
            if self.network is not None and worker.netns is not None:
                try:
                    await asyncio.to_thread(self.network.teardown, uid)
                except PodNetError as e:
                    log.warning("pod %s/%s: its network stays: %s", meta.get("namespace"), meta.get("name"), e)

    async def clean_up_orphans(self, present: set[str]) -> list[str]:
        """Kube's pod housekeeping: a pod found on disk that is neither bound here nor known
        (deleted while the kubelet was down, or its node's pods deleted by force) has its
        containers killed and its runs, volumes and network removed.  The uids cleaned."""
        remove_orphan = getattr(self.runtime, "remove_orphan", None)
        if remove_orphan is None:
            return []  # fake containers live in memory: nothing outlives a kubelet
        on_disk = set(self.runtime.running_pods())
        root = Path(self.runtime.root) / "pods"  # type: ignore[attr-defined]
        on_disk |= {p.name for p in root.iterdir()} if root.is_dir() else set()
        if self.network is not None:
            on_disk |= set(await asyncio.to_thread(self.network.pod_uids))
        orphans = sorted(on_disk - present - set(self.workers))
        for uid in orphans:
            log.info("pod %s is no longer bound to %s: removing what is left of it", uid, self.config.name)
            await asyncio.to_thread(remove_orphan, uid)
            tmpfs.remove(root / uid)
            if self.network is not None:
                try:
                    await asyncio.to_thread(self.network.teardown, uid)
                except PodNetError as e:
                    log.warning("pod %s: its network stays: %s", uid, e)
        return orphans

    # -- loops ----------------------------------------------------------------------------------

    def wake(self) -> None:
        """Sync now (a pod bound here changed)."""
        self._wake.set()

    async def run(self, *, register: bool = True) -> None:
        if register:
            await self.register()
        bound = self.bound
        if self._own_services:  # every Service: the pods' service link variables (envvars.py)
            services = self.factory.informer(SERVICES)
            self.sources.services = lambda ns: services.indexer.by_index(NAMESPACE_INDEX, ns)
        if bound is None:
            pods = self.factory.informer(PODS, field_selector=f"spec.nodeName={self.config.name}")
            wake = lambda *_: self.wake()  # noqa: E731
            pods.add_handler(EventHandler(wake, wake, wake))
            bound = pods.indexer.objects
        if self.factory.informers():
            self.factory.start()
            await self.factory.wait_for_sync(timeout=30.0)
        log.info("kubelet %s: registered, %d pods bound", self.config.name, len(bound()))
        loops = [self._every(nodestatus.LEASE_RENEW_S, self.renew_lease_once), self._every(10.0, self.node_status_once)]
        if register and self._has_files():
            loops.append(self._every(RELEASED_VOLUMES_PERIOD_S, self.remove_released_volumes_once))
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            while True:
                current = bound()
                for pod in current:
                    try:
                        await self.sync_pod(pod)
                    except (ApiError, TransportError) as e:
                        log.warning("syncing pod %s failed: %s", (pod.get("metadata") or {}).get("name"), e)
                present = {str((p.get("metadata") or {}).get("uid")) for p in current}
                await self.forget_gone(present)
                await self.clean_up_orphans(present)
                if self.host_ports is not None:
                    await asyncio.to_thread(self.host_ports.sync, self._pods_with_addresses())
                self._wake.clear()
                await wait_event(self._wake, self.sync_period)
        finally:
            for t in [*tasks, *self._hook_tasks]:
                t.cancel()
            await asyncio.gather(*tasks, *self._hook_tasks, return_exceptions=True)
            await self.events.flush(timeout=2.0)  # what happened last is worth telling
            await self.factory.stop()

    async def _every(self, period: float, step: Callable[[], Any]) -> None:
        while True:
            try:
                await step()
            except (ApiError, TransportError) as e:
                log.warning("%s failed: %s", getattr(step, "__name__", "a periodic step"), e)
            await asyncio.sleep(period)
