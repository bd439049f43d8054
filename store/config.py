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


def _typed(section: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = section.get(key, default)
    if kind is int and isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{where}.{key} must be {kind.__name__}, got {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
        raise ConfigError(f"{where}.{key} must be positive, got {value}")
    return value


def load_raft_settings(path: Path) -> RaftSettings:
    """The [store.raft] section of `path`, with defaults for what it leaves out."""
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such file") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
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
