"""What the node and each running container use now, as the kubelet's `/metrics/resource`
tells it (the endpoint metrics-server scrapes; metrics.k8s.io and `kubectl top` come from it).

Containers are processes here, so a container's usage is its main process's tree: CPU seconds
(user + system, of the live processes) and resident memory (kube reports the working set:
the pages a container would keep under pressure, which RSS stands for when there is no
cgroup to read).  The node's is the host's: all CPU time but idle and iowait from /proc/stat,
and MemTotal - MemAvailable from /proc/meminfo (every kubelet on one machine reports the same
host, as nodes that share hardware would).

One pass over /proc per scrape reads every process's parent, CPU ticks and resident pages;
each container's tree is then summed from that table.  The parsing is pure (text in, numbers
out), so it is tested on fixed text; `snapshot` is the one place that reads /proc.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
MAX_TREE = 4096
"""Processes summed into one container at most (a fork bomb's tree is not walked whole)."""


@dataclass(frozen=True)
class Usage:
    cpu_seconds: float
    """CPU time since start, cumulative (a counter: a rate comes from two readings)."""
    memory_bytes: int
    """Working set now."""


@dataclass(frozen=True)
class Proc:
    ppid: int
    ticks: int  # utime + stime
    rss_pages: int


def parse_proc_stat(text: str) -> Proc | None:
    """/proc/<pid>/stat: the parent, user + system ticks and resident pages (None if malformed).
    The command name (field 2) may hold spaces and parentheses: fields are counted after its
    last `)`."""
    close = text.rfind(")")
    fields = text[close + 2 :].split() if close >= 0 else []
    try:  # after the name: state(3) ppid(4) ... utime(14) stime(15) ... rss(24)
        return Proc(int(fields[1]), int(fields[11]) + int(fields[12]), max(0, int(fields[21])))
    except (IndexError, ValueError):
        return None


def parse_cpu_line(text: str) -> float:
    """Busy CPU seconds of the host from /proc/stat's first line (all but idle and iowait)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:] if v.isdigit()]
            idle = sum(values[3:5])  # idle, iowait
            guest = sum(values[8:10])  # guest time is already counted in user
            return (sum(values) - idle - guest) / CLOCK_TICKS
    return 0.0


def parse_meminfo(text: str) -> int:
    """MemTotal - MemAvailable, in bytes (0 when either is missing)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if key in ("MemTotal", "MemAvailable") and words and words[0].isdigit():
            found[key] = int(words[0]) * 1024
    return max(0, found["MemTotal"] - found["MemAvailable"]) if len(found) == 2 else 0


def tree_usage(root: int, procs: Mapping[int, Proc]) -> Usage | None:
    """The usage of `root` and its descendants in `procs` (None: `root` is not running)."""
    if root not in procs:
        return None
    children: dict[int, list[int]] = {}
    for pid, proc in procs.items():
        children.setdefault(proc.ppid, []).append(pid)
    ticks = pages = 0
    todo, seen = [root], 0
    while todo and seen < MAX_TREE:
        pid = todo.pop()
        seen += 1
        ticks += procs[pid].ticks
        pages += procs[pid].rss_pages
        todo += children.get(pid, ())
    return Usage(ticks / CLOCK_TICKS, pages * PAGE_SIZE)


def snapshot(proc_dir: Path = Path("/proc")) -> dict[int, Proc]:
    """Every process's parent, CPU ticks and resident pages now (those that vanish are skipped)."""
    out: dict[int, Proc] = {}
    for entry in os.scandir(proc_dir):
        if not entry.name.isdigit():
            continue
        try:
            parsed = parse_proc_stat(Path(entry.path, "stat").read_text())
        except OSError:
            continue
        if parsed is not None:
            out[int(entry.name)] = parsed
    return out


def node_usage(proc_dir: Path = Path("/proc")) -> Usage:
    try:
        return Usage(parse_cpu_line((proc_dir / "stat").read_text()), parse_meminfo((proc_dir / "meminfo").read_text()))
    except OSError:
        return Usage(0.0, 0)


# -- the exposition ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerSample:
    namespace: str
    pod: str
    container: str
    usage: Usage


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(node: Usage, containers: Iterable[ContainerSample], now_ms: int) -> str:
    """Prometheus text exposition with the kubelet's metric names, each sample timestamped."""
    lines = [
        "# HELP node_cpu_usage_seconds_total Cumulative cpu time consumed by the node in core-seconds",
        "# TYPE node_cpu_usage_seconds_total counter",
        f"node_cpu_usage_seconds_total {node.cpu_seconds:.6f} {now_ms}",
        "# HELP node_memory_working_set_bytes Current working set of the node in bytes",
        "# TYPE node_memory_working_set_bytes gauge",
        f"node_memory_working_set_bytes {node.memory_bytes} {now_ms}",
    ]
    samples = list(containers)
    cpu = ["# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed by the container in core-seconds"]
    cpu.append("# TYPE container_cpu_usage_seconds_total counter")
    memory = ["# HELP container_memory_working_set_bytes Current working set of the container in bytes"]
    memory.append("# TYPE container_memory_working_set_bytes gauge")
    for s in samples:
        labels = f'container="{_label(s.container)}",namespace="{_label(s.namespace)}",pod="{_label(s.pod)}"'
        cpu.append(f"container_cpu_usage_seconds_total{{{labels}}} {s.usage.cpu_seconds:.6f} {now_ms}")
        memory.append(f"container_memory_working_set_bytes{{{labels}}} {s.usage.memory_bytes} {now_ms}")
    return "\n".join([*lines, *cpu, *memory]) + "\n"
