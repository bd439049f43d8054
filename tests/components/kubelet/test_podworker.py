"""The pod worker with the real process runtime: a pod through init to Running and Ready, a
crash loop with its back-off in the status, readiness from probe outcomes, graceful deletion
with SIGKILL after the grace period, and a configuration error.  Every wait is bounded; every
container is killed by pid at the end."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from components.kubelet import containerlog
from components.kubelet.backoff import CrashBackOff
from components.kubelet.envvars import Sources
from components.kubelet.fake_runtime import FakeRuntime
from components.kubelet.podworker import PodWorker, ready_pod
from components.kubelet.process_runtime import ProcessRuntime
from machinery.objects import Obj
from tests.support.wait import until as wait_until

WAIT_S = 15.0
NO_SOURCES = Sources(lambda ns, n: None, lambda ns, n: None)


def pod(uid: str, *containers: Obj, inits: tuple[Obj, ...] = (), **spec: Any) -> Obj:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
        "spec": {"containers": list(containers), "initContainers": list(inits), **spec},
    }


def sh(name: str, script: str, **extra: Any) -> Obj:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def drive(worker: PodWorker, until: Callable[[Obj], bool], what: str, probes_ok: bool | None = None) -> Obj:
    deadline = time.monotonic() + WAIT_S
    while True:
        now = time.time()
        if probes_ok is not None:
            for name, _spec, tracker in worker.due_probes(now):
                worker.record_probe(name, tracker, probes_ok, now)
        status = worker.sync(now)
        if until(status):
            return status
        assert time.monotonic() < deadline, f"not within {WAIT_S:.0f} s: {what}; last status {status}"
        time.sleep(0.05)


def state(status: Obj, name: str, kind: str = "containerStatuses") -> Obj:
    return next(s for s in status[kind] if s["name"] == name)


def test_init_then_running_and_ready(runtime: ProcessRuntime) -> None:
    p = pod("a", sh("app", "echo up; exec sleep 30"), inits=(sh("init", "sleep 1"),), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    first = w.sync(time.time())
    assert first["phase"] == "Pending"
    assert state(first, "app")["state"] == {"waiting": {"reason": "PodInitializing"}}
    status = drive(w, ready_pod, "the pod Ready")
    assert status["phase"] == "Running" and status["podIP"] == "127.0.0.1" and status["qosClass"] == "BestEffort"
    app = state(status, "app")
    assert app["ready"] and app["started"] and app["restartCount"] == 0 and "running" in app["state"]
    init = state(status, "init", "initContainerStatuses")
    assert init["state"]["terminated"]["exitCode"] == 0 and init["state"]["terminated"]["reason"] == "Completed"
    assert init["ready"] is True  # kube: a completed init container is Ready


def test_a_crash_loop_shows_its_back_off(runtime: ProcessRuntime) -> None:
    p = pod("b", sh("app", "echo boom; exit 1"), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1", backoff=CrashBackOff(initial=1.0, cap=2.0))

    def backing_off(status: Obj) -> bool:
        app = state(status, "app")
        return app["restartCount"] >= 1 and "waiting" in app["state"]

    status = drive(w, backing_off, "CrashLoopBackOff")
    app = state(status, "app")
    assert app["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert (
        app["state"]["waiting"]["message"].startswith("back-off ")
        and "container=app pod=p-b_ns(b)" in app["state"]["waiting"]["message"]
    )
    assert app["lastState"]["terminated"]["exitCode"] == 1 and status["phase"] == "Running"
    status = drive(w, lambda s: state(s, "app")["restartCount"] >= 2, "the restart after the back-off")


def test_readiness_follows_the_probe_outcomes(runtime: ProcessRuntime) -> None:
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 1, "failureThreshold": 1}
    p = pod("c", sh("app", "exec sleep 30", readinessProbe=probe), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    status = drive(w, lambda s: "running" in state(s, "app")["state"], "running")
    assert not ready_pod(status)  # a readiness probe says not ready until it succeeds
    drive(w, ready_pod, "ready after a successful probe", probes_ok=True)
    status = drive(w, lambda s: not ready_pod(s), "not ready after a failed probe", probes_ok=False)
    assert state(status, "app")["restartCount"] == 0  # readiness never restarts


def test_deletion_stops_gracefully_then_kills(runtime: ProcessRuntime) -> None:
    script = "trap '' TERM; echo trapped; sleep 30"
    p = pod("d", sh("app", script), restartPolicy="Always", terminationGracePeriodSeconds=1)
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "running")

    def trapped() -> bool:  # a SIGTERM before the shell ran `trap` would end it at once
        run = runtime.seen("d", "app")
        return run is not None and any(e.text == b"trapped" for e in containerlog.read(Path(run.log)))

    wait_until("the shell to ignore SIGTERM", trapped)
    w.pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    t0 = time.monotonic()
    # judged on the status itself: the process may end between a status and a look at the runs
    status = drive(w, lambda s: "terminated" in state(s, "app")["state"], "stopped after the grace period")
    assert not w.running()
    assert time.monotonic() - t0 >= 0.9  # it ignored SIGTERM: only SIGKILL ended it
    assert state(status, "app")["state"]["terminated"]["exitCode"] == 137
    assert status["phase"] == "Failed"


def test_a_missing_config_map_is_a_create_container_config_error(runtime: ProcessRuntime) -> None:
    app = sh("app", "sleep 30", envFrom=[{"configMapRef": {"name": "settings"}}])
    w = PodWorker(pod("e", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    status = w.sync(time.time())
    assert state(status, "app")["state"] == {
        "waiting": {"reason": "CreateContainerConfigError", "message": 'configmap "settings" not found'}
    }
    assert status["phase"] == "Pending" and runtime.running_pods() == []


def test_a_pod_without_its_network_waits_in_container_creating_then_starts(runtime: ProcessRuntime) -> None:
    w = PodWorker(pod("n", sh("app", "sleep 30")), runtime, NO_SOURCES, host_ip="127.0.0.1")
    w.sandbox_error = "FailedCreatePodSandBox: pod CIDR 10.9.0.0/30 is full"  # what the kubelet sets
    status = w.sync(time.time())
    assert state(status, "app")["state"] == {
        "waiting": {"reason": "ContainerCreating", "message": "FailedCreatePodSandBox: pod CIDR 10.9.0.0/30 is full"}
    }
    assert runtime.running_pods() == []
    w.sandbox_error = ""  # the network came
    drive(w, lambda s: "running" in state(s, "app")["state"], "the container to start")


def test_the_pause_image_runs_idle_with_an_image_id(runtime: ProcessRuntime) -> None:
    p = pod("img", {"name": "pause", "image": "registry.k8s.io/pause:3.10"})
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    status = drive(w, ready_pod, "the pause container Ready")
    pause = state(status, "pause")
    assert pause["image"] == "registry.k8s.io/pause:3.10" and "running" in pause["state"]
    assert pause["imageID"].startswith("registry.k8s.io/pause@sha256:") and len(pause["imageID"]) == 29 + 64
    state_file = runtime.root / "containers" / "img" / "pause" / "0" / "state.json"
    pid = int(orjson.loads(state_file.read_bytes())["pid"])
    # Ready comes as the process starts; its TERM handler is set a moment later (Python's start)
    wait_until("the pause process catching SIGTERM", lambda: _catches(pid, signal.SIGTERM), WAIT_S)
    w.pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    w.pod["metadata"]["deletionGracePeriodSeconds"] = 5
    # on the status, not on w.running(): the process may end between a sync and that check
    status = drive(w, lambda s: "terminated" in state(s, "pause")["state"], "the pause container stopped by SIGTERM")
    assert state(status, "pause")["state"]["terminated"]["exitCode"] == 0  # /pause exits 0 on TERM
    assert not w.running()


def test_a_container_without_a_working_dir_starts_in_the_root(runtime: ProcessRuntime) -> None:
    """Kube starts it in the image's WORKDIR (/ for busybox), not in the kubelet's working dir:
    conformance's `touch checkfile` wrote into the directory `raftkube up` ran in."""
    w = PodWorker(pod("cwd", sh("app", "pwd"), restartPolicy="Never"), runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "terminated" in state(s, "app")["state"], "the container to end")
    run = runtime.seen("cwd", "app")
    assert run is not None and [e.text for e in containerlog.read(Path(run.log))] == [b"/"]


def _catches(pid: int, sig: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


def test_an_unknown_image_without_a_command_backs_off_its_pull(runtime: ProcessRuntime) -> None:
    p = pod("pull", {"name": "app", "image": "example.com/app:1"})
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    waits = []
    for now in (1000.0, 1001.0, 1009.0, 1010.5, 1011.0, 1030.0, 1031.0):
        waits.append(state(w.sync(now), "app")["state"]["waiting"])
    reasons = [x["reason"] for x in waits]
    # 10 s, then 20 s between attempts: ErrImagePull at each, ImagePullBackOff between
    assert reasons == [
        "ErrImagePull",
        "ImagePullBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
    ]
    assert "kubelets.images in cluster.toml" in waits[0]["message"]
    assert waits[1]["message"].startswith('Back-off pulling image "example.com/app:1": ErrImagePull: ')
    assert runtime.seen("pull", "app") is None  # nothing ran


def test_an_unknown_image_with_a_command_runs_it(runtime: ProcessRuntime) -> None:
    p = pod("cmd", {"name": "app", "image": "example.com/app:1", "command": ["sleep"], "args": ["30"]})
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    status = drive(w, ready_pod, "the command running")
    assert "running" in state(status, "app")["state"]


def test_a_new_pods_containers_see_its_addresses_through_the_downward_api(
    runtime: ProcessRuntime, tmp_path: Path
) -> None:
    """A pod just scheduled has no status yet; its containers still get the IPs the kubelet will
    report (conformance "Downward API should provide pod name, namespace and IP address")."""
    out = tmp_path / "env"
    env = [
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
        {"name": "POD_IPS", "valueFrom": {"fieldRef": {"fieldPath": "status.podIPs"}}},
    ]
    app = sh("app", f'echo "$POD_IP $HOST_IP $POD_IPS" > {out}; exec sleep 30', env=env)
    w = PodWorker(pod("d", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    assert "status" not in w.pod
    drive(w, lambda s: "running" in state(s, "app")["state"], "the container running")
    written = wait_until("the container's line", lambda: out.exists() and out.read_text().strip(), WAIT_S)
    assert written.split() == ["127.0.0.1", "127.0.0.1", "127.0.0.1"]


def test_containers_not_created_in_a_pod_with_init_containers_wait_in_pod_initializing(
    runtime: ProcessRuntime,
) -> None:
    """kube's default waiting reason with init containers is PodInitializing, for the init
    containers not run yet too, and it stays so when a failed init container ends the pod
    (conformance "InitContainer should not start app containers and fail the pod if init
    containers fail on a RestartNever pod" checks it on every status it sees)."""
    p = pod("i", sh("run1", "true"), inits=(sh("init1", "false"), sh("init2", "true")), restartPolicy="Never")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    seen = [w.sync(time.time())]
    seen.append(drive(w, lambda s: s["phase"] == "Failed", "the pod Failed"))
    for status in seen:
        assert state(status, "run1")["state"] == {"waiting": {"reason": "PodInitializing"}}
        assert state(status, "init2", "initContainerStatuses")["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert state(seen[-1], "init1", "initContainerStatuses")["state"]["terminated"]["exitCode"] == 1


def test_variables_in_the_command_and_args_are_the_containers(runtime: ProcessRuntime, tmp_path: Path) -> None:
    """kube expands `$(VAR)` in command and args with the container's environment before the
    runtime runs them (conformance "Variable Expansion should allow substituting values in a
    container's command/args"); `$$(VAR)` stays literal, an unknown name stays as written."""
    out = tmp_path / "line"
    app = {
        "name": "app",
        "image": "busybox",
        "command": ["sh", "-c"],
        # single quotes: what the shell gets is printed as it is (no command substitution)
        "args": [f"echo '$(TEST_VAR) $$(TEST_VAR) $(NOT_SET)' > {out}; exec sleep 30"],
        "env": [{"name": "TEST_VAR", "value": "test-value"}],
    }
    w = PodWorker(pod("v", app), runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "the container running")
    written = wait_until("the container's line", lambda: out.exists() and out.read_text().strip(), WAIT_S)
    assert written == "test-value $(TEST_VAR) $(NOT_SET)"


def test_a_container_runs_as_its_security_contexts_user_and_groups(runtime: ProcessRuntime) -> None:
    """conformance "Security Context should support pod.Spec.SecurityContext.RunAsUser And
    RunAsGroup": `id` inside prints what the pod asked; runAsNonRoot without a user is refused."""
    app = sh("app", "id; exec sleep 30")
    w = PodWorker(
        pod("s", app, securityContext={"runAsUser": 1001, "runAsGroup": 2002, "supplementalGroups": [3003]}),
        runtime,
        NO_SOURCES,
        host_ip="127.0.0.1",
    )
    drive(w, lambda s: "running" in state(s, "app")["state"], "the container running")

    def printed() -> str:
        run = runtime.seen("s", "app")
        lines = containerlog.read(Path(run.log)) if run is not None and run.log else []
        return b"".join(e.text for e in lines if e.stream == "stdout").decode()

    written = wait_until("the container's id", printed, WAIT_S)
    assert written.startswith("uid=1001 gid=2002") and "3003" in written, written
    refused = PodWorker(
        pod("r", sh("app", "true"), securityContext={"runAsNonRoot": True}), runtime, NO_SOURCES, host_ip="127.0.0.1"
    )
    status = refused.sync(time.time())
    waiting = state(status, "app")["state"]["waiting"]
    assert waiting["reason"] == "CreateContainerConfigError"
    assert waiting["message"].startswith("container has runAsNonRoot and image will run as root")


def test_a_pod_past_its_active_deadline_is_killed_and_failed(runtime: ProcessRuntime) -> None:
    """kube's activeDeadlineHandler (conformance "Pods should allow activeDeadlineSeconds to be
    updated"): the deadline is read at each sync, so shortening it on a running pod counts."""
    p = pod("dl", sh("app", "exec sleep 30"), restartPolicy="Always", terminationGracePeriodSeconds=1)
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, lambda s: "running" in state(s, "app")["state"], "the container running")
    w.pod["spec"]["activeDeadlineSeconds"] = 1  # the pod's update, as the kubelet hands it over
    status = drive(w, lambda s: s["phase"] == "Failed" and "terminated" in state(s, "app")["state"], "killed")
    assert (status["reason"], status["message"]) == (
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    time.sleep(0.3)
    assert "terminated" in state(w.sync(time.time()), "app")["state"]  # never started again


def test_an_ephemeral_container_runs_in_a_running_pod_never_probed_nor_ready(runtime: ProcessRuntime) -> None:
    p = pod("eph", sh("app", "exec sleep 30"), restartPolicy="Always")
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1")
    drive(w, ready_pod, "the pod Ready")
    failing = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}
    debugger = sh("debugger", "echo polo; exec sleep 30", readinessProbe=failing, stdin=True, tty=True)
    w.pod = {**p, "spec": {**p["spec"], "ephemeralContainers": [debugger]}}
    status = drive(w, lambda s: "running" in state(s, "debugger", "ephemeralContainerStatuses")["state"], "running")
    seen = state(status, "debugger", "ephemeralContainerStatuses")
    assert seen["ready"] is False and "started" not in seen and seen["restartCount"] == 0
    assert seen["image"] == "busybox" and seen["containerID"].endswith("/debugger/0")
    assert [s["name"] for s in status["containerStatuses"]] == ["app"] and ready_pod(status)
    assert all(name != "debugger" for name, _, _ in w.due_probes(time.time() + 60))  # its probe is dropped
    assert "debugger" in w.container_names() and runtime.exec_context("eph", "debugger") is not None

    def logged() -> bool:  # what `kubectl logs -c debugger` reads
        run = runtime.seen("eph", "debugger")
        return run is not None and any(e.text == b"polo" for e in containerlog.read(Path(run.log)))

    wait_until("the ephemeral container's log", logged)
    w.pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    drive(w, lambda s: not w.running(), "every container stopped, the ephemeral one too")


def test_an_ephemeral_container_that_exits_is_never_restarted(runtime: ProcessRuntime) -> None:
    p = pod("eph2", sh("app", "exec sleep 30"), restartPolicy="Always")
    p["spec"]["ephemeralContainers"] = [sh("debugger", "exit 3")]
    w = PodWorker(p, runtime, NO_SOURCES, host_ip="127.0.0.1", backoff=CrashBackOff(initial=0.1, cap=0.1))
    status = drive(w, lambda s: "terminated" in state(s, "debugger", "ephemeralContainerStatuses")["state"], "exited")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:  # ten back-offs' time: a restartable container would have restarted
        status = w.sync(time.time())
        time.sleep(0.05)
    seen = state(status, "debugger", "ephemeralContainerStatuses")
    assert seen["state"]["terminated"]["exitCode"] == 3 and seen["restartCount"] == 0 and seen["ready"] is False
    assert runtime.attempts("eph2", "debugger") == [0]
    assert status["phase"] == "Running"


def test_a_container_sees_its_pods_hostname_and_a_host_network_pod_the_nodes(runtime: ProcessRuntime) -> None:
    """kube's runtimes give a pod's containers its hostname (agnhost serve-hostname answers with
    it); a hostNetwork pod keeps the node's."""
    w = PodWorker(pod("uts", sh("app", "hostname; sleep 30")), runtime, NO_SOURCES, host_ip="127.0.0.1")
    named = pod("uts2", sh("app", "hostname; sleep 30"), hostname="db-0")
    w2 = PodWorker(named, runtime, NO_SOURCES, host_ip="127.0.0.1")
    host = pod("uts3", sh("app", "hostname; sleep 30"), hostNetwork=True)
    w3 = PodWorker(host, runtime, NO_SOURCES, host_ip="127.0.0.1")

    def said(uid: str) -> str:
        run = runtime.seen(uid, "app")
        return b"".join(e.text for e in containerlog.read(Path(run.log))).decode() if run and run.log else ""

    for worker, uid, want in ((w, "uts", "p-uts"), (w2, "uts2", "db-0"), (w3, "uts3", socket.gethostname())):
        drive(worker, lambda s, uid=uid: bool(said(uid)), f"{uid}'s hostname")
        assert said(uid) == want


def test_exec_runs_a_command_as_the_containers_image_would() -> None:
    """`kubectl exec` of a busybox image's applet runs busybox with the applet's name; a command
    the image table does not know runs as given."""
    p = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "b", "image": "busybox"}, {"name": "x", "image": "example.com/none"}]},
    }
    w = PodWorker(p, FakeRuntime(), NO_SOURCES, host_ip="127.0.0.1")
    argv, executable = w.exec_program("b", ["nslookup", "kubernetes.default"])
    assert argv == ["nslookup", "kubernetes.default"] and executable.endswith("busybox")
    assert w.exec_program("x", ["/bin/echo", "hi"]) == (["/bin/echo", "hi"], "")
    assert w.exec_program("missing", ["true"]) == (["true"], "")
