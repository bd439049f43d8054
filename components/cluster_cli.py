"""`raftkube up`, `down`, `status`: the whole local control plane (store members, apiserver,
controller-manager and scheduler).

`up` starts the store as `raftkube store up` does (store.cli.cluster.start_store), then the
apiserver (apiserver.launcher), waits for its /readyz as admin, writes the kubeconfig (and one
per component, each its own identity: apiserver.pki.write_component_kubeconfigs), starts the
components with those (components.launcher), waits for their /healthz and prints the status
table.  In the foreground Ctrl-C (or SIGTERM) stops the components, then the apiserver, then
the store; `--detach` returns and `down` stops them later by their pid files.
The apiserver's host and port are fixed when it first starts in a data dir (recorded in
`apiserver/apiserver.json`, like the store's ports in cluster.json), so the kubeconfig stays
valid across restarts; `--port` changes them.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from apiserver.config import ApiserverSettings, load_apiserver_settings
from apiserver.launcher import Endpoint, LocalApiserver
from apiserver.pki import DEFAULT_NODES, write_component_kubeconfigs
from components import up_lock
from components.kubelet.config import MAX_HOLLOW, MAX_KUBELETS, KubeletSettings, load_kubelet_settings
from components.kubelet.hollow import HOLLOW_LABEL
from components.kubelet.podnet import PodNetError
from components.kubelet.process_runtime import ProcessRuntime
from components.launcher import LocalComponent, local_kubelets
from components.up_view import LiveStatus, MergedLog
from store import pki
from store.cli.cluster import member_watcher, run_until_signal, start_store, status_rows, store_settings
from store.cli.common import DEFAULT_DATA_DIR, UsageError, print_json, table
from store.config import StoreSettings
from store.launcher import LauncherError, LocalCluster, free_ports

UP_COMPONENTS = ("controller-manager", "scheduler")
HOLLOW = "hollow-nodes"
COMPONENT_START_TIMEOUT_S = 30.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser("up", help="start the store and the apiserver, write a kubeconfig")
    _common(up)
    up.add_argument("--config", type=Path, default=Path("cluster.toml"), help="defaults ([store], [apiserver])")
    up.add_argument("--detach", action="store_true", help="return once everything is ready; stop with `raftkube down`")
    up.add_argument("--members", type=int, choices=(1, 3, 5), help="store size for a new cluster")
    up.add_argument("--port", type=int, help="the apiserver's HTTPS port (cluster.toml [apiserver] port)")
    up.add_argument("--free-ports", action="store_true", help="pick free ports for a new cluster and its apiserver")
    up.add_argument(
        "--kubelets", type=int, help=f"local nodes to run, 0-{MAX_KUBELETS} (cluster.toml [kubelets] count)"
    )
    up.add_argument(
        "--hollow-nodes", type=int, help=f"hollow nodes to run, 0-{MAX_HOLLOW} (cluster.toml [kubelets] hollow)"
    )
    up.set_defaults(run=cmd_up)
    down = sub.add_parser("down", help="stop the apiserver, then the store")
    _common(down)
    down.set_defaults(run=cmd_down)
    status = sub.add_parser("status", help="the store members and the apiserver: pid, url, health")
    _common(status)
    status.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for each answer")
    status.set_defaults(run=cmd_status)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, help=f"the cluster's data dir (default {DEFAULT_DATA_DIR}/)")
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
    s = store_settings(args)
    try:
        with up_lock.holding(s.data_dir):
            return _up(args, s)
    except up_lock.DataDirBusy as e:
        raise UsageError(str(e)) from None


def _up(args: argparse.Namespace, s: StoreSettings) -> int:
    a = _apiserver_settings(args.config)
    apiserver = LocalApiserver(s.data_dir)
    endpoint = _endpoint(args, apiserver, a)
    running = apiserver.recorded()
    if apiserver.pid() is not None and running is not None:
        raise UsageError(
            f"a cluster already runs in {s.data_dir} (the apiserver at {running.url}, pid {apiserver.pid()});"
            f" `raftkube status --data-dir {s.data_dir}` shows it, `raftkube down --data-dir {s.data_dir}` stops it"
        )
    k = _kubelet_settings(args)
    cluster, _, _ = start_store(s, members=args.members, free=args.free_ports)
    try:
        if apiserver.pid() is None:
            apiserver.start(endpoint, insecure_store=cluster.insecure(), extra_args=a.edge_flags())
        apiserver.wait_ready(endpoint, a.startup_timeout)
        kubeconfig = apiserver.write_kubeconfig(endpoint)
        # node-1..3 always (a kubelet may be started by hand), and every node `up` runs
        write_component_kubeconfigs(s.data_dir, endpoint.url, nodes=tuple(dict.fromkeys(DEFAULT_NODES + k.nodes())))
        components = _start_components(s.data_dir, k)
    except (LauncherError, pki.PKIError, OSError) as e:
        _stop_everything(s.data_dir, apiserver, cluster)
        raise UsageError(str(e)) from e
    except KeyboardInterrupt:  # Ctrl-C while starting: leave nothing running
        _stop_everything(s.data_dir, apiserver, cluster)
        raise
    rows = _rows(cluster, apiserver, 2.0)
    _print(rows, args.output)
    if args.output == "human":
        print(f"\nexport KUBECONFIG={kubeconfig.resolve()}")
        print("try:  kubectl get --raw /readyz")
    if args.detach:
        if args.output == "human":
            print(f"stop with:  raftkube down --data-dir {s.data_dir}")
        return 0
    watch_members = member_watcher(cluster)
    apiserver_up = True
    components_up = {c.name: True for c in components}
    logs = {f"store-{m}": cluster.member_dir(m) / "member.log" for m in cluster.member_ids()}
    logs |= {"apiserver": apiserver.log_file} | {c.name: c.log_file for c in components}
    merged = MergedLog(logs, sys.stdout)

    def show(changed: list[dict[str, Any]]) -> None:
        print()
        _print(changed, "human")

    live = LiveStatus(lambda: _rows(cluster, apiserver, 1.0), show)
    live.seen(rows)

    def check() -> None:
        nonlocal apiserver_up
        if args.output == "human":
            merged.poll()
            live.poll()
        watch_members()
        now = apiserver.pid() is not None
        if apiserver_up and not now:
            print(f"the apiserver is not running (see {apiserver.log_file})", file=sys.stderr)
        apiserver_up = now
        for c in components:
            alive = c.pid() is not None
            if components_up[c.name] and not alive:
                print(f"the {c.name} is not running (see {c.log_file})", file=sys.stderr)
            components_up[c.name] = alive

    ready = "running in the foreground; Ctrl-C stops the components, the apiserver and every store member"
    try:
        run_until_signal(check, ready=ready if args.output == "human" else "")
    finally:
        stopped_components = [c.name for c in components if c.stop()]
        _stop_containers(components)
        stopped_apiserver = apiserver.stop()
        stopped = cluster.stop_all()
        if args.output == "human":
            print(f"\n{_stopped(stopped_components, stopped_apiserver, stopped)}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    cluster = LocalCluster(data_dir)
    apiserver = LocalApiserver(data_dir)
    if not cluster.exists() and apiserver.recorded() is None:
        raise UsageError(f"no cluster in {data_dir} (start one with `raftkube up`)")
    components = _components(data_dir)
    stopped_components = [c.name for c in components if c.stop()]
    _stop_containers(components)
    stopped_apiserver = apiserver.stop()
    stopped = cluster.stop_all() if cluster.exists() else []
    if args.output == "json":
        print_json({"components": stopped_components, "apiserver": stopped_apiserver, "store": stopped})
    elif stopped_components or stopped_apiserver or stopped:
        print(_stopped(stopped_components, stopped_apiserver, stopped))
    else:
        print("nothing was running")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args)
    cluster = LocalCluster(data_dir)
    if not cluster.exists():
        raise UsageError(f"no cluster in {data_dir} (start one with `raftkube up`)")
    rows = _rows(cluster, LocalApiserver(data_dir), args.timeout)
    _print(rows, args.output)
    return 0 if all(r["healthy"] for r in rows) else 1


# ---------------------------------------------------------------------- the table
def _data_dir(args: argparse.Namespace) -> Path:
    return args.data_dir if args.data_dir is not None else DEFAULT_DATA_DIR


def _rows(cluster: LocalCluster, apiserver: LocalApiserver, timeout: float) -> list[dict[str, Any]]:
    """One row per store member, then one for the apiserver: part, url, role, pid, healthy."""
    rows = [
        {
            "part": f"store member {r['id']}",
            "url": r["client_url"],
            "role": r["role"],
            "pid": r["pid"],
            "healthy": r["healthy"],
        }
        for r in status_rows(cluster, timeout)
    ]
    endpoint = apiserver.recorded()
    if endpoint is not None:
        pid = apiserver.pid()
        code, body = apiserver.probe(endpoint, timeout=timeout) if pid is not None else (0, "")
        role = "ready" if code == 200 else ("down" if pid is None else f"not ready ({code or body})")
        rows.append({"part": "apiserver", "url": endpoint.url, "role": role, "pid": pid, "healthy": code == 200})
    for c in _components(cluster.data_dir):
        if c.health_port() is None:
            continue  # never started here
        pid = c.pid()
        code, body = c.probe(timeout) if pid is not None else (0, "")
        role = "running" if code == 200 else ("down" if pid is None else f"not healthy ({code or body})")
        rows.append({"part": c.name, "url": c.url, "role": role, "pid": pid, "healthy": code == 200})
    if endpoint is not None and any(r["part"] == "apiserver" and r["healthy"] for r in rows):
        rows += _node_rows(apiserver, endpoint, timeout)
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


def _stopped(components: list[str], apiserver: bool, members: list[int]) -> str:
    parts = [*(f"the {c}" for c in components), *(["the apiserver"] if apiserver else [])]
    head = f"{', '.join(parts)} and " if parts else ""
    return f"stopped {head}store member(s) {members}"


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
    if k.pod_network == "netns" and k.count and os.geteuid() != 0:
        raise UsageError(f'{args.config}: kubelets.pod_network = "netns" needs root (run `up` as root, or use host)')
    return k


def _components(data_dir: Path) -> list[LocalComponent]:
    """The controller-manager, the scheduler, the hollow nodes and every kubelet started here once."""
    hollow = [LocalComponent(data_dir, HOLLOW)] if (Path(data_dir) / HOLLOW).is_dir() else []
    return [LocalComponent(data_dir, name) for name in UP_COMPONENTS] + hollow + local_kubelets(data_dir)


def _stop_containers(components: list[LocalComponent]) -> None:
    """The kubelets' containers outlive their kubelet by design; `down` leaves no process (and
    no pod network: a pod network that cannot be removed is said, the rest still stops)."""
    for c in components:
        if c.node is not None:
            try:
                ProcessRuntime(c.runtime_root).stop_all(grace_s=5.0, timeout_s=15.0)
            except PodNetError as e:
                print(f"raftkube: {c.name}: its pod network stays: {e}", file=sys.stderr)


def _start_components(data_dir: Path, kubelets: KubeletSettings) -> list[LocalComponent]:
    """Start what is not running yet; wait for every /healthz (LauncherError if one dies)."""
    size = ("--capacity", kubelets.capacity, "--system-reserved", kubelets.system_reserved)
    components = [LocalComponent(data_dir, name) for name in UP_COMPONENTS]
    components += [
        LocalComponent(data_dir, f"kubelet-{node}", (*size, *kubelets.network_args(node))) for node in kubelets.nodes()
    ]
    if kubelets.hollow:
        components.append(LocalComponent(data_dir, HOLLOW, ("--count", str(kubelets.hollow), *size)))
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
    return components


def _stop_everything(data_dir: Path, apiserver: LocalApiserver, cluster: LocalCluster) -> None:
    components = _components(data_dir)
    for c in components:
        c.stop()
    _stop_containers(components)
    apiserver.stop()
    cluster.stop_all()


def _print(rows: list[dict[str, Any]], output: str) -> None:
    if output == "json":
        print_json(rows)
        return
    print(
        table(
            [
                [r["part"], r["url"], r["role"], str(r["pid"] or "-"), "healthy" if r["healthy"] else "UNHEALTHY"]
                for r in rows
            ],
            ["PART", "URL", "ROLE", "PID", "HEALTH"],
        )
    )


__all__ = ["cmd_down", "cmd_status", "cmd_up", "register"]
