"""`raftkube logs PART [-f] [--tail N]`, `raftkube restart|stop|start PART`: one process of a
local cluster, found from any directory (store.cli.locate).

    store-<id>            a store member (`raftkube status` shows "store member <id>")
    apiserver             the apiserver (apiserver-<n> and apiserver-balancer: an HA set's)
    controller-manager, scheduler, hollow-nodes, kubelet-<node>

`restart` stops the process (SIGTERM, SIGKILL after 10 s) and starts it again as it was
started: same ports, same flags (a component's are kept in its directory), and waits until
it is healthy.  A kubelet's containers keep running across its restart; it adopts them.
`stop` stops it on purpose: the supervising `up` leaves it down (components.cli.supervisor) until
`start` or `restart` starts it again.  An unknown part is a usage error (exit 2) that lists
the known ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from apiserver.config import ApiserverSettings, load_apiserver_settings
from apiserver.launcher import LocalApiserver
from components.cli import upstream
from components.cli.apiserver_set import ApiserverSet, is_apiserver
from components.cli.launcher import COMPONENTS, LocalComponent, local_kubelets, local_replicas
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError
from store.cli import locate
from store.launcher import LocalCluster

FOLLOW_POLL_S = 0.2
HEALTHY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Part:
    name: str
    log_file: Path


PARTS_HELP = "store-<id>, apiserver[-<n>], controller-manager, scheduler, hollow-nodes, kubelet-<node>"
DATA_DIR_HELP = "the cluster's data dir (default: as `raftkube status` finds it)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    logs = sub.add_parser("logs", help="a local cluster process's log (store-N, apiserver, scheduler, kubelet-...)")
    logs.add_argument("part", help=PARTS_HELP)
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing what it writes until Ctrl-C")
    logs.add_argument("--tail", type=int, default=-1, help="only the last N lines (-1: all)")
    logs.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
    logs.set_defaults(run=cmd_logs)
    for name, helptext in (
        ("restart", "stop and start one process of a local cluster, as it was started"),
        ("stop", "stop one process of a local cluster; `raftkube up` does not restart it until `start`"),
        ("start", "start a stopped process of a local cluster, as it was started"),
    ):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("part", help=PARTS_HELP)
        c.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
        c.add_argument("--config", type=Path, help="[apiserver] startup_timeout (default: ./cluster.toml if any)")
        c.set_defaults(run=cmd_part, action=name)


def _data_dir(args: argparse.Namespace) -> Path:
    return locate.find(args.data_dir)


def known_parts(data_dir: Path) -> list[str]:
    cluster = LocalCluster(data_dir)
    members = [f"store-{i}" for i in cluster.member_ids()] if cluster.exists() else []
    apiserver = [a.name for a in ApiserverSet(data_dir).serving() if a.log_file.exists()]
    components = [n for n in COMPONENTS if (data_dir / n).is_dir()]
    components += [c.name for c in (*local_replicas(data_dir), *local_kubelets(data_dir))]
    return members + apiserver + components


def resolve(data_dir: Path, name: str) -> Part:
    known = known_parts(data_dir)
    if name not in known:
        raise UsageError(
            f"no part {name!r} in {data_dir}; known: {', '.join(known) or 'none (start one with `raftkube up`)'}"
        )
    if name.startswith("store-"):
        return Part(name, LocalCluster(data_dir).member_dir(int(name.removeprefix("store-"))) / "member.log")
    if is_apiserver(name):
        return Part(name, LocalApiserver(data_dir, name).log_file)
    return Part(name, LocalComponent(data_dir, name).log_file)


def _tail(path: Path, lines: int) -> tuple[bytes, int]:
    """The last `lines` lines of the file (all with -1) and the offset its end was at."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b"", 0
    if lines >= 0:
        kept = data.splitlines(keepends=True)[-lines:] if lines else []
        return b"".join(kept), len(data)
    return data, len(data)


def cmd_logs(args: argparse.Namespace) -> int:
    if args.tail < -1:
        raise UsageError(f"--tail must be -1 (all) or more, got {args.tail}")
    part = resolve(_data_dir(args), args.part)
    text, offset = _tail(part.log_file, args.tail)
    out = sys.stdout.buffer
    out.write(text)
    out.flush()
    if not args.follow:
        return 0
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            try:
                size = os.path.getsize(part.log_file)
            except FileNotFoundError:
                continue
            if size < offset:
                offset = 0  # truncated or replaced: read it from the start
            if size > offset:
                with open(part.log_file, "rb") as f:
                    f.seek(offset)
                    chunk = f.read(size - offset)
                offset += len(chunk)
                out.write(chunk)
                out.flush()
    except KeyboardInterrupt:
        return 0


def cmd_part(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    part = resolve(data_dir, args.part)
    try:
        if args.action in ("restart", "stop"):
            _stop(data_dir, part.name)
        if args.action in ("restart", "start"):
            _start(data_dir, part.name, args.config)
    except LauncherError as e:
        raise UsageError(str(e)) from e
    print(f"{'stopped' if args.action == 'stop' else args.action + 'ed'} {part.name}")
    return 0


def _stop(data_dir: Path, name: str) -> None:
    """Stop it on purpose (machinery.process.launch marks it so)."""
    if name.startswith("store-"):
        LocalCluster(data_dir).stop_member(int(name.removeprefix("store-")))
    elif is_apiserver(name):
        LocalApiserver(data_dir, name).stop()
    else:
        LocalComponent(data_dir, name).stop()


def _start(data_dir: Path, name: str, config: Path | None) -> None:
    if name.startswith("store-"):
        _start_member(LocalCluster(data_dir), int(name.removeprefix("store-")))
    elif is_apiserver(name):
        _start_apiserver(data_dir, name, config)
    else:
        _start_component(upstream.component(data_dir, name))


def _start_member(cluster: LocalCluster, member_id: int) -> None:
    cluster.start_member(member_id)
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while cluster.pid(member_id) is None:
        if time.monotonic() > deadline:
            raise LauncherError(f"store member {member_id} did not start; see {cluster.member_dir(member_id)}")
        time.sleep(0.05)


def _start_apiserver(data_dir: Path, name: str, config: Path | None) -> None:
    """As it was last started (its flags are kept), waiting with `config`'s startup_timeout, else
    ./cluster.toml's if there is one, else the default (the command works outside the checkout,
    where there is no cluster.toml)."""
    if config is None and Path("cluster.toml").is_file():
        config = Path("cluster.toml")
    settings = load_apiserver_settings(config) if config is not None else ApiserverSettings()
    apiserver = LocalApiserver(data_dir, name)
    endpoint = apiserver.recorded()
    if endpoint is None:
        raise LauncherError(f"no {name} recorded in {data_dir}")
    apiserver.start_as_before()
    apiserver.wait_ready(endpoint, settings.startup_timeout)


def _start_component(component: LocalComponent) -> None:
    component.start()
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while component.probe(timeout=1.0)[0] != 200:
        if component.pid() is None:
            raise LauncherError(f"the {component.name} exited while starting; see {component.log_file}")
        if time.monotonic() > deadline:
            raise LauncherError(f"the {component.name} was not healthy within {HEALTHY_TIMEOUT_S:.0f}s")
        time.sleep(0.1)
