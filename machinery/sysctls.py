"""Pod sysctls (`spec.securityContext.sysctls`): which are safe, which namespace each lives in,
and where the kernel shows it.  Shared by PodSecurity's baseline check (the apiserver) and the
kubelet that sets them, so that both judge a name the same way.

Kube writes a name with dots (`kernel.shm_rmid_forced`) or with slashes
(`net/ipv4/conf/eth0.100/rp_filter`, where a dot is part of a segment).  `dotted` brings the
second form to the first by swapping the two separators, as kube's
ConvertSysctlVariableToDotsSeparator does; `proc_path` swaps them back into a path under
/proc/sys.

The safe set is kube's (pkg/kubelet/sysctl/safe_sysctls.go): sysctls that live in a pod's own
namespace and cannot hurt the node or other pods.  It grew with kube versions, which
PodSecurity's versioned check needs.  A namespaced sysctl affects only the pod when the pod has
that namespace of its own: `kernel.shm*`, `kernel.msg*`, `kernel.sem` and `fs.mqueue.*` the
pod's IPC namespace, `net.*` its network namespace; any other changes the whole node.
"""

from __future__ import annotations

from typing import Literal

SAFE_1_0 = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    }
)
SAFE_1_27 = SAFE_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SAFE_1_29 = SAFE_1_27 | {
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SAFE_1_32 = SAFE_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}
SAFE = SAFE_1_32  # what this kubelet (kube 1.33) allows without --allowed-unsafe-sysctls

Namespace = Literal["ipc", "net"]
_IPC_NAMES = frozenset({"kernel.sem"})
_PREFIXES: tuple[tuple[str, Namespace], ...] = (
    ("kernel.shm", "ipc"),
    ("kernel.msg", "ipc"),
    ("fs.mqueue.", "ipc"),
    ("net.", "net"),
)


def dotted(name: str) -> str:
    """`name` with dots as its separator: a name whose first separator is a slash has its
    slashes and dots swapped (`net/ipv4/conf/eth0.100/rp_filter` ->
    `net.ipv4.conf.eth0/100.rp_filter`); a dotted name is returned as it is."""
    first = next((c for c in name if c in "./"), ".")
    return name.translate(str.maketrans("./", "/.")) if first == "/" else name


def proc_path(name: str) -> str:
    """Where the kernel shows sysctl `name` (either form): /proc/sys and its segments."""
    return "/proc/sys/" + dotted(name).translate(str.maketrans("./", "/."))


def namespace_of(name: str) -> Namespace | None:
    """The namespace sysctl `name` lives in (None: the node's, shared by every pod)."""
    name = dotted(name)
    if name in _IPC_NAMES:
        return "ipc"
    return next((ns for prefix, ns in _PREFIXES if name.startswith(prefix)), None)


def is_safe(name: str) -> bool:
    return dotted(name) in SAFE
