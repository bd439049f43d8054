"""`raftkube store ...`: start, inspect, break and stop a local store cluster."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shlex
import signal
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machinery.process import disk
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError, free_ports
from store.api.cluster import MemberInfo
from store.api.errors import StoreError
from store.api.protocol import etcd_url
from store.cli import locate
from store.cli.common import (
    add_cluster_arguments,
    client_tls,
    data_dir,
    endpoints,
    make_client,
    print_json,
    store_error,
    table,
)
from store.client.client import Client
from store.client.layout import CLIENT_NAME
from store.config import StoreSettings, load_store_settings
from store.etcdapi.snapshot_file import SNAPSHOT_MAGIC, backup_from_etcd_snapshot
from store.launcher import LocalCluster


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = sub.add_parser("store", help="run and operate a local store cluster")
    ssub = store.add_subparsers(dest="store_command", metavar="COMMAND", required=True)

    up = ssub.add_parser("up", help="start the members (creating the cluster if needed) and wait for a leader")
    add_cluster_arguments(up)
    up.add_argument("--members", type=int, choices=(1, 3, 5), help="cluster size for a new cluster")
    up.add_argument("--config", type=Path, default=Path("cluster.toml"), help="defaults ([store])")
    up.add_argument("--detach", action="store_true", help="return once the cluster is up; stop it with `store down`")
    up.add_argument(
        "--free-ports", action="store_true", help="pick free ports for a new cluster instead of the client_port scheme"
    )
    up.add_argument("--client-port", type=int, help="first member's client port for a new cluster (cluster.toml)")
    up.add_argument(
        "--hosts",
        choices=("local", "netns"),
        help="a new cluster's members all on this host (local), or each on a host of its own: a network "
        "namespace with its own address (netns, root only) (cluster.toml)",
    )
    up.add_argument("--startup-timeout", type=float, help="seconds to wait for a leader (cluster.toml)")
    up.add_argument(
        "--watch-output-limit",
        type=int,
        metavar="BYTES",
        help="memory a new cluster's members may spend on unsent watch output, all clients together (cluster.toml)",
    )
    up.set_defaults(run=cmd_up)

    down = ssub.add_parser("down", help="stop every member of the cluster")
    add_cluster_arguments(down)
    down.set_defaults(run=cmd_down)

    status = ssub.add_parser("status", help="one line per member: role, term, indexes, revision, health")
    add_cluster_arguments(status)
    status.set_defaults(run=cmd_status)

    members = ssub.add_parser("members", help="list the members as the cluster knows them")
    add_cluster_arguments(members)
    members.set_defaults(run=cmd_members)

    member = ssub.add_parser("member", help="add, remove or promote a member")
    msub = member.add_subparsers(dest="member_command", metavar="ACTION", required=True)
    add = msub.add_parser("add", help="add a member (as a learner by default) and start it locally")
    add_cluster_arguments(add)
    add.add_argument("name")
    add.add_argument("--voter", action="store_true", help="add as a voter at once instead of a learner")
    add.add_argument(
        "--id",
        type=int,
        dest="member_id",
        help="take over a member registered by etcd's MemberAdd (`etcdctl member add`): give it NAME and "
        "its addresses, lay out its files and start it",
    )
    add.add_argument("--peer-url")
    add.add_argument("--client-url")
    add.add_argument("--http-url")
    add.add_argument("--no-start", action="store_true", help="only record it; start it yourself")
    add.set_defaults(run=cmd_member_add)
    rm = msub.add_parser("remove", help="remove a member (and stop its local process)")
    add_cluster_arguments(rm)
    rm.add_argument("member_id", type=int)
    rm.set_defaults(run=cmd_member_remove)
    pro = msub.add_parser("promote", help="promote a caught-up learner to voter")
    add_cluster_arguments(pro)
    pro.add_argument("member_id", type=int)
    pro.set_defaults(run=cmd_member_promote)

    for name, helptext in (
        ("kill", "SIGKILL a member (no clean shutdown)"),
        ("pause", "SIGSTOP a member"),
        ("resume", "SIGCONT a paused member"),
        ("restart", "stop a member and start it again on the same data dir"),
        ("start", "start a stopped member"),
    ):
        c = ssub.add_parser(name, help=helptext)
        add_cluster_arguments(c)
        c.add_argument("member", help="a member id, or `leader`")
        c.set_defaults(run=cmd_lever, lever=name)

    env = ssub.add_parser(
        "etcd-env",
        help="print the exports that point etcdctl (and any etcd client) at the cluster's members",
        description="Prints `export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=... ETCDCTL_CACERT=... ETCDCTL_CERT=... "
        "ETCDCTL_KEY=...` for the running members and the admin certificate; use it as "
        "`eval $(raftkube store etcd-env)`.  The members serve etcd's v3 API on their client ports.",
    )
    env.add_argument("--data-dir", type=Path, help="the cluster's data dir (default: as for every store command)")
    env.set_defaults(run=cmd_etcd_env)

    snap = ssub.add_parser("snapshot", help="save a backup, or restore one into a new cluster")
    snsub = snap.add_subparsers(dest="snapshot_command", metavar="ACTION", required=True)
    save = snsub.add_parser("save", help="write a consistent backup of the store to FILE")
    add_cluster_arguments(save)
    save.add_argument("file", type=Path)
    save.set_defaults(run=cmd_snapshot_save)
    restore = snsub.add_parser("restore", help="create a new cluster in --data-dir from a backup FILE")
    add_cluster_arguments(restore)
    restore.add_argument("file", type=Path)
    restore.add_argument("--members", type=int, choices=(1, 3, 5))
    restore.add_argument("--config", type=Path, default=Path("cluster.toml"))
    restore.set_defaults(run=cmd_snapshot_restore)


# ---------------------------------------------------------------------- helpers
def store_settings(args: argparse.Namespace) -> StoreSettings:
    """cluster.toml's [store] (when --config exists), with the command line's overrides."""
    s = load_store_settings(args.config) if args.config.exists() else StoreSettings()
    changes: dict[str, Any] = {}
    if getattr(args, "members", None):
        changes["members"] = args.members
    named = locate.given(args.data_dir)  # --data-dir, $RAFTKUBE_DATA_DIR; else cluster.toml's
    if named is not None:
        changes["data_dir"] = named
    port = getattr(args, "client_port", None)
    if port is not None:
        if not 0 < port < 65536 - 10000 * (changes.get("members", s.members) - 1) - 2:
            raise UsageError(f"--client-port {port} leaves no room for the members' ports (each +10000)")
        changes["client_port"] = port
    hosts = getattr(args, "hosts", None)
    if hosts is not None:
        changes["hosts"] = hosts
    timeout = getattr(args, "startup_timeout", None)
    if timeout is not None:
        if timeout <= 0:
            raise UsageError(f"--startup-timeout must be positive, got {timeout}")
        changes["startup_timeout"] = timeout
    limit = getattr(args, "watch_output_limit", None)
    if limit is not None:
        if limit <= 0:
            raise UsageError(f"--watch-output-limit must be a positive number of bytes, got {limit}")
        changes["watch_output_limit"] = limit
    return dataclasses.replace(s, **changes)


def _cluster(args: argparse.Namespace) -> LocalCluster:
    c = LocalCluster(data_dir(args))
    if not c.exists():
        raise UsageError(f"no cluster in {data_dir(args)} (start one with `raftkube store up`)")
    return c


async def _statuses(eps: list[str], timeout: float, tls: ssl.SSLContext | None) -> list[dict[str, Any] | None]:
    async def one(ep: str) -> dict[str, Any] | None:
        client = Client([ep], timeout=timeout, connect_timeout=min(timeout, 1.0), tls=tls)
        try:
            return (await client.status(endpoint=ep)).to_json()
        except (StoreError, OSError):
            return None
        finally:
            await client.close()

    return list(await asyncio.gather(*(one(ep) for ep in eps)))


def _status_rows(
    members: list[MemberInfo], statuses: list[dict[str, Any] | None], cluster: LocalCluster | None
) -> list[dict[str, Any]]:
    rows = []
    for m, st in zip(members, statuses, strict=True):
        pid = cluster.pid(m.id) if cluster is not None else None
        if st is None:
            rows.append(
                {
                    "id": m.id,
                    "name": m.name,
                    "client_url": m.client_url,
                    "role": "down" if pid is None else "unreachable",
                    "term": 0,
                    "commit_index": 0,
                    "applied_index": 0,
                    "revision": 0,
                    "db_size": 0,
                    "healthy": False,
                    "pid": pid,
                }
            )
        else:
            rows.append(
                {
                    "id": st["id"],
                    "name": st["name"],
                    "client_url": st["client_url"],
                    "role": st["role"],
                    "term": st["term"],
                    "commit_index": st["commit_index"],
                    "applied_index": st["applied_index"],
                    "revision": st["revision"],
                    "db_size": st["db_size"],
                    "healthy": st["healthy"],
                    "pid": pid,
                }
            )
    return rows


def print_status(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        print_json(rows)
        return
    print(
        table(
            [
                [
                    str(r["id"]),
                    r["name"],
                    r["client_url"],
                    r["role"],
                    str(r["term"]),
                    str(r["commit_index"]),
                    str(r["applied_index"]),
                    str(r["revision"]),
                    _size(r["db_size"]),
                    "healthy" if r["healthy"] else "UNHEALTHY",
                    str(r["pid"] or "-"),
                ]
                for r in rows
            ],
            ["ID", "NAME", "CLIENT URL", "ROLE", "TERM", "COMMIT", "APPLIED", "REVISION", "DB SIZE", "HEALTH", "PID"],
        )
    )


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _wait_ready(cluster: LocalCluster, timeout: float) -> list[dict[str, Any]]:
    members = cluster.members()
    tls = cluster.client_tls()
    deadline = time.monotonic() + timeout
    rows: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        statuses = asyncio.run(_statuses([m.client_url for m in members], 1.0, tls))
        rows = _status_rows(members, statuses, cluster)
        if any(r["role"] == "leader" for r in rows) and all(r["healthy"] for r in rows):
            return rows
        dead = [m.id for m in members if cluster.pid(m.id) is None]
        if dead:
            logs = ", ".join(str(cluster.member_dir(d) / "member.log") for d in dead)
            raise UsageError(f"member(s) {dead} exited during startup; see {logs}")
        time.sleep(0.1)
    print_status(rows, "human")
    raise UsageError(f"no leader with all members healthy within {timeout:.0f}s")


def _resolve_member(args: argparse.Namespace, cluster: LocalCluster) -> int:
    if args.member == "leader":
        statuses = asyncio.run(_statuses(cluster.client_urls(), args.timeout, client_tls(args)))
        leaders = [s["id"] for s in statuses if s is not None and s["role"] == "leader"]
        if not leaders:
            raise UsageError("no member reports itself leader right now")
        return int(leaders[0])
    try:
        mid = int(args.member)
    except ValueError:
        raise UsageError(f"member must be a member id or `leader`, got {args.member!r}") from None
    if mid not in cluster.member_ids():
        raise UsageError(f"no member {mid} in {cluster.root} (members: {cluster.member_ids()})")
    return mid


# ---------------------------------------------------------------------- commands
def cmd_up(args: argparse.Namespace) -> int:
    s = store_settings(args)
    cluster, rows, started = start_store(s, members=args.members, insecure=args.insecure, free=args.free_ports)
    print_status(rows, args.output)
    if args.output == "human":
        eps = ",".join(cluster.client_urls())
        print(f"\nstarted {len(started)} member(s); data in {s.data_dir}/store")
        print(f"try:  raftkube kv put hello world --data-dir {s.data_dir}")
        if cluster.insecure():
            print(f"      raftkube kv get hello --insecure --endpoints {eps}")
        else:
            pki = cluster.pki_dir
            print(
                f"      raftkube kv get hello --endpoints {eps} "
                f"--cacert {pki / 'ca.crt'} --cert {pki / 'admin.crt'} --key {pki / 'admin.key'}"
            )
    if args.detach:
        if args.output == "human":
            print(f"stop with:  raftkube store down --data-dir {s.data_dir}")
        return 0
    ready = "running in the foreground; Ctrl-C stops every member" if args.output == "human" else ""
    try:
        run_until_signal(member_watcher(cluster), ready=ready)
    finally:
        stopped = cluster.stop_all()
        if args.output == "human":
            print(f"\nstopped member(s) {stopped}")
    return 0


def start_store(
    s: StoreSettings, *, members: int | None = None, insecure: bool = False, free: bool = False, wait: bool = True
) -> tuple[LocalCluster, list[dict[str, Any]], dict[int, int]]:
    """Create the cluster `s` describes unless its data dir holds one, start the members that
    are not running, and wait for a leader with every member healthy (stopping them all when
    that fails).  `free`: pick free ports for a new cluster.  Returns the cluster, its status
    rows and the members started (id -> pid).  `wait=False`: return once they are started
    (no rows), for a caller with more to start meanwhile; `wait_store_ready` then waits."""
    cluster = LocalCluster(s.data_dir)
    cluster.check_private()
    if cluster.exists():
        have = len(cluster.member_ids())
        if members and members != have:
            raise UsageError(f"{s.data_dir} holds a {have}-member cluster; --members {members} does not match")
    else:
        if insecure:
            print(
                "raftkube: WARNING: --insecure: the members speak plaintext and check no certificates",
                file=sys.stderr,
            )
        cluster.create(s, ports=free_ports(3 * s.members, s.host) if free else None, insecure=insecure)
    try:
        started = cluster.start_all()
    except LauncherError as e:
        cluster.stop_all()
        raise UsageError(str(e)) from e
    rows = wait_store_ready(cluster, s) if wait else []
    return cluster, rows, started


def wait_store_ready(cluster: LocalCluster, s: StoreSettings) -> list[dict[str, Any]]:
    """A leader with every member healthy within `s.startup_timeout`: the status rows; else
    every member is stopped and UsageError says why."""
    try:
        return _wait_ready(cluster, s.startup_timeout)
    except UsageError:
        cluster.stop_all()
        raise


def status_rows(cluster: LocalCluster, timeout: float) -> list[dict[str, Any]]:
    """One status row per member of a local cluster (down or unreachable ones too)."""
    members = cluster.members()
    statuses = asyncio.run(_statuses([m.client_url for m in members], timeout, cluster.client_tls()))
    return _status_rows(members, statuses, cluster)


def run_until_signal(check: Callable[[], None], interval: float = 0.3, ready: str = "") -> None:
    """Call `check` every `interval` seconds until SIGINT (Ctrl-C) or SIGTERM.  `ready` is
    printed once the signals are ours: a user who presses Ctrl-C as soon as it appears gets a
    clean stop, never a KeyboardInterrupt that skips it."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    old_int = signal.signal(signal.SIGINT, on_signal)
    old_term = signal.signal(signal.SIGTERM, on_signal)
    if ready:
        print(ready, flush=True)
    try:
        while not stop:
            time.sleep(interval)
            if not stop:
                check()
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


def member_watcher(cluster: LocalCluster) -> Callable[[], None]:
    """A check for `run_until_signal` that reports members that die or come back."""
    alive = {mid: cluster.pid(mid) is not None for mid in cluster.member_ids()}

    def check() -> None:
        for mid in cluster.member_ids():
            now = cluster.pid(mid) is not None
            if alive.get(mid) and not now:
                print(f"member {mid} is not running (see {cluster.member_dir(mid) / 'member.log'})", file=sys.stderr)
            elif not alive.get(mid) and now:
                print(f"member {mid} is running again", file=sys.stderr)
            alive[mid] = now

    return check


def cmd_down(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    stopped = cluster.stop_all()
    if args.output == "json":
        print_json({"stopped": stopped})
    else:
        print(f"stopped member(s) {stopped}" if stopped else "no member was running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cluster = LocalCluster(data_dir(args)) if not args.endpoints else None
    if cluster is not None and cluster.exists():
        members = cluster.members()
    else:
        cluster = None
        members = [MemberInfo(0, ep, "", ep, "") for ep in endpoints(args)]
    statuses = asyncio.run(_statuses([m.client_url for m in members], args.timeout, client_tls(args)))
    rows = _status_rows(members, statuses, cluster)
    print_status(rows, args.output)
    return 0 if all(r["healthy"] for r in rows) else 1


def _run_client(args: argparse.Namespace, coro_fn: Any) -> Any:
    async def go() -> Any:
        async with make_client(args) as c:
            return await coro_fn(c)

    try:
        return asyncio.run(go())
    except StoreError as e:
        raise store_error(e) from e


def cmd_members(args: argparse.Namespace) -> int:
    members = _run_client(args, lambda c: c.members())
    if args.output == "json":
        print_json({"members": [m.to_json() for m in members]})
    else:
        print(
            table(
                [
                    [str(m.id), m.name, "learner" if m.is_learner else "voter", m.peer_url, m.client_url]
                    for m in members
                ],
                ["ID", "NAME", "ROLE", "PEER URL", "CLIENT URL"],
            )
        )
    return 0


def cmd_member_add(args: argparse.Namespace) -> int:
    cluster = LocalCluster(data_dir(args))
    local = cluster.exists() and not args.endpoints
    if not args.name:
        raise UsageError("NAME must not be empty")
    urls = [args.peer_url, args.client_url, args.http_url]
    if not all(urls if args.member_id is None else urls[1:]):
        if not local:
            raise UsageError("give --peer-url, --client-url and --http-url (no local cluster to place it in)")
        c, p, h = free_ports(3)
        own_host = cluster.new_member_urls(args.member_id)
        picked = own_host or [f"tcp://127.0.0.1:{p}", f"tcp://127.0.0.1:{c}", f"http://127.0.0.1:{h}"]
        urls = [given or default for given, default in zip(urls, picked, strict=True)]
    if args.member_id is not None:
        info = _take_over_registered(args, urls)
    else:
        info = _run_client(args, lambda cl: cl.member_add(args.name, urls[0], urls[1], urls[2], not args.voter))
    if local:
        cluster.add_member_layout(info)
        if not args.no_start:
            cluster.start_member(info.id)
    if args.output == "json":
        print_json({"member": info.to_json()})
    else:
        kind = "learner" if info.is_learner else "voter"
        verb = "added" if args.member_id is None else "took over"
        print(f"{verb} member {info.id} ({info.name}) as a {kind}: client {info.client_url}, peer {info.peer_url}")
        if info.is_learner:
            print(f"promote it once caught up:  raftkube store member promote {info.id}")
    return 0


def _take_over_registered(args: argparse.Namespace, urls: list[str]) -> MemberInfo:
    """A member `etcdctl member add` registered (no name yet: etcd's "unstarted") gets its name
    and the client and HTTP addresses chosen here; its registered peer URL stays unless
    --peer-url moves it (the other members dial it there)."""
    if args.voter:
        raise UsageError("--voter does not go with --id: the member keeps the role it was registered with")
    registered = next((m for m in _run_client(args, lambda cl: cl.members()) if m.id == args.member_id), None)
    if registered is None:
        raise UsageError(f"--id {args.member_id}: the cluster has no such member")
    if registered.name:
        raise UsageError(f"--id {args.member_id}: that member was started already, as {registered.name!r}")
    peer = args.peer_url or registered.peer_url
    update = lambda cl: cl.member_update(registered.id, args.name, peer, urls[1], urls[2])  # noqa: E731
    info: MemberInfo = _run_client(args, update)
    return info


def cmd_member_remove(args: argparse.Namespace) -> int:
    _run_client(args, lambda c: c.member_remove(args.member_id))
    cluster = LocalCluster(data_dir(args))
    if cluster.exists() and args.member_id in cluster.member_ids():
        cluster.stop_member(args.member_id)
        cluster.forget_member(args.member_id)
    if args.output == "json":
        print_json({"removed": args.member_id})
    else:
        print(f"removed member {args.member_id}")
    return 0


def cmd_member_promote(args: argparse.Namespace) -> int:
    _run_client(args, lambda c: c.member_promote(args.member_id))
    if args.output == "json":
        print_json({"promoted": args.member_id})
    else:
        print(f"promoted member {args.member_id} to voter")
    return 0


def cmd_lever(args: argparse.Namespace) -> int:
    cluster = _cluster(args)
    mid = _resolve_member(args, cluster)
    lever = args.lever
    try:
        if lever == "kill":
            pid = cluster.kill_member(mid)
            msg = f"killed member {mid} (pid {pid}, SIGKILL)"
        elif lever == "pause":
            pid = cluster.signal_member(mid, signal.SIGSTOP)
            msg = f"paused member {mid} (pid {pid}, SIGSTOP); resume with `raftkube store resume {mid}`"
        elif lever == "resume":
            pid = cluster.signal_member(mid, signal.SIGCONT)
            msg = f"resumed member {mid} (pid {pid})"
        elif lever == "restart":
            cluster.stop_member(mid)
            pid = cluster.start_member(mid)
            msg = f"restarted member {mid} (pid {pid})"
        else:
            pid = cluster.start_member(mid)
            msg = f"started member {mid} (pid {pid})"
    except LauncherError as e:
        raise UsageError(str(e)) from e
    if args.output == "json":
        print_json({"member": mid, "action": lever, "pid": pid})
    else:
        print(msg)
    return 0


def cmd_etcd_env(args: argparse.Namespace) -> int:
    """As `minikube docker-env`: lines for the shell to eval."""
    cluster = LocalCluster(data_dir(args))
    try:
        members = cluster.members()
        insecure = cluster.insecure()
    except LauncherError as e:
        raise UsageError(str(e)) from e
    urls = ",".join(etcd_url(m.client_url, insecure) for m in members)
    lines = ["export ETCDCTL_API=3", f"export ETCDCTL_ENDPOINTS={shlex.quote(urls)}"]
    if insecure:
        lines.append("unset ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY")
    else:
        pki_dir = cluster.pki_dir.resolve()
        for var, name in (("CACERT", "ca.crt"), ("CERT", f"{CLIENT_NAME}.crt"), ("KEY", f"{CLIENT_NAME}.key")):
            path = pki_dir / name
            if not path.exists():
                raise UsageError(f"{path} is missing: the cluster's admin certificate is needed for etcd clients")
            lines.append(f"export ETCDCTL_{var}={shlex.quote(str(path))}")
    print("\n".join(lines))
    where = shlex.quote(str(cluster.data_dir))
    print(f"# point etcdctl at the store in {cluster.data_dir}:\n# eval $(raftkube store etcd-env --data-dir {where})")
    return 0


def cmd_snapshot_save(args: argparse.Namespace) -> int:
    header, data = _run_client(args, lambda c: c.snapshot())
    tmp = args.file.with_name(args.file.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(args.file)
    if args.output == "json":
        print_json({"header": header.to_json(), "file": str(args.file), "size": len(data)})
    else:
        print(
            f"saved a backup at revision {header.revision} from member {header.member_id}: "
            f"{args.file} ({_size(len(data))})"
        )
    return 0


def cmd_snapshot_restore(args: argparse.Namespace) -> int:
    # The state machine is heavy to import; only this command needs it.
    from store.server.state import ReplicatedState  # noqa: PLC0415

    if args.data_dir is None:
        raise UsageError("give --data-dir for the new cluster (it must not hold a cluster yet)")
    try:
        backup = args.file.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {args.file}: {e}") from e
    if backup.startswith(SNAPSHOT_MAGIC):  # saved by etcdctl from a member's etcd API
        unwrapped = backup_from_etcd_snapshot(backup)
        if unwrapped is None:
            raise UsageError(f"{args.file} is an etcdctl snapshot of a raftkube store, but damaged (checksum)")
        backup = unwrapped
    try:
        revision = ReplicatedState.check_backup(backup)
    except StoreError as e:
        raise UsageError(f"{args.file} is not a usable backup: {e.message}") from e
    s = store_settings(args)
    cluster = LocalCluster(s.data_dir)
    if cluster.exists():
        raise UsageError(f"{s.data_dir} already holds a cluster; restore into a new directory")
    infos = cluster.create(s, insecure=args.insecure)
    for m in infos:
        disk.write_private(cluster.member_dir(m.id) / "restore_from.bin", backup)
    if args.output == "json":
        print_json({"data_dir": str(s.data_dir), "members": len(infos), "revision": revision})
    else:
        print(f"restored revision {revision} into a new {len(infos)}-member cluster in {s.data_dir}")
        print(f"start it with:  raftkube store up --data-dir {s.data_dir}")
    return 0
