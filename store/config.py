"""Loading `cluster.toml`: the defaults every command starts from."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ConfigError(Exception):
    """cluster.toml is missing, unreadable, or has a value of the wrong kind."""


@dataclass(frozen=True)
class RaftSettings:
    tick_ms: int = 100
    heartbeat_ticks: int = 1
    election_ticks: int = 10
    max_size_per_msg: int = 1 << 20
    max_inflight_msgs: int = 256
    pre_vote: bool = True
    check_quorum: bool = True


@dataclass(frozen=True)
class StoreSettings:
    """The [store] section: how `raftkube store up` lays out and runs the members."""

    members: int = 3
    data_dir: Path = Path(".raftkube")
    host: str = "127.0.0.1"
    client_port: int = 2379
    """Member i (1-based) serves clients on client_port + 10000*(i-1), peers on +1, HTTP on +2."""
    snapshot_count: int = 100_000
    snapshot_catchup_entries: int = 5_000
    request_timeout: float = 5.0
    startup_timeout: float = 15.0
    fsync: bool = True
    raft: RaftSettings = RaftSettings()


def _typed(section: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = section.get(key, default)
    if kind is int and isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}.{key} must be {kind.__name__}, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        raise ConfigError(f"{where}.{key} must be positive, got {value}")
    return value


def _load(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such file") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def load_store_settings(path: Path) -> StoreSettings:
    """The [store] section (and [store.raft]) of `path`, with defaults for what it leaves out."""
    doc = _load(path)
    section = doc.get("store", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [store] must be a table")
    where = f"{path}: store"
    known = set(StoreSettings.__dataclass_fields__)
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}")
    d = StoreSettings()
    members = _typed(section, "members", int, d.members, where)
    if members not in (1, 3, 5):
        raise ConfigError(f"{where}.members must be 1, 3 or 5, got {members}")
    timeout = section.get("request_timeout", d.request_timeout)
    startup = section.get("startup_timeout", d.startup_timeout)
    for key, value in (("request_timeout", timeout), ("startup_timeout", startup)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"{where}.{key} must be a positive number of seconds, got {value!r}")
    return StoreSettings(
        members=members,
        data_dir=Path(_typed(section, "data_dir", str, str(d.data_dir), where)),
        host=_typed(section, "host", str, d.host, where),
        client_port=_typed(section, "client_port", int, d.client_port, where),
        snapshot_count=_typed(section, "snapshot_count", int, d.snapshot_count, where),
        snapshot_catchup_entries=_typed(section, "snapshot_catchup_entries", int, d.snapshot_catchup_entries, where),
        request_timeout=float(timeout),
        startup_timeout=float(startup),
        fsync=_typed(section, "fsync", bool, d.fsync, where),
        raft=load_raft_settings(path),
    )


def load_raft_settings(path: Path) -> RaftSettings:
    """The [store.raft] section of `path`, with defaults for what it leaves out."""
    doc = _load(path)
    section = doc.get("store", {}).get("raft", {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [store.raft] must be a table")
    d = RaftSettings()
    where = f"{path}: store.raft"
    known = set(RaftSettings.__dataclass_fields__)
    unknown = sorted(set(section) - known)
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}")
    s = RaftSettings(
        tick_ms=_typed(section, "tick_ms", int, d.tick_ms, where),
        heartbeat_ticks=_typed(section, "heartbeat_ticks", int, d.heartbeat_ticks, where),
        election_ticks=_typed(section, "election_ticks", int, d.election_ticks, where),
        max_size_per_msg=_typed(section, "max_size_per_msg", int, d.max_size_per_msg, where),
        max_inflight_msgs=_typed(section, "max_inflight_msgs", int, d.max_inflight_msgs, where),
        pre_vote=_typed(section, "pre_vote", bool, d.pre_vote, where),
        check_quorum=_typed(section, "check_quorum", bool, d.check_quorum, where),
    )
    if s.election_ticks <= s.heartbeat_ticks:
        raise ConfigError(f"{where}: election_ticks ({s.election_ticks}) must exceed heartbeat_ticks")
    return s
