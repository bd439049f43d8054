"""Loading `cluster.toml`: the defaults every command starts from.

The settings a member runs with, and their defaults, are declared once in
store/server/config.py (`RaftSettings`, `MemberSettings`); this module adds the keys that
only the launcher uses (`StoreSettings`) and checks every value read from the file the same
way member.json is checked.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from store.server.config import MemberSettings, RaftSettings, SettingError, check_field

__all__ = [
    "ConfigError",
    "MemberSettings",
    "RaftSettings",
    "StoreSettings",
    "load_raft_settings",
    "load_store_settings",
]


class ConfigError(Exception):
    """cluster.toml is missing, unreadable, or has a value of the wrong kind."""


@dataclass(frozen=True, kw_only=True)
class StoreSettings(MemberSettings):
    """The [store] section: how `raftkube store up` lays out and runs the members.

    The fields declared here are the launcher's own; the inherited ones (MemberSettings)
    and `raft` go into every member's member.json (see `member_settings`)."""

    members: int = field(default=3, metadata={"choices": (1, 3, 5)})
    data_dir: Path = Path(".raftkube")
    host: str = "127.0.0.1"
    client_port: int = field(default=2379, metadata={"max": 65535})
    """Member i (1-based) serves clients on client_port + 10000*(i-1), peers on +1, HTTP on +2."""
    startup_timeout: float = 15.0
    """Seconds `store up` waits for a leader with every member healthy."""
    raft: RaftSettings = field(default_factory=RaftSettings)

    def member_settings(self) -> dict[str, Any]:
        """Every setting a member runs with, by MemberConfig field name: the member keys of
        [store] and all of [store.raft]."""
        out = {f.name: getattr(self, f.name) for f in fields(MemberSettings)}
        out.update({f.name: getattr(self.raft, f.name) for f in fields(RaftSettings)})
        return out


def _section(cls: type[Any], section: dict[str, Any], where: str, *, tables: tuple[str, ...] = ()) -> dict[str, Any]:
    """The values of `section` for the fields of `cls` (not its sub-tables), each checked."""
    known = {f.name: f for f in fields(cls) if f.name not in tables}
    unknown = sorted(set(section) - set(known) - set(tables))
    if unknown:
        raise ConfigError(f"{where} has unknown keys: {', '.join(unknown)}")
    try:
        return {k: check_field(cls, known[k], v, f"{where}.{k}") for k, v in section.items() if k not in tables}
    except SettingError as e:
        raise ConfigError(str(e)) from None


def _load(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise ConfigError(f"{path}: no such file") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def _table(doc: dict[str, Any], key: str, path: Path, name: str) -> dict[str, Any]:
    section = doc.get(key, {})
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: [{name}] must be a table")
    return section


def load_store_settings(path: Path) -> StoreSettings:
    """The [store] section (and [store.raft]) of `path`, with defaults for what it leaves out."""
    section = _table(_load(path), "store", path, "store")
    values = _section(StoreSettings, section, f"{path}: store", tables=("raft",))
    return StoreSettings(**values, raft=load_raft_settings(path))


def load_raft_settings(path: Path) -> RaftSettings:
    """The [store.raft] section of `path`, with defaults for what it leaves out."""
    where = f"{path}: store.raft"
    section = _table(_table(_load(path), "store", path, "store"), "raft", path, "store.raft")
    s = RaftSettings(**_section(RaftSettings, section, where))
    try:
        s.check()
    except SettingError as e:
        raise ConfigError(f"{where}: {e}") from None
    return s
