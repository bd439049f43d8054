"""Kube's pod housekeeping: a kubelet that finds on disk a pod no longer bound to it (deleted
while it was down) kills that pod's containers and removes its runs, logs and volumes; the
pods still bound keep running.  Real processes; every wait bounded (the `runtime` fixture
kills what is left by pid)."""

from __future__ import annotations

import asyncio

from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import NodeConfig
from components.kubelet.process_runtime import ProcessRuntime
from tests.support.wait import until


def test_a_pod_no_longer_bound_is_killed_and_removed_and_a_bound_one_kept(runtime: ProcessRuntime) -> None:
    for uid in ("gone", "kept"):
        runtime.start("ns", f"p-{uid}", uid, "c", ["sleep", "30"], {"PATH": "/bin:/usr/bin"})
        (runtime.root / "pods" / uid / "volumes" / "scratch").mkdir(parents=True)
    (runtime.root / "pods" / "volumes-only" / "volumes").mkdir(parents=True)  # made, never started
    gone = until("the containers to run", lambda: runtime.main_pid("gone", "c"))
    until("the kept container to run", lambda: runtime.main_pid("kept", "c"))
    kubelet = Kubelet(None, NodeConfig("n", "127.0.0.1", 10250), runtime)  # type: ignore[arg-type]  # no apiserver here
    assert asyncio.run(kubelet.clean_up_orphans({"kept"})) == ["gone", "volumes-only"]
    until("the orphan's process to end", lambda: not _alive(gone))
    assert runtime.running_pods() == ["kept"] and runtime.main_pid("kept", "c")
    assert sorted(p.name for p in (runtime.root / "pods").iterdir()) == ["kept"]
    assert [p.name for p in (runtime.root / "logs").iterdir()] == ["ns_p-kept_kept"]
    assert asyncio.run(kubelet.clean_up_orphans({"kept"})) == []  # nothing left to clean


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
