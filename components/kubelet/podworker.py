"""One pod's worker: carries out what `podactions` plans through the runtime, keeps the probe
state of each container run, and builds the pod's status for `pods/status`.

`sync(now)` is one step: look at the runs, plan, kill and start, and return the status as kube's
kubelet would report it (container, init container and ephemeral container statuses with
state, lastState, restartCount, ready and started; phase; conditions; IPs; startTime; qosClass).
An ephemeral container runs as any other but is never probed, hooked or limited, never
restarted, and never ready; it counts for neither the phase nor the conditions.  Probes are
executed elsewhere (they do I/O and take time): `due_probes(now)` says which to run,
`record_probe` takes their outcomes.  Times are epoch seconds; the worker never sleeps.

What happens to the pod is also told as kube's kubelet tells it in Events (Pulled, Created,
Started, Killing, BackOff, Unhealthy, Failed, FailedMount, ...): the worker queues them
(`take_events`) and the kubelet writes them.  A condition that lasts (a missing ConfigMap, an
image back-off, a crash back-off) is told when it begins, not at every sync.

A container's image is "pulled" by looking it up in the image table (images.py) when the
runtime runs processes: an image it cannot run waits as kube's does, ErrImagePull at each
attempt and ImagePullBackOff between attempts (10 s, doubling to 300 s, as kube's image back-off).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from components.kubelet import container_tmp, etchosts, image_dirs, limits, podphase, resolv, termination
from components.kubelet.backoff import REASON as CRASH_LOOP
from components.kubelet.backoff import CrashBackOff, crash_loop_message
from components.kubelet.containerlog import parse_timestamp, timestamp
from components.kubelet.envvars import EnvError, Sources, build, expand
from components.kubelet.fake_runtime import PREFIX as FAKE_PREFIX
from components.kubelet.hooks import POST_START, HookRun, Hooks
from components.kubelet.images import HostImages, ImagePullError, Resolved
from components.kubelet.podactions import Seen, plan, spec_hash
from components.kubelet.podvolumes import PodVolumes
from components.kubelet.probes import Container as ContainerProbes
from components.kubelet.probes import ProbeError, ProbeTracker
from components.kubelet.process_runtime import RunState
from components.kubelet.sandbox import Mount, Sandbox
from components.kubelet.security import SecurityContextError, capabilities, no_new_privs, read_only_root, run_as
from components.kubelet.volumes import VolumeError
from machinery import ephemeral_containers
from machinery.objects import Obj
from machinery.qos import qos_class

DEFAULT_GRACE_S = 30.0
MAX_QUEUED_EVENTS = 256  # between two takes; older ones are dropped first
IMAGE_BACKOFF_S = 10.0  # kube's image pull back-off: 10 s, doubling ...
IMAGE_BACKOFF_MAX_S = 300.0  # ... up to 5 min


class Runtime(Protocol):
    def start(
        self,
        namespace: str,
        pod: str,
        uid: str,
        container: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        meta: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
        executable: str | None = None,
    ) -> int: ...

    def seen(self, uid: str, container: str, attempt: int | None = None) -> RunState | None: ...

    def stop(self, uid: str, container: str, grace_s: float, now: float) -> None: ...

    def tick(self, now: float) -> None: ...


@dataclass(slots=True)
class _Probing:
    attempt: int
    state: ContainerProbes


def _epoch(text: str) -> float | None:
    try:
        return parse_timestamp(text) / 1e9 if text else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One thing to report about the pod, in kube's kubelet's reason and words; `field_path`
    names the container (`spec.containers{web}`), empty for the pod itself."""

    type: str  # Normal or Warning
    reason: str
    message: str
    field_path: str = ""


class PodWorker:
    def __init__(
        self,
        pod: Obj,
        runtime: Runtime,
        sources: Sources,
        host_ip: str,
        backoff: CrashBackOff | None = None,
        wall: Callable[[float], str] = lambda now: timestamp(int(now * 1e9)),
        volumes: PodVolumes | None = None,
        images: HostImages | None = None,
        private_tmp: bool = True,
        dns: resolv.ClusterDNS | None = None,
    ) -> None:
        self.pod = pod
        self.dns = dns  # the kubelet's --cluster-dns/--cluster-domain (resolv.py)
        self.runtime = runtime
        self.sources = sources
        self.host_ip = host_ip
        self.pod_ip = host_ip  # the host network's; a pod network namespace gives its own
        self.netns: str | None = None  # the pod's network namespace file, when it has one
        self.ipcns: str | None = None  # the pod's IPC namespace file (podipc.py), when it has one
        self.backoff = backoff if backoff is not None else CrashBackOff()  # an empty one is falsy (__len__)
        self.wall = wall
        self.start_time = ""
        self._started_at: float | None = None  # `now` of the first sync: activeDeadlineSeconds counts from it
        self.deadline_exceeded = False  # the pod ran past spec.activeDeadlineSeconds: killed, Failed
        self._probing: dict[str, _Probing] = {}
        self._waiting: dict[str, tuple[str, str]] = {}  # container -> (reason, message) of a failed start
        self.hooks = Hooks()
        self.volumes = volumes  # None: the runtime has no files (fake containers)
        self._volume_error = ""  # why the pod's volumes could not be set up; no container starts
        self.sandbox_error = ""  # why the pod's network or IPC namespace could not be made (the kubelet's to say)
        self.images = images or HostImages()
        self.private_tmp = private_tmp  # each container run its own /tmp (container_tmp.py)
        self._pulls: dict[str, tuple[float, float]] = {}  # container -> (its image's last failure, back-off)
        self._events: list[PodEvent] = []
        self._told: set[tuple[str, str, int]] = set()  # (what, container, attempt) told once per run

    # -- events -------------------------------------------------------------------------------

    def take_events(self) -> list[PodEvent]:
        """The events queued since the last take (the kubelet writes them)."""
        events, self._events = self._events, []
        return events

    def _event(self, event_type: str, reason: str, message: str, container: str = "") -> None:
        """Queue an event about the pod, or about one of its containers."""
        if len(self._events) >= MAX_QUEUED_EVENTS:
            del self._events[0]
        self._events.append(PodEvent(event_type, reason, message, self._field_path(container) if container else ""))

    def exec_program(self, container: str, command: list[str]) -> tuple[list[str], str]:
        """What `kubectl exec` runs in the container: its command as the image would run it
        (an image program such as /agnhost is its peer binary, a bare applet of a busybox
        image is busybox), as (argv, executable; "" for argv[0] itself)."""
        spec = self.pod.get("spec") or {}
        image = next(
            (
                str(c.get("image") or "")
                for kind in ("containers", "initContainers", "ephemeralContainers")
                for c in spec.get(kind) or ()
                if isinstance(c, dict) and c.get("name") == container
            ),
            "",
        )
        try:
            resolved = self.images.resolve(image, list(command), [])
        except ImagePullError:
            return list(command), ""
        return resolved.argv, resolved.executable

    def _field_path(self, container: str) -> str:
        """kube's reference to one container of the pod (GenerateContainerRef)."""
        spec = self.pod.get("spec") or {}
        for kind in ("initContainers", "containers", "ephemeralContainers"):
            if any(isinstance(c, dict) and c.get("name") == container for c in spec.get(kind) or ()):
                return f"spec.{kind}{{{container}}}"
        return f"spec.containers{{{container}}}"

    def _once(self, what: str, container: str, attempt: int) -> bool:
        """True the first time `what` happens to this run of the container."""
        key = (what, container, attempt)
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def _wait(self, name: str, reason: str, message: str, *events: tuple[str, str, str]) -> None:
        """The container waits for `reason`; `events` (type, reason, message) are told when
        that reason or its message is new."""
        if self._waiting.get(name) != (reason, message):
            for event in events:
                self._event(*event, container=name)
        self._waiting[name] = (reason, message)

    def container_names(self) -> list[str]:
        return list(self._specs())

    @property
    def uid(self) -> str:
        return str((self.pod.get("metadata") or {}).get("uid") or "")

    def _specs(self) -> dict[str, tuple[Obj, bool]]:
        """Every container of the pod by name, with whether it is an init container (an
        ephemeral one named as another is passed over: the apiserver refuses that)."""
        spec = self.pod.get("spec") or {}
        out: dict[str, tuple[Obj, bool]] = {}
        for kind, init in (("initContainers", True), ("containers", False)):
            for c in spec.get(kind) or ():
                if isinstance(c, dict) and isinstance(c.get("name"), str):
                    out[c["name"]] = (c, init)
        for c in self._ephemerals(set(out)):
            out[c["name"]] = (c, False)
        return out

    def _ephemerals(self, taken: set[str]) -> list[Obj]:
        """The pod's ephemeral containers whose names no other container of it has `taken`,
        without what one cannot have."""
        found = (self.pod.get("spec") or {}).get("ephemeralContainers") or ()
        return [
            {k: v for k, v in c.items() if k not in ephemeral_containers.FORBIDDEN_FIELDS}
            for c in found
            if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] not in taken
        ]

    # -- one step -------------------------------------------------------------------------------

    def sync(self, now: float) -> Obj:
        """Act on the pod once; its status as it stands after the actions were taken."""
        self.runtime.tick(now)
        if not self.start_time:
            self.start_time = self.wall(now)
        if self._started_at is None:
            self._started_at = now
        specs = self._specs()
        grace = self._grace()
        if self.deadline_exceeded or self._past_deadline(now):
            self.deadline_exceeded = True  # for good: kube never starts such a pod's containers again
            self._kill_all(specs, grace, now)
            return self.status(now)
        for name in specs:  # a failed postStart kills its container (the policy restarts it)
            run = self.runtime.seen(self.uid, name)
            if run is not None and run.running and self.hooks.post_start_failed(name, run.attempt):
                self._killing(name, run.attempt, "FailedPostStartHook")
                self.runtime.stop(self.uid, name, grace, now)
        if self.volumes is not None:
            try:
                self.volumes.sync(self.pod, self.sources)
                self._volume_error = ""
            except (VolumeError, OSError) as e:
                failed = f"MountVolume.SetUp failed: {e}"
                if failed != self._volume_error:
                    self._event("Warning", "FailedMount", failed)
                self._volume_error = failed
        seen = {name: s for name in specs if (s := self._seen(name, now)) is not None}
        actions = plan(self.pod, seen, self.backoff, now)
        for kill in actions.kills:
            stop_grace: float | None = grace
            run = self.runtime.seen(self.uid, kill.container)
            if kill.container in specs and run is not None and run.running:
                self._killing(kill.container, run.attempt, kill.reason)
                stop_grace = self.hooks.pre_stop(specs[kill.container][0], run.attempt, now, grace)
            if stop_grace is not None:  # None: its preStop hook still runs
                self.runtime.stop(self.uid, kill.container, stop_grace, now)
        for name in actions.backing_off:
            run = self.runtime.seen(self.uid, name)
            if run is not None and self._once("BackOff", name, run.attempt):
                meta = self.pod.get("metadata") or {}
                pod = f"{meta.get('name')}_{meta.get('namespace')}({self.uid})"  # kube's format.Pod
                self._event("Warning", "BackOff", f"Back-off restarting failed container {name} in pod {pod}", name)
        for start in actions.starts:
            self._start(specs[start.container][0], now)
        return self.status(now)

    def _killing(self, name: str, attempt: int, why: str) -> None:
        """Tell once per run that the container is being stopped, and `why`."""
        if self._once("Killing", name, attempt):
            self._event("Normal", "Killing", why, name)

    def _past_deadline(self, now: float) -> bool:
        """kube's activeDeadlineHandler: the pod has been active on the node longer than
        `spec.activeDeadlineSeconds` (read at every sync, so an update that shortens it counts)."""
        limit = (self.pod.get("spec") or {}).get("activeDeadlineSeconds")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0 or self._started_at is None:
            return False
        return now - self._started_at >= limit

    def _kill_all(self, specs: dict[str, tuple[Obj, bool]], grace: float, now: float) -> None:
        for name in specs:
            run = self.runtime.seen(self.uid, name)
            if run is not None and run.running:
                self._killing(name, run.attempt, f"Stopping container {name}")
                stop_grace = self.hooks.pre_stop(specs[name][0], run.attempt, now, grace)
                if stop_grace is not None:  # None: its preStop hook still runs
                    self.runtime.stop(self.uid, name, stop_grace, now)

    def _grace(self) -> float:
        meta, spec = self.pod.get("metadata") or {}, self.pod.get("spec") or {}
        for value in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return float(value)
        return DEFAULT_GRACE_S

    def _seen(self, name: str, now: float) -> Seen | None:
        run = self.runtime.seen(self.uid, name)
        if run is None:
            return None
        meta = run.meta if isinstance(run.meta, dict) else {}
        if run.running:
            probing = self._probing.get(name)
            failed = ""
            started = True
            if probing is not None and probing.attempt == run.attempt:
                started = probing.state.started
                for kind, tracker in probing.state.trackers.items():
                    if tracker.kills:
                        failed = kind.removesuffix("Probe")
            return Seen(True, spec_hash=str(meta.get("hash") or ""), probe_failed=failed, started=started)
        finished = _epoch(run.finished_at)
        return Seen(False, run.exit_code, finished if finished is not None else now, str(meta.get("hash") or ""))

    def addresses(self) -> Obj:
        """The pod's addresses as this kubelet reports them in its status."""
        return {
            "hostIP": self.host_ip,
            "hostIPs": [{"ip": self.host_ip}],
            "podIP": self.pod_ip,
            "podIPs": [{"ip": self.pod_ip}],
        }

    def downward_view(self) -> Obj:
        """The pod as a container's environment sees it when it starts: with the addresses this
        kubelet knows (kube's reads the sandbox's IP), which the stored status of a new pod does
        not carry yet (conformance "Downward API should provide pod name, namespace and IP
        address as env vars" saw POD_IP empty)."""
        return {**self.pod, "status": {**(self.pod.get("status") or {}), **self.addresses()}}

    def _start(self, container: Obj, now: float) -> None:
        name = container["name"]
        meta = self.pod.get("metadata") or {}
        blocked = self.sandbox_error or self._volume_error
        if blocked:
            self._waiting[name] = ("ContainerCreating", blocked)  # kube waits for its sandbox and mounts
            return
        try:
            env = build(self.downward_view(), container, self.sources, f"spec.containers[{name}]")
            probe_state = ContainerProbes(container, now, f"spec.containers[{name}]")
            sandbox = self._sandbox(container, env.values)
        except (EnvError, ProbeError, VolumeError, SecurityContextError, OSError) as e:  # OSError: the hosts file
            self._wait(name, "CreateContainerConfigError", str(e), ("Warning", "Failed", f"Error: {e}"))
            return
        image_name = str(container.get("image") or "")
        try:
            image = self._pull(container, env.values)
        except ImagePullError as e:
            self._pull_failed(name, image_name, str(e), now)
            return
        if (image.files or image.writable) and self.volumes is not None and os.geteuid() == 0:
            # the image's own files first: the container's volumes lie over them, as over an image
            try:
                files = tuple(Mount(host, target, True) for host, target in image.files) + image_dirs.mounts_for(
                    self.volumes.base.parent,
                    name,
                    self._next_attempt(container),
                    image.writable,
                    read_only=read_only_root(container),
                )
            except OSError as e:
                self._wait(name, "CreateContainerError", str(e), ("Warning", "Failed", f"Error: {e}"))
                return
            sandbox = replace(sandbox, mounts=files + sandbox.mounts)
        run_meta = self._run_meta(container)
        if getattr(self.runtime, "needs_command", True):
            program = [image.executable] if image.executable else image.argv  # the host's file
            run_meta["imageID"] = self.images.image_id(str(container.get("image") or ""), program)
        try:
            attempt = self.runtime.start(
                str(meta.get("namespace") or "default"),
                str(meta.get("name") or ""),
                self.uid,
                name,
                image.argv,
                # a container's own hostname is its pod's name (kube's runtimes set it); its env
                # lies over the image's
                {
                    "PATH": "/usr/local/bin:/usr/bin:/bin",
                    "HOSTNAME": str(meta.get("name") or ""),
                    **image.env,
                    **env.values,
                },
                # else the image's WORKDIR, which is / for the images the table stands for (not
                # the kubelet's own working dir: a container's relative writes would land there)
                container.get("workingDir") or image.working_dir or "/",
                run_meta,
                sandbox,
                executable=image.executable or None,
            )
        except (ValueError, RuntimeError, OSError) as e:  # the runtime could not create it
            self._wait(name, "CreateContainerError", str(e), ("Warning", "Failed", f"Error: {e}"))
            return
        self._event("Normal", "Pulled", f'Container image "{image_name}" already present on machine', name)
        self._event("Normal", "Created", f"Created container: {name}", name)
        self._event("Normal", "Started", f"Started container {name}", name)
        self._waiting.pop(name, None)
        self._pulls.pop(name, None)
        self._told = {k for k in self._told if k[1] != name or k[2] >= attempt - 1}  # bounded: recent runs only
        self._probing[name] = _Probing(attempt, probe_state)
        self.hooks.forget(name, attempt)
        self.hooks.post_start(container, attempt, now, self._grace() or DEFAULT_GRACE_S)

    def _pull(self, container: Obj, defined: Mapping[str, str]) -> Resolved:
        """What the container runs: its image through the table when the runtime runs
        processes; its command and args as they are for one that runs nothing (fake).  `$(VAR)`
        in the command and args are the container's variables (`defined`), as kube expands them
        before the runtime sees them (`$$` is a `$`, an unknown name stays as written)."""
        command = [expand(str(a), defined) for a in container.get("command") or []]
        args = [expand(str(a), defined) for a in container.get("args") or []]
        if not getattr(self.runtime, "needs_command", True):
            return Resolved([*command, *args], {}, "", None)
        return self.images.resolve(str(container.get("image") or ""), command, args)

    def _pull_failed(self, name: str, image: str, message: str, now: float) -> None:
        """ErrImagePull when an attempt is due, ImagePullBackOff until the next one is."""
        failed = self._pulls.get(name)
        if failed is not None and now < failed[0] + failed[1]:
            self._wait(
                name,
                "ImagePullBackOff",
                f'Back-off pulling image "{image}": ErrImagePull: {message}',
                ("Normal", "BackOff", f'Back-off pulling image "{image}"'),
                ("Warning", "Failed", "Error: ImagePullBackOff"),
            )
            return
        delay = IMAGE_BACKOFF_S if failed is None else min(2 * failed[1], IMAGE_BACKOFF_MAX_S)
        self._pulls[name] = (now, delay)
        self._waiting.pop(name, None)  # each attempt is told
        self._wait(
            name,
            "ErrImagePull",
            message,
            ("Warning", "Failed", f'Failed to pull image "{image}": {message}'),
            ("Warning", "Failed", "Error: ErrImagePull"),
        )

    def _sandbox(self, container: Obj, env: Mapping[str, str]) -> Sandbox:
        """What sets the container apart: its volume mounts (a `subPathExpr` expanded with its
        environment `env`) and managed /etc/hosts, the pod's network and IPC namespaces and
        sysctls, its limits."""
        where = f"spec.containers[{container['name']}]"
        mounts: tuple[Mount, ...] = ()
        if self.volumes is not None:
            mounts = self.volumes.mounts(self.pod, container, where, env)
            if etchosts.wanted(container, [self.pod_ip], self.pod):
                # the IP this kubelet reports as the pod's (kube's makeMounts takes the sandbox's)
                mounts += (self.volumes.hosts_mount(self.pod, [self.pod_ip]),)
            if not _mounts_at(container, resolv.PATH):
                mounts += (self.volumes.resolv_mount(self.pod, self.dns),)
            if os.geteuid() == 0:  # a kubelet that is not root mounts nothing, and would say so in each log
                attempt = self._next_attempt(container)
                mounts += (self._termination_mount(container, attempt),)
                if self.private_tmp and not read_only_root(container):
                    # first: volumes under /tmp go inside it
                    mounts = (container_tmp.mount_for(self.volumes.base.parent, container["name"], attempt), *mounts)
        user = run_as(self.pod, container, where)
        return Sandbox(
            mounts=mounts,
            netns=self.netns,
            limits=limits.of(container),
            user=None if user is None else (user.uid, user.gid, user.groups),
            ipcns=self.ipcns,
            sysctls=pod_sysctls(self.pod),
            no_new_privs=no_new_privs(container),
            capabilities=capabilities(container, where),
            read_only_root=read_only_root(container),
            # the pod's hostname (kube's runtimes set it); a hostNetwork pod has the node's
            hostname=None
            if (self.pod.get("spec") or {}).get("hostNetwork") is True
            else etchosts.hostname_and_domain(self.pod)[0] or None,
        )

    def _next_attempt(self, container: Obj) -> int:
        """The number the runtime will give the container's next run."""
        done = self.runtime.attempts(self.uid, container["name"])  # type: ignore[attr-defined]  # volumes: the process runtime
        return done[-1] + 1 if done else 0

    def _termination_mount(self, container: Obj, attempt: int) -> Mount:
        """Run `attempt`'s termination message file, bound at its terminationMessagePath."""
        assert self.volumes is not None
        file = termination.file_for(self.volumes.base.parent, container["name"], attempt)
        return Mount(str(file), termination.target_of(container), False)

    def _ended(self, container: Obj, run: RunState) -> Obj:
        """A finished run's `terminated` state, with its termination message (termination.py);
        a run that never started keeps the runtime's words."""
        message = run.message
        if not message and self.volumes is not None:
            file = termination.path_of(self.volumes.base.parent, container["name"], run.attempt)
            message = termination.message(container, file, run.exit_code, run.log)
        return _terminated(run, message)

    def _run_meta(self, container: Obj) -> dict[str, Any]:
        """What the runtime keeps with a run: the spec's hash, the image, and the fake runtime's
        annotations when the pod has any."""
        meta: dict[str, Any] = {"hash": spec_hash(container), "image": container.get("image") or ""}
        annotations = (self.pod.get("metadata") or {}).get("annotations") or {}
        fake = {k: v for k, v in annotations.items() if isinstance(k, str) and k.startswith(FAKE_PREFIX)}
        if fake:
            meta["annotations"] = fake
        return meta

    # -- probes ---------------------------------------------------------------------------------

    def due_probes(self, now: float) -> list[tuple[str, Obj, ProbeTracker]]:
        """(container, its spec, the probe) for every probe to run now on a running container."""
        specs = self._specs()
        out: list[tuple[str, Obj, ProbeTracker]] = []
        for name, probing in self._probing.items():
            run = self.runtime.seen(self.uid, name)
            if run is None or not run.running or run.attempt != probing.attempt or name not in specs:
                continue
            started = _epoch(run.started_at)
            if started is not None:
                probing.state.count_from(started)
            out.extend((name, specs[name][0], t) for t in probing.state.due(now))
        return out

    def due_hooks(self) -> list[HookRun]:
        """Lifecycle hooks to run now (the kubelet runs them and reports with `hook_done`)."""
        return self.hooks.due()

    def hook_done(self, run: HookRun, ok: bool, message: str) -> None:
        if not ok:  # kube leaves the hook's output out of the event: it may carry secrets
            reason = "FailedPostStartHook" if run.hook == POST_START else "FailedPreStopHook"
            self._event("Warning", reason, f"{run.hook[0].upper()}{run.hook[1:]}Hook failed", run.container)
        self.hooks.finished(run, ok, message)

    def record_probe(self, container: str, tracker: ProbeTracker, ok: bool, now: float, why: str = "") -> bool:
        """One probe's outcome (`why` it failed); True when a verdict changed (the status is
        worth posting)."""
        probing = self._probing.get(container)
        if probing is None or tracker not in probing.state.trackers.values():
            return False  # a probe of a run that has since been replaced
        if not ok:
            kind = tracker.probe.kind.removesuffix("Probe").capitalize()
            said = f"{kind} probe failed: {why}" if why else f"{kind} probe failed"
            self._event("Warning", "Unhealthy", said, container)
        return tracker.observe(ok, now)

    # -- status ---------------------------------------------------------------------------------

    def _container_status(
        self, container: Obj, now: float, has_inits: bool, init: bool = False, ephemeral: bool = False
    ) -> Obj:
        """kube's convertToAPIContainerStatuses for one container; an ephemeral one is never
        ready, has no `started` (no probe manager looks at it) and is never restarted."""
        status = self._run_status(container, now, has_inits, init, ephemeral)
        if ephemeral:
            status.pop("started", None)
            status["ready"] = False
        return status

    def _run_status(self, container: Obj, now: float, has_inits: bool, init: bool, ephemeral: bool) -> Obj:
        name = container["name"]
        run = self.runtime.seen(self.uid, name)
        status: Obj = {"name": name, "image": container.get("image") or "", "imageID": "", "ready": False}
        if run is not None and isinstance(run.meta, dict):
            status["imageID"] = str(run.meta.get("imageID") or "")
        if run is None:
            reason, message = self._waiting.get(name) or (
                ("PodInitializing", "") if has_inits else ("ContainerCreating", "")
            )
            status.update(restartCount=0, started=False, state={"waiting": _drop_empty(reason=reason, message=message)})
            return status
        status["containerID"] = f"process://{self.uid}/{name}/{run.attempt}"
        status["restartCount"] = run.attempt
        if run.attempt > 0:
            previous = self.runtime.seen(self.uid, name, run.attempt - 1)
            if previous is not None and not previous.running:
                status["lastState"] = {"terminated": self._ended(container, previous)}
        if run.running and self.hooks.post_start_pending(name, run.attempt):
            # kube reports a container running only once its postStart hook has finished
            status.update(started=False, state={"waiting": {"reason": "ContainerCreating"}})
            return status
        if run.running:
            probing = self._probing.get(name)
            adopted = probing is None or probing.attempt != run.attempt  # no probe state: trust it
            status["started"] = adopted or probing.state.started  # type: ignore[union-attr]
            status["ready"] = adopted or probing.state.ready  # type: ignore[union-attr]
            status["state"] = {"running": {"startedAt": run.started_at}}
            return status
        status["started"] = False
        key = f"{self.uid}/{name}"
        finished = _epoch(run.finished_at) or now
        wait = self.backoff.remaining(key, finished, now) if self.backoff.delay(key) else 0.0
        if wait > 0 and not ephemeral and self._restarts(run):
            meta = self.pod.get("metadata") or {}
            message = crash_loop_message(
                self.backoff.delay(key), name, str(meta.get("name")), str(meta.get("namespace")), self.uid
            )
            status["state"] = {"waiting": {"reason": CRASH_LOOP, "message": message}}
            status["lastState"] = {"terminated": self._ended(container, run)}
        else:
            status["state"] = {"terminated": self._ended(container, run)}
            # kube: an init container that completed is Ready (conformance's InitContainer specs)
            status["ready"] = init and run.exit_code == 0
        return status

    def _restarts(self, run: RunState) -> bool:
        policy = (self.pod.get("spec") or {}).get("restartPolicy") or "Always"
        return policy == "Always" or (policy == "OnFailure" and run.exit_code != 0)

    def status(self, now: float) -> Obj:
        spec = self.pod.get("spec") or {}
        inits = [c for c in spec.get("initContainers") or () if isinstance(c, dict) and "name" in c]
        mains = [c for c in spec.get("containers") or () if isinstance(c, dict) and "name" in c]
        # kube's default waiting reason of a container not created yet: PodInitializing in a pod
        # with init containers (for them too, and whether or not they are done), else
        # ContainerCreating (conformance checks it on every status a pod shows)
        has_inits = bool(inits)
        init_statuses = [self._container_status(c, now, has_inits, init=True) for c in inits]
        statuses = [self._container_status(c, now, has_inits) for c in mains]
        taken = {c["name"] for c in (*inits, *mains) if isinstance(c["name"], str)}
        ephemerals = [self._container_status(c, now, has_inits, ephemeral=True) for c in self._ephemerals(taken)]
        deleting = bool((self.pod.get("metadata") or {}).get("deletionTimestamp"))
        phase = podphase.phase(spec, init_statuses, statuses, terminal=deleting and not self.running())
        held = (self.pod.get("status") or {}).get("conditions") or []
        conditions = podphase.merge(
            held, podphase.conditions(spec, init_statuses, statuses, phase, held, sandbox_ready=True), self.wall(now)
        )
        out: Obj = {
            "phase": phase,
            "conditions": conditions,
            **self.addresses(),
            "startTime": self.start_time,
            "containerStatuses": statuses,
            "qosClass": qos_class(spec),
        }
        if inits:
            out["initContainerStatuses"] = init_statuses
        if ephemerals:
            out["ephemeralContainerStatuses"] = ephemerals
        if self.deadline_exceeded:
            out.update(
                phase="Failed",
                reason="DeadlineExceeded",
                message="Pod was active on the node longer than the specified deadline",
            )
        return out

    def running(self) -> bool:
        """Whether any container of the pod still runs (a deleted pod is gone once none does)."""
        return any((r := self.runtime.seen(self.uid, name)) is not None and r.running for name in self._specs())


def _terminated(run: RunState, message: str) -> Obj:
    return _drop_empty(
        exitCode=run.exit_code if run.exit_code is not None else 128,
        reason=run.reason,
        message=message,
        startedAt=run.started_at,
        finishedAt=run.finished_at,
        containerID="",
    )


def _drop_empty(**fields: Any) -> Obj:
    return {k: v for k, v in fields.items() if v not in ("", None)}


def ready_pod(status: Mapping[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())


def pod_sysctls(pod: Obj) -> tuple[tuple[str, str], ...]:
    """The pod's `spec.securityContext.sysctls` as (name, value), in its order (the apiserver
    has checked their shape; anything else is left out)."""
    context = (pod.get("spec") or {}).get("securityContext") or {}
    items = context.get("sysctls") if isinstance(context, dict) else None
    return tuple(
        (item["name"], str(item.get("value", "")))
        for item in items or ()
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    )


def _mounts_at(container: Obj, path: str) -> bool:
    """Whether the container mounts a volume of its own at `path` (it then keeps it)."""
    mounts = container.get("volumeMounts")
    return isinstance(mounts, list) and any(isinstance(m, dict) and m.get("mountPath") == path for m in mounts)
