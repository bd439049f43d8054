"""A member's static configuration and the `member.json` file that carries it.

Kept apart from the member itself so that the launcher and the CLI can read and write it
without importing the whole server.

Every tunable setting is declared once, with its default, in `RaftSettings` (cluster.toml's
[store.raft]) or `MemberSettings` (the keys of [store] that a member runs with).  The toml
loader (store/config.py) fills them from cluster.toml; `MemberConfig` inherits both, so the
launcher copies them into each member's member.json field by field and the member reads them
back the same way.  member.json is a file a user can edit: reading it checks every field's
type and range strictly (as every setting is: machinery.process.config) and refuses keys it
does not know, naming the field.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, Field, dataclass, field, fields
from pathlib import Path
from typing import Any

from machinery.process import disk
from machinery.process.config import INT_MAX, SettingError, check_value, field_types
from store.api.cluster import MemberInfo
from store.api.protocol import MAX_REQUEST_BYTES, split_url


@dataclass(frozen=True, kw_only=True)
class RaftSettings:
    """[store.raft] in cluster.toml: the Raft core of every member."""

    tick_ms: int = 100
    """Milliseconds of one logical tick."""
    heartbeat_ticks: int = 1
    election_ticks: int = 10
    """Followers campaign after election_ticks..2*election_ticks silent ticks."""
    max_size_per_msg: int = 1 << 20
    """Bytes of entries per append message (at least one entry is always sent)."""
    max_inflight_msgs: int = 256
    """Append messages in flight to one follower before the leader waits for acks."""
    pre_vote: bool = True
    check_quorum: bool = True

    def check(self) -> None:
        """Raise SettingError if the settings do not fit together."""
        if self.election_ticks <= self.heartbeat_ticks:
            raise SettingError(
                "election_ticks",
                f"election_ticks ({self.election_ticks}) must exceed heartbeat_ticks ({self.heartbeat_ticks})",
            )


@dataclass(frozen=True, kw_only=True)
class MemberSettings:
    """The keys of [store] in cluster.toml that every member runs with."""

    snapshot_count: int = 100_000
    """Applied entries between two snapshots (and WAL releases)."""
    snapshot_catchup_entries: int = 5_000
    """Entries kept in the log after a snapshot, so slightly lagging followers need no snapshot."""
    request_timeout: float = 5.0
    """Seconds a member waits for a write to commit (or a read to be confirmed)."""
    fsync: bool = True
    max_request_bytes: int = MAX_REQUEST_BYTES
    """The largest client request a member accepts."""
    max_client_connections: int = 10_000
    """Client connections a member holds at once; file descriptors beyond are kept for its WAL and peers."""
    hello_timeout: float = 5.0
    """Seconds a new client connection has to send its hello before it is closed."""
    frame_timeout: float = 10.0
    """Seconds a client connection has to finish a frame it has begun; beyond, it is closed.
    (Between frames it may idle as long as it likes.)"""
    watch_backlog_limit: int = 16 << 20
    """Bytes of unsent watch responses a client connection may owe; beyond, it is closed."""
    watch_output_limit: int = 1 << 30
    """Bytes of memory the unsent watch responses of all client connections together may take;
    beyond, the connections that stopped reading longest are closed."""
    progress_notify_interval: float = 10.0
    """Seconds between progress notifications to watchers created with progress_notify."""


@dataclass(frozen=True)
class MemberConfig(MemberSettings, RaftSettings):
    """Everything a member process starts from: who it is, its cluster, and its settings
    (the inherited, keyword-only fields of MemberSettings and RaftSettings)."""

    member_id: int
    name: str
    data_dir: Path
    peer_url: str = field(metadata={"check": split_url})
    client_url: str = field(metadata={"check": split_url})
    http_url: str = field(metadata={"check": split_url})
    initial_cluster: list[MemberInfo]
    cluster_id: int = field(metadata={"min": 0})
    join: bool = False
    """Joining an existing cluster (added by `member add`): start empty, wait for the leader."""
    insecure: bool = False
    """Plaintext on both ports, no certificates (`store up --insecure`); otherwise the member
    needs its certificate in <data dir>/tls and speaks only mutual TLS."""
    peer_dial: dict[int, str] = field(default_factory=dict)
    """Peer id -> URL to dial instead of that peer's advertised peer_url (a fault-injecting
    proxy in the chaos suite); peers not named here are dialled at their advertised URL."""

    def dial_url(self, peer: MemberInfo) -> str:
        """Where this member connects to reach `peer`."""
        return self.peer_dial.get(peer.id, peer.peer_url)


SETTINGS = tuple(f.name for f in (*fields(RaftSettings), *fields(MemberSettings)))
"""The name of every tunable setting: a MemberConfig field, a key of cluster.toml."""


# ---------------------------------------------------------------------- checking values
def _url(value: Any, name: str, what: str) -> str:
    if not isinstance(value, str):
        raise SettingError(name, f"{what} must be a string, got {value!r}")
    try:
        split_url(value)
    except ValueError as e:
        raise SettingError(name, f"{what}: {e}") from None
    return value


def _member_info(value: Any, what: str) -> MemberInfo:
    name = "initial_cluster"
    if not isinstance(value, dict):
        raise SettingError(name, f"{what} must be an object, got {value!r}")
    keys = {"id", "name", "peer_url", "client_url", "http_url", "is_learner"}
    missing = sorted(keys - {"is_learner"} - set(value))
    unknown = sorted(set(value) - keys)
    if missing or unknown:
        problem = f"lacks {', '.join(missing)}" if missing else f"has unknown keys: {', '.join(unknown)}"
        raise SettingError(name, f"{what} {problem}")
    mid = value["id"]
    if isinstance(mid, bool) or not isinstance(mid, int) or not 0 < mid <= INT_MAX:
        raise SettingError(name, f"{what}.id must be a positive integer, got {mid!r}")
    if not isinstance(value["name"], str):
        raise SettingError(name, f"{what}.name must be a string, got {value['name']!r}")
    learner = value.get("is_learner", False)
    if not isinstance(learner, bool):
        raise SettingError(name, f"{what}.is_learner must be true or false, got {learner!r}")
    urls = [_url(value[k], name, f"{what}.{k}") for k in ("peer_url", "client_url", "http_url")]
    return MemberInfo(mid, value["name"], urls[0], urls[1], urls[2], learner)


def _members(value: Any, what: str) -> list[MemberInfo]:
    if not isinstance(value, list) or not value:
        raise SettingError("initial_cluster", f"{what} must be a non-empty list of members, got {value!r}")
    infos = [_member_info(m, f"{what}[{i}]") for i, m in enumerate(value)]
    ids = [m.id for m in infos]
    if len(set(ids)) != len(ids):
        raise SettingError("initial_cluster", f"{what} names a member ID twice: {ids}")
    return infos


def _peer_dial(value: Any, what: str) -> dict[int, str]:
    if not isinstance(value, dict):
        raise SettingError("peer_dial", f"{what} must be an object of peer ID -> URL, got {value!r}")
    out = {}
    for k, url in value.items():
        if not (k.isascii() and k.isdigit()) or not 0 < int(k) <= INT_MAX:
            raise SettingError("peer_dial", f"{what} keys must be member IDs, got {k!r}")
        out[int(k)] = _url(url, "peer_dial", f"{what}[{k}]")
    return out


def _check_member_field(f: Field[Any], value: Any, what: str) -> Any:
    """`value` for the MemberConfig field `f`: the cluster's members and peer URLs as
    member.json spells them, every other field as any setting is checked."""
    kind = field_types(MemberConfig)[f.name]
    if kind == list[MemberInfo]:
        return _members(value, what)
    if kind == dict[int, str]:
        return _peer_dial(value, what)
    return check_value(f, kind, value, what)


# ---------------------------------------------------------------------- member.json
MEMBER_FILE = "member.json"

_NOT_IN_FILE = frozenset({"data_dir"})
"""Fields member.json does not carry: data_dir is the directory the file is in."""


def write_member_file(member_dir: Path, cfg: MemberConfig) -> None:
    """Write every field of `cfg` (but data_dir) to member_dir/member.json, atomically."""
    doc: dict[str, Any] = {}
    for f in sorted(fields(cfg), key=lambda f: f.name in SETTINGS):  # who it is first, then settings
        if f.name in _NOT_IN_FILE:
            continue
        value = getattr(cfg, f.name)
        if f.name == "initial_cluster":
            value = [m.to_json() for m in value]
        elif f.name == "peer_dial":
            value = {str(k): v for k, v in sorted(value.items())}
        doc[f.name] = value
    disk.make_dirs(member_dir)
    disk.write_private(member_dir / MEMBER_FILE, (json.dumps(doc, indent=2) + "\n").encode())


def read_member_file(member_dir: Path) -> MemberConfig:
    """The MemberConfig in member_dir/member.json.

    ValueError if the file is missing or not a JSON object; SettingError (a ValueError) naming
    the file and field for a key it does not know, a required field that is missing, or a
    value of the wrong type or range.  Settings the file leaves out take their defaults (files
    written before a setting existed still start).
    """
    path = member_dir / MEMBER_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ValueError(f"{path}: no such file (is {member_dir} a member directory?)") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(doc).__name__}")
    known = {f.name: f for f in fields(MemberConfig) if f.name not in _NOT_IN_FILE}
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise SettingError(unknown[0], f"{path}: unknown keys: {', '.join(unknown)}")
    values: dict[str, Any] = {"data_dir": member_dir}
    for name, f in known.items():
        if name in doc:
            values[name] = _check_member_field(f, doc[name], f"{path}: {name}")
        elif f.default is MISSING and f.default_factory is MISSING:
            raise SettingError(name, f"{path}: {name} is missing")
    cfg = MemberConfig(**values)
    try:
        cfg.check()
    except SettingError as e:
        raise SettingError(e.field, f"{path}: {e}") from None
    if cfg.member_id not in {m.id for m in cfg.initial_cluster}:
        raise SettingError("member_id", f"{path}: member_id {cfg.member_id} is not in initial_cluster")
    return cfg
