"""Running iproute2's `ip` (network namespaces, links, addresses, routes), for the kubelet's
pod network and for parts placed on hosts of their own (machinery/process/hosts.py).

One runner, so that every caller gets the same bounded wait and the same error: the command
and what `ip` said."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable

IP_TIMEOUT_S = 10.0
IFNAMSIZ = 15
"""The kernel's limit on an interface name (16 with its NUL)."""

RunIp = Callable[[list[str]], str]


class IpCommandError(Exception):
    """`ip` failed, was missing or hung; the message says which command and why."""


def run_ip(args: list[str]) -> str:
    """`ip ARGS`: its output, or IpCommandError with the command and what `ip` said."""
    try:
        done = subprocess.run(
            ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise IpCommandError("iproute2's `ip` command is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise IpCommandError(f"`ip {' '.join(args)}` did not finish within {IP_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        raise IpCommandError(f"`ip {' '.join(args)}` failed: {said}")
    return done.stdout


def link_exists(name: str) -> bool:
    """Whether the calling process's network namespace has an interface of that name.  Asked
    of the kernel through a socket (SIOCGIFINDEX), which answers for the caller's namespace, not
    through /sys/class/net, which shows the namespace /sys was mounted in (a process that
    entered a host's network namespace alone, as a node's kubelet does, sees the machine's)."""
    try:
        socket.if_nametoindex(name)
    except (OSError, ValueError):  # none such; a name no interface can have (a NUL in it)
        return False
    return True
