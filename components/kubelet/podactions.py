"""What a pod worker does next for its pod: kube's computePodActions, pure.

Given the pod, what the runtime reports of each container (`Seen`) and the clock, `plan`
answers which containers to kill and which to start now, and when to look again:

* a pod being deleted (or one that has finished for good) only has its containers killed;
* init containers run one at a time, in order, each to success before the next; a failed one
  is retried by the restart policy (under `Never` the pod fails and nothing more starts); an
  init container with `restartPolicy: Always` (a sidecar) is started and kept running, and
  the next one waits until it has started;
* main containers start once initialization is done; one that exited is restarted when the
  pod's policy says so (Always; OnFailure after a failure), after its crash back-off;
* a running container whose spec changed (`spec_hash`) is killed and started again at once,
  whatever the policy; one whose liveness or startup probe failed is killed, and restarted
  by the same rules as any exit (policy, then back-off);
* an ephemeral container (added through pods/ephemeralcontainers) is started once, whether
  or not initialization is done, and never again: not after it exits, whatever the policy.

Nothing here touches a process: the worker carries the actions out through its runtime.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from components.kubelet.backoff import CrashBackOff
from machinery import objects
from machinery.objects import Obj


@dataclass(frozen=True, slots=True)
class Seen:
    """One container as the runtime last saw it."""

    running: bool
    exit_code: int | None = None  # when it exited
    finished_at: float | None = None
    spec_hash: str = ""  # of the spec it was started from
    probe_failed: str = ""  # "liveness" or "startup" when that probe's verdict is failure
    started: bool = True  # its startup probe passed (or it has none)


@dataclass(frozen=True, slots=True)
class Kill:
    container: str
    reason: str  # Killing's message: why (deleted, probe failed, spec changed, init failed)


@dataclass(frozen=True, slots=True)
class Start:
    container: str
    init: bool = False


@dataclass(slots=True)
class Plan:
    kills: list[Kill] = field(default_factory=list)
    starts: list[Start] = field(default_factory=list)
    wake_in: float | None = None  # look again this soon (a back-off runs out), else on an event
    backing_off: list[str] = field(default_factory=list)  # containers that wait out a crash back-off
    failed: bool = False  # the pod has failed for good (an init container under Never)


def spec_hash(container: Mapping[str, Any]) -> str:
    """What identifies a container's spec: a change means kill and start again (kube hashes it too)."""
    return hashlib.sha256(orjson.dumps(container, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _restarts(policy: str, exit_code: int | None) -> bool:
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


def _containers(spec: Mapping[str, Any], kind: str) -> list[Obj]:
    return [c for c in spec.get(kind) or () if isinstance(c, dict) and isinstance(c.get("name"), str)]


class _Planner:
    def __init__(self, pod: Obj, seen: Mapping[str, Seen], backoff: CrashBackOff, now: float) -> None:
        self.pod, self.seen, self.backoff, self.now = pod, seen, backoff, now
        self.uid = objects.uid(pod)
        self.plan = Plan()

    def _wake(self, seconds: float) -> None:
        if self.plan.wake_in is None or seconds < self.plan.wake_in:
            self.plan.wake_in = seconds

    def restart_if_due(self, name: str, seen: Seen, init: bool) -> bool:
        """Start `name` again unless its back-off still runs; True when it starts."""
        key = f"{self.uid}/{name}"
        finished = seen.finished_at if seen.finished_at is not None else self.now
        wait = self.backoff.remaining(key, finished, self.now)
        if wait > 0:
            self._wake(wait)
            self.plan.backing_off.append(name)
            return False
        self.backoff.restarted(key, finished, self.now)
        self.plan.starts.append(Start(name, init))
        return True

    def keep_or_kill(self, container: Obj, seen: Seen, policy: str, init: bool) -> bool:
        """A running container: kill it when its spec changed or a probe failed; True if killed."""
        name = container["name"]
        if seen.spec_hash and seen.spec_hash != spec_hash(container):
            self.plan.kills.append(Kill(name, f"Container {name} definition changed, will be restarted"))
            self.plan.starts.append(Start(name, init))
            return True
        if seen.probe_failed:
            again = ", will be restarted" if policy != "Never" else ""
            self.plan.kills.append(Kill(name, f"Container {name} failed {seen.probe_failed} probe{again}"))
            return True
        return False

    def ephemerals(self, spec: Mapping[str, Any]) -> None:
        """kube starts them before the init containers, so one can debug a pod stuck there."""
        for c in _containers(spec, "ephemeralContainers"):
            if c["name"] not in self.seen:
                self.plan.starts.append(Start(c["name"]))

    def init_done(self, spec: Mapping[str, Any], policy: str) -> bool:
        """Drive the init containers; True once every one has succeeded (sidecars: started)."""
        for c in _containers(spec, "initContainers"):
            name, sidecar = c["name"], c.get("restartPolicy") == "Always"
            seen = self.seen.get(name)
            if seen is None:
                self.plan.starts.append(Start(name, init=True))
                return False
            if seen.running:
                if self.keep_or_kill(c, seen, "Always" if sidecar else policy, init=True):
                    return False
                if sidecar:
                    if not seen.started:
                        return False  # the next waits until the sidecar has started
                    continue
                return False  # wait for it to finish
            if sidecar:
                self.restart_if_due(name, seen, init=True)  # a sidecar that exited is always restarted
                return False
            if seen.exit_code == 0:
                continue
            if policy == "Never":
                self.plan.failed = True
                return False
            self.restart_if_due(name, seen, init=True)
            return False
        return True

    def mains(self, spec: Mapping[str, Any], policy: str) -> None:
        for c in _containers(spec, "containers"):
            name = c["name"]
            seen = self.seen.get(name)
            if seen is None:
                self.plan.starts.append(Start(name))
            elif seen.running:
                self.keep_or_kill(c, seen, policy, init=False)
            elif _restarts(policy, seen.exit_code):
                self.restart_if_due(name, seen, init=False)


def plan(pod: Obj, seen: Mapping[str, Seen], backoff: CrashBackOff, now: float) -> Plan:
    """The next actions for `pod`, given what runs.  `backoff` is the worker's (advanced for
    every restart planned)."""
    planner = _Planner(pod, seen, backoff, now)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    if meta.get("deletionTimestamp") or phase in ("Succeeded", "Failed"):
        why = "Stopping container {}" if meta.get("deletionTimestamp") else "Pod has finished, stopping container {}"
        planner.plan.kills = [Kill(name, why.format(name)) for name, s in seen.items() if s.running]
        return planner.plan
    policy = str(spec.get("restartPolicy") or "Always")
    planner.ephemerals(spec)
    if not planner.init_done(spec, policy):
        if planner.plan.failed:
            planner.plan.kills = [
                Kill(name, f"Init container failed, stopping container {name}") for name, s in seen.items() if s.running
            ]
            planner.plan.starts = []
        return planner.plan
    planner.mains(spec, policy)
    return planner.plan
