"""A pod's own IPC namespace and its sysctls, with real namespaces (the kubelet tests run as
root): the containers of a pod share one IPC namespace that is not the host's, a safe IPC
sysctl is set there and not on the node, the namespace goes with the pod's directory, and a
sysctl that is unsafe or would change the node is the container's StartError naming it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from components.kubelet import containerlog, podipc, sandbox, tmpfs
from components.kubelet.process_runtime import ProcessRuntime
from tests.support.wait import until

SHM_RMID_FORCED = Path("/proc/sys/kernel/shm_rmid_forced")


def output(runtime: ProcessRuntime, uid: str, name: str) -> bytes:
    run = runtime.seen(uid, name)
    if run is None or not run.log or not Path(run.log).exists():
        return b""
    return b"".join(e.text + b"\n" for e in containerlog.read(Path(run.log)))


def test_a_pods_containers_share_an_ipc_namespace_of_their_own_with_its_sysctl(runtime: ProcessRuntime) -> None:
    host_value = SHM_RMID_FORCED.read_text()
    assert host_value.strip() == "0", "the test wants a node whose kernel.shm_rmid_forced is 0"
    pod_dir = runtime.root / "pods" / "i1"
    ipcns = podipc.ensure(pod_dir)
    assert podipc.ensure(pod_dir) == ipcns  # made once: a second sync (a kubelet restart) keeps it
    box = sandbox.Sandbox(ipcns=ipcns, sysctls=(("kernel/shm_rmid_forced", "1"),))
    script = "readlink /proc/self/ns/ipc; cat /proc/sys/kernel/shm_rmid_forced; sleep 30"
    for name in ("a", "b"):
        runtime.start("ns", "p", "i1", name, ["sh", "-c", script], {"PATH": "/bin:/usr/bin"}, sandbox=box)
    seen = {
        n: until(f"{n}'s output", lambda n=n: (o := output(runtime, "i1", n)).count(b"\n") >= 2 and o) for n in "ab"
    }
    host_ns = os.readlink("/proc/self/ns/ipc").encode()
    assert seen["a"] == seen["b"]
    namespace, value = seen["a"].split(b"\n")[:2]
    assert namespace.startswith(b"ipc:[") and namespace != host_ns and value == b"1"
    assert SHM_RMID_FORCED.read_text() == host_value  # the node's is untouched
    pid = until("a running", lambda: runtime.main_pid("i1", "a"))
    assert os.readlink(f"/proc/{pid}/ns/ipc").encode() == namespace
    for name in ("a", "b"):
        runtime.stop("i1", name, 0.0, 0.0)
    tmpfs.remove(pod_dir)  # as the pod's removal does: the namespace's mount first
    assert not os.path.lexists(pod_dir)
    assert ipcns not in Path("/proc/self/mountinfo").read_text()


@pytest.mark.parametrize(
    ("box", "words"),
    [
        (sandbox.Sandbox(sysctls=(("kernel.msgmax", "1"),)), "kernel.msgmax: forbidden sysctl"),
        (sandbox.Sandbox(sysctls=(("kernel.shm_rmid_forced", "1"),)), "no IPC namespace of its own"),
        (sandbox.Sandbox(sysctls=(("net.ipv4.tcp_syncookies", "1"),)), 'pod_network = "netns"'),
    ],
)
def test_a_sysctl_that_cannot_be_the_pods_alone_is_a_start_error_naming_it(
    runtime: ProcessRuntime, box: sandbox.Sandbox, words: str
) -> None:
    runtime.start("ns", "p", "i2", "c", ["true"], {"PATH": "/bin"}, sandbox=box)
    run = until("the start error", lambda: (s := runtime.seen("i2", "c")) is not None and not s.running and s)
    assert (run.reason, run.exit_code) == ("StartError", 128)
    assert "spec.securityContext.sysctls" in run.message and words in run.message, run.message
