"""`raftkube up`, `down`, `status`: the whole local control plane (store members, apiserver,
controller-manager and scheduler).

`up` starts the store as `raftkube store up` does (store.cli.cluster.start_store), then the
apiserver (apiserver.launcher), waits for its /readyz as admin, writes the kubeconfig (and one
per component, each its own identity: apiserver.pki.write_component_kubeconfigs), starts the
components with those (components.cli.launcher), waits for their /healthz and prints the status
table.  In the foreground Ctrl-C (or SIGTERM) stops the components, then the apiserver, then
the store; `--detach` returns and `down` stops them later by their pid files.  In both modes
a `raftkube up` process stays to restart any part that exits (components.cli.supervisor: with
`--detach` a detached `up`), and `status` shows its restarts.  `down`, `status` find the
cluster from any directory (store.cli.locate); `up` records it there.
`--upstream scheduler,controller-manager` runs the built upstream kube-scheduler and
kube-controller-manager in their place (components.cli.upstream).
The apiserver's host and port are fixed when it first starts in a data dir (recorded in
`apiserver/apiserver.json`, like the store's ports in cluster.json), so the kubeconfig stays
valid across restarts; `--port` changes them.  `[apiserver] count` > 1 runs an HA set of
apiservers behind the apiserver balancer on that address (components.cli.apiserver_set).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from apiserver.config import ApiserverSettings, load_apiserver_settings
from apiserver.launcher import PID_FILE as APISERVER_PID
from apiserver.launcher import Endpoint, LocalApiserver
from apiserver.pki import BALANCER, DEFAULT_NODES, component_kubeconfig, write_component_kubeconfigs
from components.cli import cluster_network, control_hosts, supervisor, up_lock, upstream
from components.cli.apiserver_set import ApiserverSet
from components.cli.component_flags import ComponentFlags, load_component_flags
from components.cli.launcher import (
    CLUSTER_DNS,
    PID_FILE,
    LocalComponent,
    OnHost,
    local_kubelets,
    local_proxies,
    local_replicas,
)
from components.cli.supervisor import Part, Supervisor
from components.cli.up_view import LiveStatus, MergedLog
from components.kubelet.config import HOLLOW_LABEL, MAX_HOLLOW, MAX_KUBELETS, KubeletSettings, load_kubelet_settings
from components.kubelet.podnet import PodNetError
from components.kubelet.process_runtime import ProcessRuntime
from components.proxy import nft, rules
from machinery.process import pki
from machinery.process.command import DEFAULT_DATA_DIR, UsageError
from machinery.process.launch import LauncherError, free_ports, outward_address, stop_processes, stopped_on_purpose
from store.cli import locate
from store.cli.cluster import start_store, status_rows, store_settings, wait_store_ready
from store.cli.common import print_json, table
from store.config import StoreSettings
from store.launcher import LocalCluster

UP_COMPONENTS = ("controller-manager", "scheduler")
HOLLOW = "hollow-nodes"
COMPONENT_START_TIMEOUT_S = 30.0
DETACH_TIMEOUT_S = 300.0
"""How long `up --detach` waits for the detached `up` to have everything ready."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("up", help="start the store and the apiserver, write a kubeconfig")
    _common(up)
    up.add_argument("--config", type=Path, default=Path("cluster.toml"), help="defaults ([store], [apiserver])")
    up.add_argument("--detach", action="store_true", help="return once everything is ready; stop with `raftkube down`")
    up.add_argument("--members", type=int, choices=(1, 3, 5), help="store size for a new cluster")
    up.add_argument("--port", type=int, help="the apiserver's HTTPS port (cluster.toml [apiserver] port)")
    up.add_argument("--free-ports", action="store_true", help="pick free ports for a new cluster and its apiserver")
    up.add_argument(
        "--hosts",
        choices=("local", "netns"),
        help="netns (root): the store members, and an HA set's apiservers, each on a host of its own"
        " (a network namespace with its own address; cluster.toml [store] hosts, hosts_subnet)",
    )
    up.add_argument(
        "--kubelets", type=int, help=f"local nodes to run, 0-{MAX_KUBELETS} (cluster.toml [kubelets] count)"
    )
    up.add_argument(
        "--hollow-nodes", type=int, help=f"hollow nodes to run, 0-{MAX_HOLLOW} (cluster.toml [kubelets] hollow)"
    )
    up.add_argument(
        "--pod-network",
        choices=("auto", "host", "netns"),
        help="host: pods share the host's network; netns (root): each pod its own namespace and IP,"
        " Services proxied, cluster DNS; auto: netns where it can be had (cluster.toml [kubelets] pod_network)",
    )
    up.add_argument(
        "--upstream",
        metavar="PARTS",
        help="run the built upstream kube-scheduler/kube-controller-manager in place of ours:"
        " scheduler, controller-manager or both, comma-separated (`raftkube peers build` builds them)",
    )
    up.add_argument(
        "--apiserver",
        choices=("raftkube", "upstream"),
        default="raftkube",
        help="upstream: kube-apiserver 1.33 on etcd 3.6 (`raftkube peers build`) in place of our store and apiserver",
    )
    up.add_argument(
        "--storage",
        choices=("etcd", "raftkube"),
        help="with --apiserver upstream: what kube-apiserver stores in — etcd 3.6 (the default) or raftkube's"
        " store through its etcd API",
    )
    up.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)  # the detached `up`: tell the parent
    up.set_defaults(run=cmd_up)
    down = sub.add_parser("down", help="stop the apiserver, then the store")
    _common(down)
    down.set_defaults(run=cmd_down)
    status = sub.add_parser("status", help="the store members and the apiserver: pid, url, health")
    _common(status)
    status.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for each answer")
    status.set_defaults(run=cmd_status)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        type=Path,
        help=f"the cluster's data dir (default ${locate.DATA_DIR_ENV}, ./{DEFAULT_DATA_DIR}/, or the last up's)",
    )
    p.add_argument("-o", "--output", choices=("human", "json"), default="human", help="output format")


def _apiserver_settings(config: Path) -> ApiserverSettings:
    return load_apiserver_settings(config) if config.exists() else ApiserverSettings()


def _endpoint(args: argparse.Namespace, apiserver: LocalApiserver, a: ApiserverSettings) -> Endpoint:
    """The recorded endpoint, else the configured one; --port or --free-ports change the port."""
    have = apiserver.recorded()
    endpoint = have or Endpoint(a.host, a.port, a.storage)
    if args.port is not None:
        if not 0 < args.port < 65536:
            raise UsageError(f"--port must be from 1 to 65535, got {args.port}")
        endpoint = Endpoint(endpoint.host, args.port, endpoint.storage)
    elif have is None and args.free_ports:
        endpoint = Endpoint(endpoint.host, free_ports(1, endpoint.host)[0], endpoint.storage)
    return endpoint


# ---------------------------------------------------------------------- commands
def cmd_up(args: argparse.Namespace) -> int:
    args.insecure = False
    args.upstream_parts = upstream.parse(args.upstream) if args.upstream is not None else ()
    if args.upstream_parts and args.apiserver == "upstream":
        # each mixes one way: kube's components on our apiserver, or ours on kube's
        raise UsageError("--upstream runs kube's components on our apiserver; it cannot go with --apiserver upstream")
    if args.storage is not None and args.apiserver != "upstream":
        raise UsageError("--storage chooses kube-apiserver's storage; it goes with --apiserver upstream")
    if args.apiserver == "upstream" and _apiserver_settings(args.config).count != 1:
        raise UsageError(f"{args.config}: apiserver.count runs our apiservers; --apiserver upstream runs one of kube's")
    upstream.require_binaries(args.upstream_parts)  # before anything starts, detached or not
    load_component_flags(args.config)  # a flag a component would refuse: exit 2 before anything starts
    s = store_settings(args)
    if args.apiserver != "upstream":
        # `auto` is decided (and a fallback said) here, in the foreground, once
        args.pod_network = _kubelet_settings(args).pod_network
    if args.detach:
        return _detach(args, s)
    signals = _Signals()
    try:
        with up_lock.holding(s.data_dir):
            if args.apiserver == "upstream":
                from components.cli import upstream_up  # noqa: PLC0415 - it imports this module

                return upstream_up.run(args, s, signals)
            return _up(args, s, signals)
    except up_lock.DataDirBusy as e:
        raise UsageError(str(e)) from None
    finally:
        signals.restore()


class _Signals:
    """`up`'s signals from its start: SIGINT and SIGTERM interrupt the start-up (which then
    stops what it started) and later end the watch loop, stopping everything; SIGUSR1 (from
    `down`) ends it stopping nothing.  SIGINT is ours even if we were started with it ignored
    (a background job, or the detached `up`)."""

    def __init__(self) -> None:
        self.stop = self.release = self.watching = False
        self._old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, up_lock.RELEASE_SIGNAL)}
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_stop)
        signal.signal(up_lock.RELEASE_SIGNAL, self._on_release)

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stop = True
        if not self.watching:
            raise KeyboardInterrupt

    def _on_release(self, signum: int, frame: object) -> None:
        self.release = True

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def _detach(args: argparse.Namespace, s: StoreSettings) -> int:
    """Start the supervising `up` detached, print what the foreground `up` prints, return."""
    data_dir = s.data_dir.resolve()
    argv = ["--data-dir", str(data_dir), "--config", str(args.config.resolve())]
    for flag, value in (("--members", args.members), ("--port", args.port), ("--kubelets", args.kubelets)):
        if value is not None:
            argv += [flag, str(value)]
    if args.hollow_nodes is not None:
        argv += ["--hollow-nodes", str(args.hollow_nodes)]
    if args.pod_network is not None:
        argv += ["--pod-network", args.pod_network]
    if args.upstream is not None:
        argv += ["--upstream", args.upstream]
    if args.free_ports:
        argv.append("--free-ports")
    if args.hosts is not None:
        argv += ["--hosts", args.hosts]
    if args.apiserver != "raftkube":
        argv += ["--apiserver", args.apiserver]
    if args.storage is not None:
        argv += ["--storage", args.storage]
    detached = supervisor.start_detached(argv, data_dir, DETACH_TIMEOUT_S)
    if not detached.ready:
        sys.stderr.write(detached.output)
        code = detached.returncode
        if code is None or code <= 0 or code == 130:
            print(f"raftkube: the cluster was not ready within {DETACH_TIMEOUT_S:.0f}s; see above", file=sys.stderr)
            return 1
        return code
    apiserver = LocalApiserver(data_dir)
    rows = _rows(LocalCluster(data_dir), ApiserverSet(data_dir), 2.0)
    _print(rows, args.output)
    if args.output == "human":
        print(f"\nexport KUBECONFIG={apiserver.kubeconfig.resolve()}")
        print("try:  kubectl get --raw /readyz")
        log = supervisor.supervisor_dir(data_dir) / supervisor.LOG_FILE
        print(f"supervised by `raftkube up` (pid {detached.pid}), which restarts what exits; its log: {log}")
        print(f"stop with:  raftkube down --data-dir {data_dir}")
    return 0


def _up(args: argparse.Namespace, s: StoreSettings, signals: _Signals) -> int:
    a = _apiserver_settings(args.config)
    apiservers = ApiserverSet(s.data_dir)
    apiserver = apiservers.front
    endpoint = _endpoint(args, apiserver, a)
    running = apiserver.recorded()
    if running is not None and any(m.pid() is not None for m in apiservers.everyone()):
        raise UsageError(
            f"a cluster already runs in {s.data_dir} (the apiserver at {running.url});"
            f" `raftkube status --data-dir {s.data_dir}` shows it, `raftkube down --data-dir {s.data_dir}` stops it"
        )
    k = _kubelet_settings(args)
    net = cluster_network.NetworkPlan(k, a.service_cluster_ip_range)
    reach = _reachable_from_pods(k, endpoint)
    flags = load_component_flags(args.config)
    cluster, _, _ = start_store(s, members=args.members, free=args.free_ports, wait=False)
    try:
        # the first apiserver starts (imports, sets up) while the members elect a leader
        store_ready = functools.partial(wait_store_ready, cluster, s)
        servers = _start_apiservers(apiservers, endpoint, a, reach, cluster.insecure(), store_ready)
        ha = bool(servers)
        kubeconfig = apiserver.write_kubeconfig(endpoint, servers)
        # node-1..3 always (a kubelet may be started by hand), and every node `up` runs
        nodes = tuple(dict.fromkeys(DEFAULT_NODES + k.nodes()))
        write_component_kubeconfigs(s.data_dir, endpoint.url, nodes=nodes, servers=servers)
        front: list[LocalComponent] = []
        if ha:
            component_kubeconfig(s.data_dir, BALANCER, server=endpoint.url, servers=servers)
            listen = "0.0.0.0" if reach else endpoint.host
            front = [LocalComponent(s.data_dir, apiservers.balancer().name, ("--listen", f"{listen}:{endpoint.port}"))]
            _start_healthy(front)
        upstream.choose(s.data_dir, args.upstream_parts)
        net.prepare()
        components = front + _start_components(s.data_dir, net, flags)
    except (LauncherError, pki.PKIError, OSError, ValueError) as e:
        _stop_everything(s.data_dir, apiservers, cluster)
        raise UsageError(str(e)) from e
    except (UsageError, KeyboardInterrupt):  # the store failed, or Ctrl-C while starting: leave nothing running
        _stop_everything(s.data_dir, apiservers, cluster)
        raise
    locate.remember(s.data_dir)
    detached = args.ready_fd is not None
    human = args.output == "human" and not detached
    say = _say(detached, human)
    guard = Supervisor(s.data_dir, _parts(cluster, apiservers, components), say)
    rows = _rows(cluster, apiservers, 2.0)
    if detached:
        say(f"the cluster in {s.data_dir} is ready; supervising it (pid {os.getpid()})")
        supervisor.signal_ready(args.ready_fd)
    else:
        _print(rows, args.output)
    if human:
        print(f"\nexport KUBECONFIG={kubeconfig.resolve()}")
        print("try:  kubectl get --raw /readyz")
    logs = {f"store-{m}": cluster.member_dir(m) / "member.log" for m in cluster.member_ids()}
    logs |= {m.name: m.log_file for m in apiservers.serving()} | {c.name: c.log_file for c in components}
    merged = MergedLog(logs, sys.stdout)

    def show(changed: list[dict[str, Any]]) -> None:
        print()
        _print(changed, "human")

    live = LiveStatus(lambda: _rows(cluster, apiservers, 1.0), show)
    live.seen(rows)

    def check() -> None:
        if human:
            merged.poll()
            live.poll()
        guard.poll()

    if human:
        print("running in the foreground; Ctrl-C stops the components, the apiserver and every store member")
        print("parts that exit are restarted (`raftkube status` counts it); `raftkube down` also stops it all")
    sys.stdout.flush()
    signals.watching = True
    ended = "stop"
    try:
        ended = guard.watch(lambda: signals.stop, lambda: signals.release, check)
    finally:
        if ended == "stop":
            stopped_components = stop_parts(components)
            _stop_containers(components)
            stopped_apiserver = stop_parts(apiservers.everyone())
            stopped = cluster.stop_all()
            if args.output == "human" or detached:
                print(f"\n{_stopped(stopped_components, stopped_apiserver, stopped)}", flush=True)
    if ended == "release":
        say("`raftkube down` took over: no longer supervising; it stops the parts")
    elif ended == "finished":
        say("every part was stopped on purpose (or the data dir is gone): nothing left to supervise")
    return 0


def _start_apiservers(
    apiservers: ApiserverSet,
    endpoint: Endpoint,
    a: ApiserverSettings,
    reach: tuple[str, ...],
    insecure: bool,
    store_ready: Callable[[], object],
) -> tuple[str, ...]:
    """Start the apiserver, or the HA set's `a.count` (the first ready before the others start:
    it makes the bootstrap objects they would race to make), and wait until each is ready.
    `store_ready` waits for the store, once the first has been started: an apiserver waits
    for its store by itself, and it spends the members' election importing and setting up
    (0.5 s of every `up`).  The HA set's URLs (the kubeconfigs' extension); () for a single
    apiserver."""
    plan = apiservers.plan(endpoint, a.count)
    ha = a.count > 1
    args = a.flags() + reach
    # default/kubernetes names the balancer, whichever apiserver writes it; but apiservers on
    # hosts of their own (one port, an address each) each name themselves (kube's lease
    # reconciler), unless pods on this machine's network must reach them through the balancer
    on_hosts = any(p.in_host for p in plan) and not reach
    if ha and not on_hosts:
        args += ("--advertise-port", str(endpoint.port))
        if "--advertise-address" not in reach:
            args += ("--advertise-address", endpoint.dial_host)
    if ha:
        apiservers.front.record(endpoint)  # the cluster's address: the balancer's
    names = tuple(p.endpoint.host for p in plan)
    for i, p in enumerate(plan):
        started = time.monotonic()
        if p.apiserver.pid() is None:
            p.apiserver.start(p.endpoint, insecure_store=insecure, extra_args=args, in_host=p.in_host, names=names)
        if i == 0:
            store_ready()
            # startup_timeout counts from the apiserver's start, as it says: the store's
            # election is part of the apiserver's way to ready, not time added to it
            p.apiserver.wait_ready(p.endpoint, a.startup_timeout, since=started)
    for p in plan[1:]:
        p.apiserver.wait_ready(p.endpoint, a.startup_timeout)
    return tuple(p.endpoint.url for p in plan) if ha else ()


def _say(detached: bool, human: bool) -> Callable[[str], None]:
    """How the supervisor speaks: time-stamped lines in the detached `up`'s log; in the
    foreground, lines among the parts' (`supervisor | ...`), or on stderr with -o json."""

    def say(message: str) -> None:
        if detached:
            print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}", flush=True)
        elif human:
            print(f"supervisor | {message}", flush=True)
        else:
            print(f"raftkube: {message}", file=sys.stderr, flush=True)

    return say


def _parts(
    cluster: LocalCluster, apiservers: ApiserverSet, components: list[LocalComponent]
) -> Callable[[], list[Part]]:
    """What the supervisor keeps running: the members (as cluster.json has them now), the
    apiservers as `up` started them (their recorded ports and flags), and the components."""
    fixed = [Part(m.name, m.root / APISERVER_PID, m.log_file, m.start_as_before) for m in apiservers.serving()]
    fixed += [Part(c.name, c.root / PID_FILE, c.log_file, c.start) for c in components]

    def parts() -> list[Part]:
        return store_parts(cluster) + fixed

    return parts


def store_parts(cluster: LocalCluster) -> list[Part]:
    """The store members as cluster.json has them now, for the supervisor."""
    try:
        ids = cluster.member_ids()
    except (LauncherError, KeyError, TypeError, ValueError):
        ids = []  # cluster.json being rewritten or damaged: the members wait for the next poll
    return [
        Part(
            f"store-{m}",
            cluster.member_dir(m) / "pid",
            cluster.member_dir(m) / "member.log",
            functools.partial(cluster.start_member, m),
        )
        for m in ids
    ]


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    cluster = LocalCluster(data_dir)
    apiservers = ApiserverSet(data_dir)
    if not cluster.exists() and apiservers.front.recorded() is None:
        raise UsageError(f"no cluster in {data_dir} (start one with `raftkube up`)")
    try:
        with up_lock.taking_over(data_dir) as released:  # the supervisor first: nothing comes back
            return _down(args, data_dir, cluster, apiservers, released)
    except up_lock.DataDirBusy as e:
        # every stop below is marked on purpose, which a supervisor leaves alone
        print(
            f"raftkube: WARNING: the supervising `up` did not let go within 30s ({e}); stopping anyway", file=sys.stderr
        )
        return _down(args, data_dir, cluster, apiservers, None)


def _down(
    args: argparse.Namespace, data_dir: Path, cluster: LocalCluster, apiservers: ApiserverSet, released: int | None
) -> int:
    components = _components(data_dir)
    stopped_components = stop_parts(components)
    _stop_containers(components)
    stopped_apiserver = stop_parts(apiservers.everyone())
    stopped = cluster.stop_all() if cluster.exists() else []
    if (data_dir / "etcd").is_dir():  # `up --apiserver upstream` ran here
        from components.cli import upstream_up  # noqa: PLC0415 - it imports this module

        stopped_components += upstream_up.stop_upstream(data_dir)
    if args.output == "json":
        print_json(
            {
                "supervisor": released,
                "components": stopped_components,
                "apiserver": bool(stopped_apiserver),
                "apiservers": stopped_apiserver,
                "store": stopped,
            }
        )
        return 0
    if released is not None:
        print(f"the supervising `raftkube up` (pid {released}) let go")
    if stopped_components or stopped_apiserver or stopped:
        print(_stopped(stopped_components, stopped_apiserver, stopped))
    else:
        print("nothing was running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    cluster = LocalCluster(data_dir)
    apiservers = ApiserverSet(data_dir)
    if not cluster.exists() and apiservers.front.recorded() is None:
        raise UsageError(f"no cluster in {data_dir} (start one with `raftkube up`)")
    rows = _rows(cluster, apiservers, args.timeout)
    _print(rows, args.output)
    if args.output == "human":
        print(_supervision(data_dir, rows))
    return 0 if all(r["healthy"] for r in rows) else 1


def _supervision(data_dir: Path, rows: list[dict[str, Any]]) -> str:
    """Who restarts what exits, and which parts stay down because they were stopped on purpose."""
    pid = up_lock.holder(data_dir)
    text = (
        f"\nsupervised by `raftkube up` (pid {pid}): parts that exit are restarted"
        if pid is not None
        else "\nno `raftkube up` supervises this cluster: parts that exit stay down (`raftkube restart PART`)"
    )
    held = [r["part"] for r in rows if r.get("stopped")]
    if held:
        text += f"\nstopped on purpose, not restarted until started again: {', '.join(held)}"
    return text


# ---------------------------------------------------------------------- the table
def _data_dir(args: argparse.Namespace) -> Path:
    return locate.find(args.data_dir)


def _rows(cluster: LocalCluster, apiservers: ApiserverSet, timeout: float) -> list[dict[str, Any]]:
    """One row per store member, then the apiserver(s), the components, the nodes: part, url,
    role, pid, healthy; for processes also restarts and last_restart (the supervisor's count,
    and {reason, time} of the last one) and stopped (stopped on purpose, so not restarted)."""
    restarts = supervisor.read_restarts(cluster.data_dir)

    def process(part: str, name: str, pid_file: Path, **row: Any) -> dict[str, Any]:
        count = restarts.get(name, {})
        row = {"part": part, **row, "restarts": count.get("restarts", 0), "last_restart": count.get("last")}
        row["stopped"] = row["pid"] is None and stopped_on_purpose(pid_file)
        return row

    rows = [
        process(
            f"store member {r['id']}",
            f"store-{r['id']}",
            cluster.member_dir(r["id"]) / "pid",
            url=r["client_url"],
            role=r["role"],
            pid=r["pid"],
            healthy=r["healthy"],
        )
        for r in (status_rows(cluster, timeout) if cluster.exists() else [])
    ]
    ready: list[tuple[LocalApiserver, Endpoint]] = []
    for apiserver in apiservers.serving():
        endpoint = apiserver.recorded()
        if endpoint is None:
            continue
        pid = apiserver.pid()
        code, body = apiserver.probe(endpoint, timeout=timeout) if pid is not None else (0, "")
        role = "ready" if code == 200 else ("down" if pid is None else f"not ready ({code or body})")
        pid_file = apiserver.root / APISERVER_PID
        row = process(
            apiserver.name, apiserver.name, pid_file, url=endpoint.url, role=role, pid=pid, healthy=code == 200
        )
        rows.append(row)
        if code == 200:
            ready.append((apiserver, endpoint))
    for c in _components(cluster.data_dir):
        if c.health_port() is None:
            continue  # never started here
        pid = c.pid()
        code, body = c.probe(timeout) if pid is not None else (0, "")
        role = "running" if code == 200 else ("down" if pid is None else f"not healthy ({code or body})")
        url = front.url if c.name == apiservers.balancer().name and (front := apiservers.front.recorded()) else c.url
        rows.append(process(c.name, c.name, c.root / PID_FILE, url=url, role=role, pid=pid, healthy=code == 200))
    if ready:
        rows += _node_rows(*ready[0], timeout)
    return rows


def _node_rows(apiserver: LocalApiserver, endpoint: Endpoint, timeout: float) -> list[dict[str, Any]]:
    """A row per node (Ready or not) as the apiserver has them; hollow nodes in one row."""
    found = apiserver.get_json(endpoint, "/api/v1/nodes", timeout=timeout)
    nodes = found.get("items") if isinstance(found, dict) else None
    if not isinstance(nodes, list):
        return []
    rows: list[dict[str, Any]] = []
    hollow_ready = hollow = 0
    for n in nodes:
        meta = n.get("metadata") or {}
        conditions = (n.get("status") or {}).get("conditions") or ()
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        if (meta.get("labels") or {}).get(HOLLOW_LABEL) == "true":
            hollow, hollow_ready = hollow + 1, hollow_ready + ready
            continue
        role = "Ready" if ready else "NotReady"
        rows.append({"part": f"node {meta.get('name')}", "url": "", "role": role, "pid": None, "healthy": ready})
    if hollow:
        role = f"{hollow_ready}/{hollow} Ready"
        rows.append({"part": "hollow nodes", "url": "", "role": role, "pid": None, "healthy": hollow_ready == hollow})
    return rows


def _stopped(components: list[str], apiservers: list[str], members: list[int]) -> str:
    parts = [f"the {c}" for c in (*components, *apiservers)]
    head = f"{', '.join(parts)} and " if parts else ""
    return f"stopped {head}store member(s) {members}"


def _reachable_from_pods(k: KubeletSettings, endpoint: Endpoint) -> tuple[str, ...]:
    """The apiserver flags that let pods in network namespaces reach it (in-cluster clients:
    an aggregated server reading its authentication ConfigMap, an operator): a loopback address
    is each namespace's own, so the apiserver listens on every address and default/kubernetes
    names the host's outward one, which a pod reaches through its node's bridge (as kube's
    --advertise-address names the node's IP).  Nothing when pods share the host's network."""
    if k.pod_network != "netns" or not k.count or not endpoint.host.startswith("127."):
        return ()
    address = outward_address()
    if address is None:
        print(
            "raftkube: this host has no default route: pods in network namespaces cannot reach the apiserver",
            file=sys.stderr,
        )
        return ()
    return ("--bind-address", "0.0.0.0", "--advertise-address", address)


def _kubelet_settings(args: argparse.Namespace) -> KubeletSettings:
    k = load_kubelet_settings(args.config)
    if args.kubelets is not None:
        if not 0 <= args.kubelets <= MAX_KUBELETS:
            raise UsageError(f"--kubelets must be from 0 to {MAX_KUBELETS}, got {args.kubelets}")
        k = dataclasses.replace(k, count=args.kubelets)
    if args.hollow_nodes is not None:
        if not 0 <= args.hollow_nodes <= MAX_HOLLOW:
            raise UsageError(f"--hollow-nodes must be from 0 to {MAX_HOLLOW}, got {args.hollow_nodes}")
        k = dataclasses.replace(k, hollow=args.hollow_nodes)
    if args.pod_network is not None:
        k = dataclasses.replace(k, pod_network=args.pod_network)
    if k.pod_network == "auto":
        k = dataclasses.replace(k, pod_network=cluster_network.resolve("auto") if k.count else "host")
    if k.pod_network == "netns" and k.count and os.geteuid() != 0:
        where = "--pod-network netns" if args.pod_network else f'{args.config}: kubelets.pod_network = "netns"'
        raise UsageError(f"{where} needs root (run `up` as root, or use host)")
    return k


def _components(data_dir: Path) -> list[LocalComponent]:
    """The controller-manager, the scheduler, the hollow nodes and every kubelet started here once."""
    balancer = [LocalComponent(data_dir, BALANCER)] if (Path(data_dir) / BALANCER).is_dir() else []
    hollow = [LocalComponent(data_dir, HOLLOW)] if (Path(data_dir) / HOLLOW).is_dir() else []
    dns = [LocalComponent(data_dir, CLUSTER_DNS)] if (Path(data_dir) / CLUSTER_DNS).is_dir() else []
    return (
        balancer
        + [upstream.component(data_dir, name) for name in UP_COMPONENTS]
        + local_replicas(data_dir)
        + hollow
        + local_kubelets(data_dir)
        + local_proxies(data_dir)
        + dns
    )


def stop_parts(parts: Sequence[LocalComponent | LocalApiserver]) -> list[str]:
    """Stop `parts` together (SIGTERM to each, then wait for all: machinery.process.launch.
    stop_processes); the names of those that were running, in order.  `down` stops the
    components, then the apiservers, then the store: a layer at a time, each layer at once."""
    ran = stop_processes([p.pid_file for p in parts])
    return [p.name for p, was_running in zip(parts, ran, strict=True) if was_running]


def _stop_containers(components: list[LocalComponent]) -> None:
    """The kubelets' containers outlive their kubelet by design; `down` leaves no process (and
    no pod network, no proxy table: one that cannot be removed is said, the rest still stops)."""
    for c in components:
        if c.node is not None:
            try:
                ProcessRuntime(c.runtime_root).stop_all(grace_s=5.0, timeout_s=15.0)
            except PodNetError as e:
                print(f"raftkube: {c.name}: its pod network stays: {e}", file=sys.stderr)
        elif c.proxied_node is not None:  # a stopped proxy removed its table; a killed one did not
            try:
                nft.remove(rules.table_name(c.proxied_node))
            except (nft.NftError, OSError) as e:
                print(f"raftkube: {c.name}: its nftables table stays: {e}", file=sys.stderr)


def _start_components(
    data_dir: Path, net: cluster_network.NetworkPlan, flags: dict[str, ComponentFlags]
) -> list[LocalComponent]:
    """Start what is not running yet, the controller-manager and scheduler with cluster.toml's
    flags for them, and the kubelets; once they are healthy (a kubelet has made its node's
    bridge), the service proxies and the cluster DNS server.  Waits for every /healthz
    (LauncherError if one dies)."""
    kubelets = net.kubelets
    size = ("--capacity", kubelets.capacity, "--system-reserved", kubelets.system_reserved)
    components: list[LocalComponent] = []
    for name in UP_COMPONENTS:
        plan = flags.get(name, ComponentFlags())
        first = upstream.component(data_dir, name, plan.args)
        if isinstance(first, upstream.UpstreamComponent):
            components.append(first)
            continue
        replicas = [name] + [f"{name}-{i}" for i in range(2, plan.replicas + 1)]  # standbys on its Lease
        components += [LocalComponent(data_dir, n, plan.args, control_hosts.place(data_dir, n)) for n in replicas]
    components += [
        LocalComponent(
            data_dir,
            f"kubelet-{node}",
            (*size, *net.kubelet_args(node), *kubelets.image_args()),
            _node_host(data_dir, net, f"kubelet-{node}"),
        )
        for node in kubelets.nodes()
    ]
    if kubelets.hollow:
        hollow = ("--count", str(kubelets.hollow), *size)
        components.append(LocalComponent(data_dir, HOLLOW, hollow, control_hosts.place(data_dir, HOLLOW)))
    _start_healthy(components)
    network = [
        LocalComponent(data_dir, f"proxy-{node}", net.proxy_args(node), _node_host(data_dir, net, f"proxy-{node}"))
        for node in net.proxies()
    ]
    if net.runs_dns():
        dns = LocalComponent(data_dir, CLUSTER_DNS)
        # the port it had (a restarted `up` keeps the kube-dns endpoint), else a free one
        saved = dns._saved_args()
        port = _listen_port(saved) or free_ports(1)[0]
        network.append(
            LocalComponent(data_dir, CLUSTER_DNS, net.dns_args(port), _node_host(data_dir, net, CLUSTER_DNS))
        )
    _start_healthy(network)
    return components + network


def _node_host(data_dir: Path, net: cluster_network.NetworkPlan, name: str) -> OnHost | None:
    """The host of the node a kubelet, proxy or the DNS server belongs to, when the control
    plane is on hosts of its own and the pods have their network (control_hosts)."""
    if not net.pod_network:
        return None
    node = control_hosts.node_of(name)
    assert node is not None, name
    return control_hosts.place_node_part(data_dir, name, cluster_network.pod_cidr(node))


def _listen_port(args: list[str]) -> int | None:
    if "--listen" not in args[:-1]:
        return None
    port = args[args.index("--listen") + 1].rpartition(":")[2]
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def _start_healthy(components: list[LocalComponent]) -> None:
    for c in components:
        if c.pid() is None:
            c.start()
    deadline = time.monotonic() + COMPONENT_START_TIMEOUT_S
    for c in components:
        while c.probe(timeout=1.0)[0] != 200:
            if c.pid() is None:
                raise LauncherError(f"the {c.name} exited during startup; see {c.log_file}")
            if time.monotonic() > deadline:
                raise LauncherError(
                    f"the {c.name} was not healthy within {COMPONENT_START_TIMEOUT_S:.0f}s; see {c.log_file}"
                )
            time.sleep(0.1)


def _stop_everything(data_dir: Path, apiservers: ApiserverSet, cluster: LocalCluster) -> None:
    components = _components(data_dir)
    for c in components:
        c.stop()
    _stop_containers(components)
    for m in apiservers.everyone():
        m.stop()
    cluster.stop_all()


def _print(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        print_json(rows)
        return
    print(
        table(
            [
                [
                    r["part"],
                    r["url"],
                    r["role"],
                    str(r["pid"] or "-"),
                    _restarts(r),
                    "healthy" if r["healthy"] else "UNHEALTHY",
                ]
                for r in rows
            ],
            ["PART", "URL", "ROLE", "PID", "RESTARTS", "HEALTH"],
        )
    )


def _restarts(row: dict[str, Any]) -> str:
    """As kubectl's RESTARTS: `2 (killed by SIGKILL, 40s ago)`; empty for a node."""
    if "restarts" not in row:
        return ""
    last = row.get("last_restart")
    if not row["restarts"] or not isinstance(last, dict):
        return str(row["restarts"])
    return f"{row['restarts']} ({last.get('reason', '?')}, {supervisor.ago(str(last.get('time')))})"


__all__ = ["cmd_down", "cmd_status", "cmd_up", "register"]
