"""Loading `cluster.toml`: the defaults every command starts from.

The settings a member runs with, and their defaults, are declared once in
store/server/config.py (`RaftSettings`, `MemberSettings`); this module adds the keys that
only the launcher uses (`StoreSettings`) and checks every value read from the file the same
way member.json is checked (machinery.process.config).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from machinery.process.config import ConfigError, SettingError, load_section
from store.server.config import MemberSettings, RaftSettings

__all__ = [
    "MemberSettings",
    "RaftSettings",
    "StoreSettings",
    "load_raft_settings",
    "load_store_settings",
]


HOSTS = ("local", "netns")


def _check_hosts(value: str) -> None:
    if value not in HOSTS:
        raise ValueError(f"must be {' or '.join(HOSTS)}, got {value!r}")


def _check_subnet(value: str) -> None:
    net = ipaddress.IPv4Network(value)  # ValueError says what is wrong
    if net.num_addresses < 32:
        raise ValueError(f"{value} is too small for the members (a /27 at least)")


@dataclass(frozen=True, kw_only=True)
class StoreSettings(MemberSettings):
    """The [store] section: how `raftkube store up` lays out and runs the members.

    The fields declared here are the launcher's own; the inherited ones (MemberSettings)
    and `raft` go into every member's member.json (see `member_settings`)."""

    members: int = field(default=3, metadata={"choices": (1, 3, 5)})
    data_dir: Path = Path(".raftkube")
    host: str = "127.0.0.1"
    client_port: int = field(default=2379, metadata={"max": 65535})
    """Member i (1-based) serves clients on client_port + 10000*(i-1), peers on +1, HTTP on +2
    (with hosts = "netns": every member on client_port, +1, +2 of its own address)."""
    hosts: str = field(default="local", metadata={"check": _check_hosts})
    """Where the members run: "local", every one on `host`; "netns" (root only), each on a host
    of its own, a network namespace with its own address of `hosts_subnet` on a bridge, as
    separate machines would be (machinery/process/hosts.py)."""
    hosts_subnet: str = field(default="10.77.0.0/24", metadata={"check": _check_subnet})
    """The LAN of hosts = "netns": the bridge holds its first address, member i its (10+i)th."""
    startup_timeout: float = 15.0
    """Seconds `store up` waits for a leader with every member healthy."""
    raft: RaftSettings = field(default_factory=RaftSettings)

    def member_settings(self) -> dict[str, Any]:
        """Every setting a member runs with, by MemberConfig field name: the member keys of
        [store] and all of [store.raft]."""
        out = {f.name: getattr(self, f.name) for f in fields(MemberSettings)}
        out.update({f.name: getattr(self.raft, f.name) for f in fields(RaftSettings)})
        return out


def load_store_settings(path: Path) -> StoreSettings:
    """The [store] section (and [store.raft]) of `path`, with defaults for what it leaves out."""
    values = load_section(StoreSettings, path, "store", tables=("raft",))
    return StoreSettings(**values, raft=load_raft_settings(path))


def load_raft_settings(path: Path) -> RaftSettings:
    """The [store.raft] section of `path`, with defaults for what it leaves out."""
    s = RaftSettings(**load_section(RaftSettings, path, "store.raft"))
    try:
        s.check()
    except SettingError as e:
        raise ConfigError(f"{path}: store.raft: {e}") from None
    return s
