"""Sysctl names: the two spellings, the namespaces, the safe set (shared by PodSecurity and the
kubelet)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from machinery import sysctls


def test_a_slashed_name_swaps_its_separators_as_kube_does() -> None:
    assert sysctls.dotted("kernel.shm_rmid_forced") == "kernel.shm_rmid_forced"
    assert sysctls.dotted("kernel/shm_rmid_forced") == "kernel.shm_rmid_forced"
    assert sysctls.dotted("net/ipv4/conf/eth0.100/rp_filter") == "net.ipv4.conf.eth0/100.rp_filter"
    assert sysctls.proc_path("net.ipv4.conf.eth0/100.rp_filter") == "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"
    assert sysctls.proc_path("net/ipv4/conf/eth0.100/rp_filter") == "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"


def test_each_sysctl_lives_in_the_namespace_kube_says() -> None:
    for name in ("kernel.shm_rmid_forced", "kernel.shmmax", "kernel.msgmax", "kernel.sem", "fs.mqueue.msg_max"):
        assert sysctls.namespace_of(name) == "ipc", name
    assert sysctls.namespace_of("net.ipv4.ip_local_port_range") == "net"
    assert sysctls.namespace_of("net/ipv4/tcp_syncookies") == "net"
    for name in ("kernel.semx", "vm.swappiness", "kernel.hostname", "fs.file-max"):
        assert sysctls.namespace_of(name) is None, name


def test_the_safe_set_is_kube_1_33s_and_each_safe_sysctl_is_namespaced() -> None:
    assert sysctls.is_safe("kernel.shm_rmid_forced") and sysctls.is_safe("kernel/shm_rmid_forced")
    assert sysctls.is_safe("net.ipv4.tcp_rmem")  # since 1.32
    assert not sysctls.is_safe("kernel.msgmax") and not sysctls.is_safe("kernel.shmmax")
    assert all(sysctls.namespace_of(name) is not None for name in sysctls.SAFE)
    assert sysctls.SAFE_1_0 < sysctls.SAFE_1_27 < sysctls.SAFE_1_29 < sysctls.SAFE_1_32 == sysctls.SAFE


@given(
    st.text(alphabet="abc_-", min_size=1, max_size=8),
    st.lists(st.text(alphabet="abc_-.", min_size=1, max_size=8), min_size=1, max_size=4),
)
def test_both_spellings_of_a_name_reach_the_same_file(first: str, rest: list[str]) -> None:
    """A slashed name (its first separator a slash; later segments may hold dots) is the path
    itself; kube's dotted form of it must lead back to the same file."""
    slashed = "/".join([first, *rest])
    assert sysctls.proc_path(slashed) == "/proc/sys/" + slashed
    assert sysctls.proc_path(sysctls.dotted(slashed)) == "/proc/sys/" + slashed
