"""Entry point of one member process:  python -m store.server.main MEMBER_DIR

MEMBER_DIR holds `member.json` (written by the launcher or `member add`); the member keeps
its WAL, snapshots and lock there too, and its certificate in tls/ (unless insecure).
SIGTERM/SIGINT stop it cleanly; exit status 1 means it stopped on a fatal error (see its
log), 2 that its configuration (member.json, its certificate, or a test-only
RAFTKUBE_FAILPOINTS / RAFTKUBE_UNSAFE setting) is unusable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from machinery.process import disk, pki
from store import canaries, failpoints
from store.api.errors import StoreError
from store.server.config import MemberConfig, read_member_file
from store.server.member import Member


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
        failpoints.check_env()  # test-only settings with a typo must not run as if absent
        canaries.check_env()
    except ValueError as e:
        print(f"raftkube-member: {e}", file=sys.stderr)
        return 2
    disk.enable_for_member(cfg.data_dir)
    try:
        return asyncio.run(serve(cfg))
    except pki.PKIError as e:
        # A missing or damaged certificate is a configuration problem, like a bad member.json.
        print(f"raftkube-member {cfg.member_id}: TLS: {e}", file=sys.stderr)
        return 2
    except StoreError as e:
        # Locked data dir, corrupt WAL, unusable port: say what and where, exit non-zero.
        print(f"raftkube-member {cfg.member_id}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"raftkube-member {cfg.member_id}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
