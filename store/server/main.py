"""Entry point of one member process:  python -m store.server.main MEMBER_DIR

MEMBER_DIR holds `member.json` (written by the launcher or `member add`); the member keeps
its WAL, snapshots and lock there too.  SIGTERM/SIGINT stop it cleanly; exit status 1 means
it stopped on a fatal error (see its log), 2 that its configuration is unusable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from store.api.errors import StoreError
from store.server.member import Member, MemberConfig
from store.server.protocol import MemberInfo

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
            snapshot_count=int(doc.get("snapshot_count", 10_000)),
            snapshot_catchup_entries=int(doc.get("snapshot_catchup_entries", 5_000)),
            request_timeout=float(doc.get("request_timeout", 5.0)),
            fsync=bool(doc.get("fsync", True)),
            pre_vote=bool(doc.get("pre_vote", True)),
            check_quorum=bool(doc.get("check_quorum", True)),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: bad or missing field: {e}") from e


async def serve(cfg: MemberConfig) -> int:
    member = Member(cfg)
    await member.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stopped = loop.create_task(member.wait_stopped())
    asked = loop.create_task(stop.wait())
    await asyncio.wait({stopped, asked}, return_when=asyncio.FIRST_COMPLETED)
    fatal = member.node.fatal if member.node is not None else None
    for t in (stopped, asked):
        t.cancel()
    with contextlib.suppress(Exception):
        await member.stop()
    return 1 if fatal is not None else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="raftkube-member", description=__doc__)
    p.add_argument("member_dir", type=Path)
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        cfg = read_member_file(args.member_dir)
    except ValueError as e:
        print(f"raftkube-member: {e}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(serve(cfg))
    except StoreError as e:
        # Locked data dir, corrupt WAL, unusable port: say what and where, exit non-zero.
        print(f"raftkube-member {cfg.member_id}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"raftkube-member {cfg.member_id}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
