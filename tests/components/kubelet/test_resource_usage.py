"""What the kubelet's /metrics/resource reports: /proc parsed (fixed text, and this machine's
own), a container's usage as its process tree's, the exposition in the kubelet's names."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from components.kubelet import resource_usage as ru


def test_a_stat_line_is_read_after_the_last_parenthesis_of_the_name() -> None:
    line = "42 (sh (weird) x) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 999 1000000 300 18446744073709551615"
    proc = ru.parse_proc_stat(line)
    assert proc == ru.Proc(ppid=7, ticks=300, rss_pages=300)
    assert ru.parse_proc_stat("garbage") is None
    assert ru.parse_proc_stat("1 (x) S") is None


@given(
    name=st.text(alphabet=st.characters(blacklist_characters="\n\x00"), max_size=16),
    ppid=st.integers(0, 2**22),
    utime=st.integers(0, 2**40),
    stime=st.integers(0, 2**40),
    rss=st.integers(0, 2**30),
)
def test_whatever_a_process_is_called_its_numbers_are_read(
    name: str, ppid: int, utime: int, stime: int, rss: int
) -> None:
    """A process names itself (prctl, argv[0]): spaces and parentheses in the name must not
    shift the fields read after it."""
    line = f"7 ({name}) S {ppid} 1 1 0 -1 0 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 5 100 {rss} 0\n"
    assert ru.parse_proc_stat(line) == ru.Proc(ppid, utime + stime, rss)


def test_the_hosts_busy_time_and_memory() -> None:
    stat = "cpu  100 20 30 1000 50 5 5 0 10 0\ncpu0 1 2 3 4 5 6 7 8 9 0\n"
    # user+nice+system+irq+softirq+steal (guest is inside user), not idle nor iowait
    assert ru.parse_cpu_line(stat) == (100 + 20 + 30 + 5 + 5 + 0) / ru.CLOCK_TICKS
    meminfo = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n"
    assert ru.parse_meminfo(meminfo) == 600 * 1024
    assert ru.parse_meminfo("MemTotal: 5 kB\n") == 0


def test_a_containers_usage_is_its_process_trees() -> None:
    procs = {
        10: ru.Proc(1, 100, 10),  # the container's main process
        11: ru.Proc(10, 50, 5),  # its child
        12: ru.Proc(11, 25, 1),  # and grandchild
        20: ru.Proc(1, 999, 999),  # another container's
    }
    usage = ru.tree_usage(10, procs)
    assert usage == ru.Usage(175 / ru.CLOCK_TICKS, 16 * ru.PAGE_SIZE)
    assert ru.tree_usage(99, procs) is None


def test_this_machines_processes_are_read_and_a_busy_tree_counts_up() -> None:
    busy = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'while True: pass']); p.wait()",
        ]
    )
    try:
        time.sleep(0.5)
        first = ru.tree_usage(busy.pid, ru.snapshot())
        time.sleep(1.0)
        second = ru.tree_usage(busy.pid, ru.snapshot())
        assert first is not None and second is not None
        assert second.cpu_seconds - first.cpu_seconds > 0.3  # the grandchild spins: its time counts
        assert second.memory_bytes > 1_000_000
        node = ru.node_usage()
        assert node.cpu_seconds > 0 and node.memory_bytes > 0
    finally:
        subprocess.run(["pkill", "-P", str(busy.pid)], check=False)
        busy.kill()
        busy.wait(timeout=10)


def test_the_exposition_has_the_kubelets_names_and_escaped_labels() -> None:
    text = ru.render(
        ru.Usage(12.5, 2048),
        [ru.ContainerSample("ns", 'p"1', "c", ru.Usage(1.25, 4096))],
        1700000000000,
    )
    assert "node_cpu_usage_seconds_total 12.500000 1700000000000\n" in text
    assert "node_memory_working_set_bytes 2048 1700000000000\n" in text
    assert 'container_cpu_usage_seconds_total{container="c",namespace="ns",pod="p\\"1"} 1.250000 1700000000000' in text
    assert 'container_memory_working_set_bytes{container="c",namespace="ns",pod="p\\"1"} 4096 1700000000000' in text


def test_snapshot_reads_a_proc_directory(tmp_path: Path) -> None:
    (tmp_path / "5").mkdir()
    (tmp_path / "5" / "stat").write_text("5 (x) S 1 5 5 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 1 1 9\n")
    (tmp_path / "self").mkdir()
    assert ru.snapshot(tmp_path) == {5: ru.Proc(1, 10, 9)}
