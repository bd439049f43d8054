"""A `medium: Memory` emptyDir is a tmpfs mounted at the volume's directory (kube's emptyDir
plugin): of kube's size (its sizeLimit, the pod's memory limit, the node's allocatable memory,
whichever is least), mode 0777 (with tmpfs's sticky bit, as kube leaves it), never mounted twice
(a kubelet restart prepares it again), and taken off before every removal of a pod's directory
(the pod deleted, an orphan found at start, `raftkube down`), so no mount outlives its pod.  A
container sees tmpfs at its mountPath.  A bad sizeLimit or medium is refused naming the field.
Real mounts need root; every mount a test makes is taken off after it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.kubelet import tmpfs
from components.kubelet.envvars import Sources
from components.kubelet.kubelet import Kubelet
from components.kubelet.nodestatus import NodeConfig
from components.kubelet.podvolumes import PodVolumes
from components.kubelet.podworker import PodWorker
from components.kubelet.process_runtime import ProcessRuntime
from components.kubelet.volumes import VolumeError
from machinery.objects import Obj
from tests.components.kubelet.test_podvolumes import output, sh, sync_until

MiB = 1 << 20
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture(autouse=True)
def no_mount_left(tmp_path: Path) -> Iterator[None]:
    """Whatever a test leaves mounted under its directory is taken off (pytest's own cleanup
    would otherwise empty a live tmpfs and leave it mounted), and counted as a failure."""
    yield
    left = tmpfs.mount_points_under(tmp_path, tmpfs.MOUNTINFO.read_text())
    tmpfs.unmount_under(tmp_path)
    assert not left, f"mounts outlived the test: {left}"


def pod_with(empty_dir: Obj, limits: list[str | None] | None = None, uid: str = "t1") -> Obj:
    containers = [
        {"name": f"c{i}", "resources": {"limits": {"memory": m}} if m else {}} for i, m in enumerate(limits or [None])
    ]
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid},
        "spec": {"containers": containers, "volumes": [{"name": "cache", "emptyDir": empty_dir}]},
    }


def node(memory: str = "64Mi") -> Sources:
    return Sources(lambda ns, n: None, lambda ns, n: None, allocatable={"memory": memory})


def mounts_at(path: Path) -> list[tuple[str, str]]:
    """(filesystem type, its options) of every mount at `path`, as /proc/self/mountinfo has them."""
    out = []
    for line in tmpfs.MOUNTINFO.read_text().splitlines():
        left, _, right = line.partition(" - ")
        if left.split()[4] == str(path):
            fstype, _, options = right.split()
            out.append((fstype, options))
    return out


@root_only
def test_a_memory_empty_dir_is_one_tmpfs_of_its_size_limit_open_to_all_and_goes_with_the_pod(
    tmp_path: Path,
) -> None:
    pod = pod_with({"medium": "Memory", "sizeLimit": "3Mi"})
    volume = tmp_path / "pods" / "t1" / "volumes" / "cache"
    PodVolumes(volume.parent).sync(pod, node())
    assert [t for t, _ in mounts_at(volume)] == ["tmpfs"]
    assert "size=3072k" in mounts_at(volume)[0][1].split(",")
    fs = os.statvfs(volume)
    assert fs.f_blocks * fs.f_frsize == 3 * MiB
    assert volume.stat().st_mode & 0o7777 == 0o1777  # -rwxrwxrwx to agnhost (Go's Perm()), /tmp's sticky bit
    (volume / "data").write_bytes(b"x" * 1024)

    again = PodVolumes(volume.parent)  # a restarted kubelet prepares the volume again
    again.sync(pod, node())
    again.sync(pod, node())
    assert len(mounts_at(volume)) == 1  # not stacked: the pod's data is still what it sees
    assert (volume / "data").stat().st_size == 1024

    again.remove()
    assert mounts_at(volume) == []
    assert not (tmp_path / "pods" / "t1").exists()


@root_only
def test_a_tmpfs_too_small_for_a_write_refuses_it(tmp_path: Path) -> None:
    volume = tmp_path / "volumes" / "cache"
    pv = PodVolumes(volume.parent)
    pv.sync(pod_with({"medium": "Memory", "sizeLimit": "1Mi"}), node())
    with pytest.raises(OSError, match="No space left"), open(volume / "big", "wb") as f:
        f.write(b"x" * 2 * MiB)
        f.flush()
    pv.remove()


@pytest.mark.parametrize(
    ("empty_dir", "limits", "allocatable", "size"),
    [
        ({"medium": "Memory"}, [None], "64Mi", 64 * MiB),  # the node's allocatable memory
        ({"medium": "Memory"}, ["8Mi", "4Mi"], "64Mi", 12 * MiB),  # the pod's limit, every container limited
        ({"medium": "Memory"}, ["8Mi", None], "64Mi", 64 * MiB),  # one unlimited: the pod is not limited
        ({"medium": "Memory", "sizeLimit": "2Mi"}, ["8Mi"], "64Mi", 2 * MiB),  # the least wins
        ({"medium": "Memory", "sizeLimit": "1Ei"}, [None], "64Mi", 64 * MiB),  # more than the pod may use
        ({"medium": "Memory", "sizeLimit": "0"}, [None], "64Mi", 64 * MiB),  # 0: no limit, as kube reads it
        ({"medium": "Memory", "sizeLimit": "1500k"}, [None], "64Mi", 1_500_000),
        ({"medium": "Memory", "sizeLimit": "0.5"}, [None], "64Mi", 1),  # bytes round up
    ],
)
def test_the_size_is_kubes(empty_dir: Obj, limits: list[str | None], allocatable: str, size: int) -> None:
    pod = pod_with(empty_dir, limits)
    assert tmpfs.size_of(empty_dir, pod, {"memory": allocatable}, "spec.volumes[0].emptyDir") == size


def test_without_a_known_allocatable_the_nodes_memory_bounds_the_size() -> None:
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert tmpfs.size_of({"sizeLimit": "1Ei"}, pod_with({}), {}, "v") == physical


@pytest.mark.parametrize(
    ("empty_dir", "message"),
    [
        ({"medium": "Memory", "sizeLimit": "-1Mi"}, r"emptyDir\.sizeLimit: must be greater than or equal to 0"),
        ({"medium": "Memory", "sizeLimit": "lots"}, r"emptyDir\.sizeLimit: quantities must match"),
        ({"medium": "Memory", "sizeLimit": {"a": 1}}, r"emptyDir\.sizeLimit: quantities must match"),
        ({"medium": "Memory", "sizeLimit": True}, r"emptyDir\.sizeLimit: quantities must match"),
        ({"sizeLimit": "-1"}, r"emptyDir\.sizeLimit: must be greater than or equal to 0"),  # any medium
        ({"medium": "HugePages"}, r"emptyDir\.medium: unsupported value 'HugePages'"),
        ({"medium": "Disk"}, r"emptyDir\.medium: unsupported value 'Disk'"),
        ("Memory", r"emptyDir: must be an object"),
    ],
)
def test_a_bad_empty_dir_is_refused_naming_the_field_and_nothing_is_mounted(
    tmp_path: Path, empty_dir: Any, message: str
) -> None:
    with pytest.raises(VolumeError, match=r"^spec\.volumes\[0\]\." + message):
        PodVolumes(tmp_path / "volumes").sync(pod_with(empty_dir), node())
    assert not (tmp_path / "volumes" / "cache").exists()


def test_a_kubelet_that_may_not_mount_keeps_a_directory(tmp_path: Path) -> None:
    volume = tmp_path / "volumes" / "cache"
    PodVolumes(volume.parent, mounts_tmpfs=False).sync(pod_with({"medium": "Memory"}), node())
    assert volume.is_dir() and mounts_at(volume) == []
    assert volume.stat().st_mode & 0o777 == 0o777


@root_only
def test_an_orphans_tmpfs_is_taken_off_before_its_directory_goes(runtime: ProcessRuntime) -> None:
    volume = runtime.root / "pods" / "orphan" / "volumes" / "cache"
    PodVolumes(volume.parent).sync(pod_with({"medium": "Memory"}, uid="orphan"), node())
    (volume / "data").write_text("kept in memory")
    kubelet = Kubelet(None, NodeConfig("n", "127.0.0.1", 10250), runtime)  # type: ignore[arg-type]  # no apiserver here
    assert asyncio.run(kubelet.clean_up_orphans(set())) == ["orphan"]
    assert mounts_at(volume) == [] and not (runtime.root / "pods" / "orphan").exists()


@root_only
def test_down_takes_every_pods_tmpfs_off(runtime: ProcessRuntime) -> None:
    volumes = [runtime.root / "pods" / uid / "volumes" / "cache" for uid in ("a", "b")]
    for volume in volumes:
        PodVolumes(volume.parent).sync(pod_with({"medium": "Memory"}, uid=volume.parts[-3]), node())
    runtime.stop_all(grace_s=0.0, timeout_s=1.0)
    assert all(mounts_at(v) == [] and v.is_dir() for v in volumes)  # the directories stay for the next start


@root_only
def test_a_container_sees_tmpfs_at_its_mount_path(runtime: ProcessRuntime, tmp_path: Path) -> None:
    mount = "/tmp/raftkube-tmpfs-" + tmp_path.name[-10:]
    app = sh("app", f"stat -f -c 'type=%T' {mount}; sleep 30", [{"name": "cache", "mountPath": mount}])
    pod = pod_with({"medium": "Memory", "sizeLimit": "2Mi"}, uid="run1")
    pod["spec"]["containers"] = [app]
    pv = PodVolumes(runtime.root / "pods" / "run1" / "volumes")
    w = PodWorker(pod, runtime, node(), "127.0.0.1", volumes=pv)
    sync_until(w, "the container to say its mount's type", lambda: b"type=" in output(runtime, "run1", "app"))
    assert b"type=tmpfs" in output(runtime, "run1", "app")
    assert not os.path.lexists(mount)  # the mount point was made inside the container's namespace
    pv.remove()  # the pod deleted (its container still running: the detached mount goes with it)
    assert mounts_at(pv.base / "cache") == []
