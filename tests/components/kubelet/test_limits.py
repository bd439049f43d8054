"""Container resource limits: the container spec's quantities read into the run's limits, real
containers of the process runtime held to a memory limit (on a host without usable cgroup v2,
as this one and CI are, that is the rlimit path, run for real), and the cgroup v2 file protocol
against a temporary directory laid out like cgroupfs.  Every wait is bounded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet import cgroupv2, containerlog, limits
from components.kubelet.process_runtime import ProcessRuntime, RunState
from components.kubelet.sandbox import Sandbox, child_preexec
from components.kubelet.shim import exit_reason
from tests.support.wait import until

UID = "u-limits"
WAIT_S = 20.0
MiB = 1024 * 1024


def with_limits(**quantities: Any) -> dict[str, Any]:
    return {"name": "c", "resources": {"limits": quantities, "requests": {"memory": "1Mi"}}}


# --- the container spec's limits -------------------------------------------------------------


@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (with_limits(memory="64Mi", cpu="500m"), {"memory": 64 * MiB, "cpu_millis": 500}),
        (with_limits(cpu="0.5"), {"cpu_millis": 500}),
        (with_limits(cpu=2, memory="1G"), {"cpu_millis": 2000, "memory": 10**9}),
        (with_limits(cpu="1m"), {"cpu_millis": 1}),
        (with_limits(memory="100.5"), {"memory": 101}),  # whole bytes, rounded up
        ({"name": "c"}, {}),  # no resources at all
        ({"name": "c", "resources": {}}, {}),
        ({"name": "c", "resources": {"requests": {"memory": "64Mi", "cpu": "1"}}}, {}),  # requests only
        (with_limits(memory="0", cpu="0"), {}),  # a zero limit is none, as in kube
    ],
)
def test_the_limits_of_a_container(container: dict[str, Any], expected: dict[str, int]) -> None:
    assert limits.of(container) == expected


@pytest.mark.parametrize(
    "container",
    [
        with_limits(memory="lots", cpu="fast"),
        with_limits(memory={"Mi": 64}, cpu=[1]),
        with_limits(memory=True, cpu=None),
        with_limits(memory="-64Mi", cpu="-1"),
        {"name": "c", "resources": "64Mi"},
        {"name": "c", "resources": {"limits": ["64Mi"]}},
    ],
)
def test_a_limit_that_makes_no_sense_is_left_out_not_a_crash(container: dict[str, Any]) -> None:
    assert limits.of(container) == {}


def test_limits_read_back_from_a_run_spec_are_checked() -> None:
    assert limits.rlimits({"memory": "64Mi"}) == []
    assert limits.rlimits({"memory": True}) == []
    assert limits.describe({"memory": -1, "cpu_millis": "1"}, None) == {"mechanism": "none"}
    assert limits.preexec({}, None) is None


# --- real containers under a memory limit ----------------------------------------------------


def allocate(mib: int) -> list[str]:
    """A container that writes `mib` MiB (touched, so it is resident under any mechanism)."""
    return [sys.executable, "-c", f"b = b'x' * ({mib} * 1024 * 1024); print(len(b))"]


def run(runtime: ProcessRuntime, name: str, argv: list[str], box: Sandbox | None) -> tuple[RunState, dict[str, Any]]:
    """Run a container to its end; its final state and what its state.json says of its limits."""
    runtime.start("ns", "p", UID, name, argv, {"PATH": "/usr/bin:/bin"}, sandbox=box)

    def finished() -> RunState | None:
        s = runtime.seen(UID, name)
        return s if s is not None and not s.running else None

    s = until(f"{name} to end", finished, WAIT_S)
    state = orjson.loads((runtime.root / "containers" / UID / name / "0" / "state.json").read_bytes())
    return s, state["limits"]


def logged(s: RunState) -> str:
    return "\n".join(e.text.decode() for e in containerlog.read(Path(s.log)))


def test_a_container_past_its_memory_limit_fails_and_one_within_it_runs(runtime: ProcessRuntime) -> None:
    box = Sandbox(limits=limits.of(with_limits(memory="64Mi", cpu="500m")))
    big, how = run(runtime, "big", allocate(200), box)
    assert big.exit_code != 0, logged(big)
    if how["mechanism"] == "cgroup2":  # a host with usable cgroup v2: the kernel's OOM killer
        assert (big.exit_code, big.reason) == (137, "OOMKilled")
    else:  # the allocation fails under RLIMIT_DATA
        assert how == {"mechanism": "rlimit", "notApplied": ["cpu"]}
        assert (big.exit_code, big.reason) == (1, "Error") and "MemoryError" in logged(big)
    small, how = run(runtime, "small", allocate(8), box)
    assert (small.exit_code, small.reason) == (0, "Completed"), logged(small)
    assert how["mechanism"] in {"cgroup2", "rlimit"}


def test_a_container_without_limits_allocates_freely(runtime: ProcessRuntime) -> None:
    s, how = run(runtime, "free", allocate(200), Sandbox())
    assert (s.exit_code, s.reason, how) == (0, "Completed", {"mechanism": "none"}), logged(s)
    assert logged(s).strip() == str(200 * MiB)


def test_the_rlimit_binds_the_container_not_its_shim(runtime: ProcessRuntime) -> None:
    """The container's parent is its shim: it reads both its own limits and the shim's."""
    show = "import os; print(open('/proc/self/limits').read(), open(f'/proc/{os.getppid()}/limits').read())"
    s, how = run(runtime, "show", [sys.executable, "-c", show], Sandbox(limits={"memory": 64 * MiB}))
    if how["mechanism"] != "rlimit":
        pytest.skip("this host enforces limits with cgroup v2")
    data = [line.split()[3:5] for line in logged(s).splitlines() if line.strip().startswith("Max data size")]
    assert data == [[str(64 * MiB)] * 2, ["unlimited"] * 2]


# --- the cgroup v2 file protocol ---------------------------------------------------------------


def fake_cgroup(directory: Path, controllers: str = "cpuset cpu io memory pids") -> Path:
    """A directory laid out as the kernel makes a cgroup v2 (its interface files, as a fresh
    cgroup has them)."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "cgroup.controllers": f"{controllers}\n",
        "cgroup.subtree_control": "\n",
        "cgroup.procs": "",
        "cgroup.kill": "",
        "memory.max": "max\n",
        "memory.swap.max": "max\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "cpu.max": "max 100000\n",
    }
    for name, text in files.items():
        (directory / name).write_text(text)
    return directory


MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_the_cgroup2_hierarchy_is_found_in_mountinfo() -> None:
    assert cgroupv2.mount_point(MOUNTINFO) == Path("/sys/fs/cgroup/unified")
    assert cgroupv2.mount_point("29 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n") == Path(
        "/sys/fs/cgroup"
    )
    assert cgroupv2.mount_point("29 1 0:26 / /mnt/my\\040cgroups rw - cgroup2 none rw\n") == Path("/mnt/my cgroups")
    assert cgroupv2.mount_point(MOUNTINFO.replace("cgroup2", "cgroup")) is None
    assert cgroupv2.mount_point("") is None


def test_cgroup_files_written_for_limits(tmp_path: Path) -> None:
    """Against a fake cgroupfs: cgroup v2 cannot run for real on this host (v1/hybrid)."""
    top = fake_cgroup(tmp_path / "top")
    cgroupv2.enable(top, {"memory", "cpu"})
    assert (top / "cgroup.subtree_control").read_text() == "+cpu +memory"
    run = fake_cgroup(top / cgroupv2.PARENT / "u_c_0")
    cgroupv2.set_limits(run, 64 * MiB, 500)
    assert (run / "memory.max").read_text() == str(64 * MiB)
    assert (run / "memory.swap.max").read_text() == "0"
    assert (run / "cpu.max").read_text() == "50000 100000"
    assert [cgroupv2.cpu_max(m) for m in (1, 10, 500, 2000)] == [
        "1000 100000",
        "1000 100000",
        "50000 100000",
        "200000 100000",
    ]


def test_a_missing_controller_means_no_cgroup_and_rlimits(tmp_path: Path) -> None:
    """Against a fake cgroupfs shaped as this host's v2 part (hugetlb only): nothing is created,
    and the limits fall back to rlimits."""
    top = fake_cgroup(tmp_path / "unified", controllers="hugetlb")
    with pytest.raises(OSError, match="memory"):
        cgroupv2.create(top, "u_c_0", 64 * MiB, None)
    assert not (top / cgroupv2.PARENT).exists()
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO.replace("/sys/fs/cgroup/unified", str(top)))
    box = {"memory": 64 * MiB, "cpu_millis": 500}
    assert limits.cgroup(box, "u_c_0", mountinfo) is None
    assert limits.describe(box, None) == {"mechanism": "rlimit", "notApplied": ["cpu"]}
    assert limits.cgroup({}, "u_c_0", mountinfo) is None


def test_the_container_process_joins_the_cgroup_not_its_parent(tmp_path: Path) -> None:
    """Against a fake cgroupfs: the pid written to cgroup.procs is the child's, from its preexec."""
    run = fake_cgroup(tmp_path / "raftkube" / "u_c_0")
    box = Sandbox(limits={"memory": 64 * MiB})
    child = subprocess.Popen(["true"], preexec_fn=child_preexec(box, None, 2, run))  # noqa: PLW1509
    assert child.wait(timeout=WAIT_S) == 0
    assert (run / "cgroup.procs").read_text() == str(child.pid)
    assert limits.describe(box.limits, run) == {"mechanism": "cgroup2", "cgroup": str(run)}


def test_oom_kills_are_read_and_the_cgroup_removed(tmp_path: Path) -> None:
    """Against a fake cgroupfs.  The kernel removes a cgroup's interface files with it; here the
    test deletes them before the directory can go."""
    run = fake_cgroup(tmp_path / "raftkube" / "u_c_0")
    assert cgroupv2.oom_kills(run) == 0
    (run / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert cgroupv2.oom_kills(run) == 1
    assert exit_reason(137, oom_killed=True) == "OOMKilled"
    assert (exit_reason(137), exit_reason(0)) == ("Error", "Completed")
    cgroupv2.remove(run, wait_s=0.0)  # still busy: what is left in it is killed, the cgroup stays
    assert (run / "cgroup.kill").read_text() == "1" and run.is_dir()
    for f in run.iterdir():
        f.unlink()
    assert limits.release(run) is False  # memory.events went with the files
    assert not run.exists()
    cgroupv2.remove(run)  # gone already: nothing to do
    assert cgroupv2.oom_kills(run) == 0 and limits.release(None) is False


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_quantity = st.sampled_from(["64Mi", "0", "-1", "1e3", "500m", "0.5", "1Ei", "12345678901234567890Ei", "x"]) | _json


_keys = st.sampled_from(["memory", "cpu"]) | st.text(max_size=6)
_resources = st.fixed_dictionaries({}, optional={"limits": st.dictionaries(_keys, _quantity, max_size=3) | _json})


@settings(max_examples=300, deadline=None)
@given(resources=_resources | _json)
def test_any_resources_give_positive_whole_limits_or_none(resources: Any) -> None:
    """Whatever a container spec carries, `of` never raises and gives only positive integers."""
    got = limits.of({"name": "c", "resources": resources})
    assert set(got) <= {"memory", "cpu_millis"}
    assert all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in got.values())
