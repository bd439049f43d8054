"""The cgroup v2 file protocol the shim uses to limit one container run: find the hierarchy,
make the run's cgroup with its limits, move the container's process into it, read whether the
kernel OOM-killed in it, and remove it.

Layout: `<cgroup2 mount>/raftkube/<name>`, one cgroup per container run (the shim names it
`<pod uid>_<container>_<attempt>`).  The parent is the hierarchy's top as this process sees it,
not the shim's own cgroup: a cgroup that holds processes cannot hand controllers to children
(cgroup v2's no-internal-process rule), and the top is exempt from it, as kube's `kubepods` is.
`raftkube` itself holds no process, so it can pass `memory` and `cpu` on to the runs.

Every function takes the directories it touches as arguments, so the protocol can be exercised
against a temporary directory laid out like cgroupfs.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path

PARENT = "raftkube"
CPU_PERIOD_US = 100_000  # kube's CFS period
MIN_QUOTA_US = 1_000  # kube's smallest quota (1 ms a period), whatever the millicores
REMOVE_WAIT_S = 1.0  # how long the last processes get to leave once killed


def mount_point(mountinfo: str) -> Path | None:
    """Where the cgroup2 hierarchy is mounted, from `/proc/self/mountinfo` text; None: nowhere."""
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and len(fields) > 4 and right.split()[:1] == ["cgroup2"]:
            # mountinfo writes space, tab, newline and backslash as octal escapes
            return Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return None


def controllers(cgroup: Path) -> set[str]:
    """The controllers `cgroup` can hand to its children (empty when unreadable)."""
    try:
        return set((cgroup / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def write(path: Path, text: str) -> None:
    """One write of `text` into an existing interface file (cgroupfs takes each write whole)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enable(cgroup: Path, names: set[str]) -> None:
    """Let `cgroup`'s children use the controllers `names` (those not enabled yet)."""
    control = cgroup / "cgroup.subtree_control"
    missing = names - set(control.read_text().split())
    if missing:
        write(control, " ".join(f"+{n}" for n in sorted(missing)))


def cpu_max(millicores: int) -> str:
    """`cpu.max` for a cpu limit: a quota of that share of each period, as kube computes it."""
    return f"{max(MIN_QUOTA_US, millicores * CPU_PERIOD_US // 1000)} {CPU_PERIOD_US}"


def create(top: Path, name: str, memory: int | None, cpu_millicores: int | None) -> Path:
    """Make `top/raftkube/name` with its limits written; its path.  OSError when cgroup v2
    cannot do it here (no permission, controller missing or not delegable); then nothing of
    `name` is left behind."""
    needed = ({"memory"} if memory is not None else set()) | ({"cpu"} if cpu_millicores is not None else set())
    if not needed <= controllers(top):
        raise OSError(f"cgroup v2 at {top} lacks controllers {sorted(needed - controllers(top))}")
    enable(top, needed)
    parent = top / PARENT
    parent.mkdir(exist_ok=True)
    enable(parent, needed)
    cgroup = parent / name
    cgroup.mkdir()  # the kernel fills it with its interface files
    try:
        set_limits(cgroup, memory, cpu_millicores)
    except OSError:
        with contextlib.suppress(OSError):
            cgroup.rmdir()
        raise
    return cgroup


def set_limits(cgroup: Path, memory: int | None, cpu_millicores: int | None) -> None:
    """Write the limits into `cgroup`'s interface files (None: that one stays unlimited)."""
    if memory is not None:
        write(cgroup / "memory.max", str(memory))
        if (cgroup / "memory.swap.max").exists():  # swap accounting on: no swapping past the limit
            write(cgroup / "memory.swap.max", "0")
    if cpu_millicores is not None:
        write(cgroup / "cpu.max", cpu_max(cpu_millicores))


def join(cgroup: Path, pid: int) -> None:
    """Move process `pid` into `cgroup` (its children are born there)."""
    write(cgroup / "cgroup.procs", str(pid))


def oom_kills(cgroup: Path) -> int:
    """How many processes the kernel OOM-killed in `cgroup` (`memory.events`); 0 if unreadable."""
    try:
        text = (cgroup / "memory.events").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0


def remove(cgroup: Path, wait_s: float = REMOVE_WAIT_S) -> None:
    """Kill what is left in `cgroup` (`cgroup.kill`, Linux 5.14+: a container's processes go
    with it, as in kube) and remove it; one still busy after `wait_s` is left in place."""
    if (cgroup / "cgroup.kill").exists():
        with contextlib.suppress(OSError):
            write(cgroup / "cgroup.kill", "1")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)
