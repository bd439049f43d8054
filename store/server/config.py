"""A member's static configuration and the `member.json` file that carries it.

Kept apart from the member itself so that the launcher and the CLI can read and write it
without importing the whole server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store.server.protocol import MAX_REQUEST_BYTES, MemberInfo


@dataclass
class MemberConfig:
    member_id: int
    name: str
    data_dir: Path
    peer_url: str
    client_url: str
    http_url: str
    initial_cluster: list[MemberInfo]
    cluster_id: int
    join: bool = False
    """Joining an existing cluster (added by `member add`): start empty, wait for the leader."""
    tick_ms: int = 100
    election_ticks: int = 10
    heartbeat_ticks: int = 1
    snapshot_count: int = 100_000
    """Applied entries between two snapshots (and WAL releases)."""
    snapshot_catchup_entries: int = 5_000
    """Entries kept in the log after a snapshot, so slightly lagging followers need no snapshot."""
    request_timeout: float = 5.0
    max_request_bytes: int = MAX_REQUEST_BYTES
    pre_vote: bool = True
    check_quorum: bool = True
    max_inflight_msgs: int = 256
    max_size_per_msg: int = 1 << 20
    fsync: bool = True
    progress_notify_interval: float = 10.0
    """Seconds between progress notifications to watchers created with progress_notify."""
    peer_dial: dict[int, str] = field(default_factory=dict)
    """Peer id -> URL to dial instead of that peer's advertised peer_url (a fault-injecting
    proxy in the chaos suite); peers not named here are dialled at their advertised URL."""

    def dial_url(self, peer: MemberInfo) -> str:
        """Where this member connects to reach `peer`."""
        return self.peer_dial.get(peer.id, peer.peer_url)


MEMBER_FILE = "member.json"


def write_member_file(member_dir: Path, cfg: MemberConfig) -> None:
    doc: dict[str, Any] = {
        "member_id": cfg.member_id,
        "name": cfg.name,
        "peer_url": cfg.peer_url,
        "client_url": cfg.client_url,
        "http_url": cfg.http_url,
        "cluster_id": cfg.cluster_id,
        "join": cfg.join,
        "initial_cluster": [m.to_json() for m in cfg.initial_cluster],
        "tick_ms": cfg.tick_ms,
        "election_ticks": cfg.election_ticks,
        "heartbeat_ticks": cfg.heartbeat_ticks,
        "snapshot_count": cfg.snapshot_count,
        "snapshot_catchup_entries": cfg.snapshot_catchup_entries,
        "request_timeout": cfg.request_timeout,
        "fsync": cfg.fsync,
        "pre_vote": cfg.pre_vote,
        "check_quorum": cfg.check_quorum,
    }
    if cfg.peer_dial:
        doc["peer_dial"] = {str(k): v for k, v in sorted(cfg.peer_dial.items())}
    member_dir.mkdir(parents=True, exist_ok=True)
    tmp = member_dir / (MEMBER_FILE + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(member_dir / MEMBER_FILE)


def read_member_file(member_dir: Path) -> MemberConfig:
    path = member_dir / MEMBER_FILE
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError as e:
        raise ValueError(f"{path}: no such file (is {member_dir} a member directory?)") from e
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from e
    try:
        cluster = [
            MemberInfo(m["id"], m["name"], m["peer_url"], m["client_url"], m["http_url"], m.get("is_learner", False))
            for m in doc["initial_cluster"]
        ]
        return MemberConfig(
            member_id=int(doc["member_id"]),
            name=str(doc["name"]),
            data_dir=member_dir,
            peer_url=doc["peer_url"],
            client_url=doc["client_url"],
            http_url=doc["http_url"],
            initial_cluster=cluster,
            cluster_id=int(doc["cluster_id"]),
            join=bool(doc.get("join", False)),
            tick_ms=int(doc.get("tick_ms", 100)),
            election_ticks=int(doc.get("election_ticks", 10)),
            heartbeat_ticks=int(doc.get("heartbeat_ticks", 1)),
            snapshot_count=int(doc.get("snapshot_count", 100_000)),
            snapshot_catchup_entries=int(doc.get("snapshot_catchup_entries", 5_000)),
            request_timeout=float(doc.get("request_timeout", 5.0)),
            fsync=bool(doc.get("fsync", True)),
            pre_vote=bool(doc.get("pre_vote", True)),
            check_quorum=bool(doc.get("check_quorum", True)),
            peer_dial={int(k): str(v) for k, v in doc.get("peer_dial", {}).items()},
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad or missing field: {e}") from e
