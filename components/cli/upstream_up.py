"""`raftkube up --apiserver upstream`: our scheduler, controller-manager and kubelets on the
upstream kube-apiserver 1.33 over etcd 3.6 (bench.peers.upstream), the other half of a
mixed control plane.  Whatever behaves differently from `raftkube up` is a bug on our side.

`--storage raftkube` puts kube-apiserver on our own store instead of etcd, through the etcd
API every member serves on its client port (store/etcdapi), with a client certificate of its
own from the store's CA: the store measured by the yardstick that uses etcd hardest.

The cluster is the one `up` makes, with the store and our apiserver replaced: the same
credentials (apiserver.pki) and kubeconfigs, so each component shows kube the identity kube
expects (system:kube-scheduler, system:kube-controller-manager, system:node:<name> in
system:nodes, whom kube's Node authorizer and NodeRestriction admission judge).  One
difference is granted on purpose: kube runs each controller under a service account of its
own (`--use-service-account-credentials`), ours run in one process under one identity, so
`up` binds system:kube-scheduler and system:kube-controller-manager to the ClusterRoles our
apiserver gives them (`raftkube:kube-scheduler`, `raftkube:kube-controller-manager`, copied
from machinery.bootstrap_policy), beside kube's own.

It supervises as `up` does (a part that exits is restarted; Ctrl-C stops everything) and
`down` stops it.  The data dir must not hold a raftkube store: the two kinds of cluster do not
share one.  The peers are imported only here, when asked for (the layering contract).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
from pathlib import Path
from typing import Any

from apiserver.kubernetes_service import DEFAULT_SERVICE_CIDR
from apiserver.launcher import Endpoint, LocalApiserver
from apiserver.pki import DEFAULT_NODES, write_component_kubeconfigs
from components.cli import cluster_network, supervisor
from components.cli.apiserver_set import ApiserverSet
from components.cli.cluster import (
    _apiserver_settings,
    _components,
    _kubelet_settings,
    _print,
    _rows,
    _say,
    _Signals,
    _start_components,
    _stop_containers,
    store_parts,
)
from components.cli.component_flags import load_component_flags
from components.cli.launcher import PID_FILE, LocalComponent
from components.cli.supervisor import Part, Supervisor
from components.cli.up_view import LiveStatus, MergedLog
from machinery.bootstrap_policy import bootstrap_objects
from machinery.process import pki
from machinery.process.command import UsageError
from machinery.process.launch import LauncherError, free_ports, read_pid
from store.api.protocol import etcd_url
from store.cli import locate
from store.cli.cluster import start_store
from store.config import StoreSettings
from store.launcher import LocalCluster

UPSTREAM = "upstream"
START_TIMEOUT_S = 120.0
"""kube-apiserver runs its post-start hooks (RBAC bootstrap, priority classes) before /readyz."""
GRANTED = ("kube-scheduler", "kube-controller-manager")
"""Our components whose kube-side role is narrower than what they do (see the module doc)."""


def grants() -> list[tuple[str, dict[str, Any]]]:
    """(collection path, object) for each ClusterRole our scheduler and controller-manager
    hold on our apiserver, renamed raftkube:<name>, and the binding of its user to it."""
    roles, _ = bootstrap_objects()
    out: list[tuple[str, dict[str, Any]]] = []
    base = "/apis/rbac.authorization.k8s.io/v1"
    for name in GRANTED:
        role = next(r for r in roles if r["metadata"]["name"] == f"system:{name}")
        ours = f"raftkube:{name}"
        out.append(
            (
                f"{base}/clusterroles",
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": ours}, "rules": role["rules"]},
            )
        )  # fmt: skip
        out.append(
            (
                f"{base}/clusterrolebindings",
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": ours},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ours},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"system:{name}"}],
                },
            )
        )
    return out


def _create(apiserver: LocalApiserver, endpoint: Endpoint, path: str, obj: dict[str, Any]) -> None:
    """POST `obj` as admin; one that exists already (an earlier `up`) is replaced."""
    conn = http.client.HTTPSConnection(endpoint.dial_host, endpoint.port, timeout=10, context=apiserver.admin_tls())
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    try:
        conn.request("POST", path, json.dumps(obj), headers)
        r = conn.getresponse()
        body = r.read(4096)
        if r.status == 409:
            conn.request("PUT", f"{path}/{obj['metadata']['name']}", json.dumps(obj), headers)
            r = conn.getresponse()
            body = r.read(4096)
        if r.status not in (200, 201):
            raise LauncherError(f"creating {path}/{obj['metadata']['name']}: HTTP {r.status} {body[:300]!r}")
    except (OSError, http.client.HTTPException) as e:
        raise LauncherError(f"creating {path}/{obj['metadata']['name']}: {e}") from e
    finally:
        conn.close()


def _port(args: argparse.Namespace, apiserver: LocalApiserver, configured: int) -> int:
    if args.port is not None:
        if not 0 < args.port < 65536:
            raise UsageError(f"--port must be from 1 to 65535, got {args.port}")
        return int(args.port)
    have = apiserver.recorded()
    if have is not None:
        return have.port
    return free_ports(1)[0] if args.free_ports else configured


STORE_CLIENT = "kube-apiserver-etcd-client"
"""The client certificate kube-apiserver shows raftkube's members (issued by the store's CA)."""


def raftkube_storage(cluster: LocalCluster) -> Any:
    """Where kube-apiserver finds raftkube's store: every member's client port as an etcd
    endpoint, and a client certificate of its own from the store's CA (made once)."""
    from bench.peers.upstream import EtcdStorage  # noqa: PLC0415 - benchmarks load lazily

    insecure = cluster.insecure()
    servers = tuple(etcd_url(m.client_url, insecure) for m in cluster.members())
    if insecure:
        return EtcdStorage(servers, None)
    try:
        client = pki.load_files(cluster.pki_dir, STORE_CLIENT)
    except pki.PKIError:
        client = pki.issue_client_cert(pki.load_files(cluster.pki_dir, "ca"), cluster.pki_dir, STORE_CLIENT)
    return EtcdStorage(servers, client)


def run(args: argparse.Namespace, s: StoreSettings, signals: _Signals) -> int:
    """`up` with kube-apiserver in place of our apiserver, on etcd 3.6 in place of our store, or
    (`--storage raftkube`) on our store through its etcd API (see the module)."""
    from bench.peers.upstream import UpstreamControlPlane, check_peers  # noqa: PLC0415 - benchmarks load lazily

    data_dir = s.data_dir
    on_raftkube = getattr(args, "storage", None) == "raftkube"
    if not on_raftkube and LocalCluster(data_dir).exists():
        raise UsageError(
            f"{data_dir} holds a raftkube store: `--apiserver {UPSTREAM}` needs a data dir of its own (--data-dir),"
            " or `--storage raftkube` to run kube-apiserver on it"
        )
    if on_raftkube and (data_dir / "etcd").is_dir():
        raise UsageError(f"{data_dir} holds etcd 3.6's data: `--storage raftkube` needs a data dir of its own")
    check_peers(("kube-apiserver",) if on_raftkube else ("etcd", "kube-apiserver"))  # exit 2 naming the build
    plane = UpstreamControlPlane(data_dir)
    if plane.apiserver.pid() is not None:
        raise UsageError(
            f"a cluster already runs in {data_dir} (kube-apiserver pid {plane.apiserver.pid()});"
            f" `raftkube down --data-dir {data_dir}` stops it"
        )
    a = _apiserver_settings(args.config)
    k = _kubelet_settings(args)
    port = _port(args, plane.apiserver, a.port)
    store: LocalCluster | None = None
    storage: Any = None
    try:
        if on_raftkube:
            store, _, _ = start_store(s, members=args.members, free=args.free_ports)
            storage = raftkube_storage(store)
            endpoint = plane.start_on(storage, port, START_TIMEOUT_S)
        else:
            endpoint = plane.start(port, START_TIMEOUT_S)
        kubeconfig = plane.apiserver.write_kubeconfig(endpoint)
        write_component_kubeconfigs(data_dir, endpoint.url, nodes=tuple(dict.fromkeys(DEFAULT_NODES + k.nodes())))
        for path, obj in grants():
            _create(plane.apiserver, endpoint, path, obj)
        net = cluster_network.NetworkPlan(k, DEFAULT_SERVICE_CIDR, services=False)
        net.prepare()
        components = _start_components(data_dir, net, load_component_flags(args.config))
    except (LauncherError, pki.PKIError, OSError) as e:
        _stop_all(data_dir, plane, store=store)
        raise UsageError(str(e)) from e
    except KeyboardInterrupt:
        _stop_all(data_dir, plane, store=store)
        raise
    locate.remember(data_dir)
    detached = args.ready_fd is not None
    human = args.output == "human" and not detached
    say = _say(detached, human)
    fixed = [
        Part(
            "apiserver",
            plane.apiserver.root / PID_FILE,
            plane.apiserver.log_file,
            lambda: plane.start_apiserver(endpoint, storage),
        ),
        *(Part(c.name, c.root / PID_FILE, c.log_file, c.start) for c in components),
    ]
    if store is None:
        fixed.insert(0, Part("etcd", plane.etcd_pid_file, plane.etcd_log, plane.start_etcd))
    guard = Supervisor(data_dir, lambda: (store_parts(store) if store is not None else []) + fixed, say)

    def rows(timeout: float) -> list[dict[str, Any]]:
        out = _rows(LocalCluster(data_dir), ApiserverSet(data_dir), timeout)  # the store members, when there are
        for r in out:
            if r["part"] == "apiserver":
                r["part"] = "kube-apiserver"
        if store is not None:
            return out
        etcd_pid = read_pid(plane.etcd_pid_file)
        etcd = {"part": "etcd 3.6", "url": endpoint.storage, "role": "running" if etcd_pid else "down",
                "pid": etcd_pid, "healthy": etcd_pid is not None}  # fmt: skip
        return [etcd, *out]

    if detached:
        say(f"the cluster in {data_dir} (kube-apiserver) is ready; supervising it (pid {os.getpid()})")
        supervisor.signal_ready(args.ready_fd)
    else:
        _print(rows(2.0), args.output)
    if human:
        print(f"\nexport KUBECONFIG={kubeconfig.resolve()}")
        print("try:  kubectl get --raw /readyz")
    logs = {"kube-apiserver": plane.apiserver.log_file}
    if store is None:
        logs["etcd"] = plane.etcd_log
    else:
        logs |= {f"store-{m}": store.member_dir(m) / "member.log" for m in store.member_ids()}
    logs |= {c.name: c.log_file for c in components}
    merged = MergedLog(logs, sys.stdout)

    def show(changed: list[dict[str, Any]]) -> None:
        print()
        _print(changed, "human")

    live = LiveStatus(lambda: rows(1.0), show)
    live.seen(rows(2.0))
    if human:
        under = "raftkube's store" if store is not None else "etcd"
        print(f"running in the foreground on kube-apiserver; Ctrl-C stops the components, kube-apiserver, {under}")
    sys.stdout.flush()
    signals.watching = True

    def check() -> None:
        if human:
            merged.poll()
            live.poll()
        guard.poll()

    ended = "stop"
    try:
        ended = guard.watch(lambda: signals.stop, lambda: signals.release, check)
    finally:
        if ended == "stop":
            stopped = _stop_all(data_dir, plane, components, store)
            if args.output == "human" or detached:
                print(f"\nstopped {', '.join(stopped) or 'nothing'}", flush=True)
    if ended == "release":
        say("`raftkube down` took over: no longer supervising; it stops the parts")
    return 0


def _stop_all(
    data_dir: Path, plane: Any, components: list[LocalComponent] | None = None, store: LocalCluster | None = None
) -> list[str]:
    """The components, the kubelets' containers, kube-apiserver, etcd or the store: nothing left running."""
    components = components if components is not None else _components(data_dir)
    stopped = [c.name for c in components if c.stop()]
    _stop_containers(components)
    stopped += [str(p) for p in plane.stop()]
    if store is not None:
        members = store.stop_all()
        if members:
            stopped.append(f"store member(s) {sorted(members)}")
    return stopped


def stop_upstream(data_dir: Path) -> list[str]:
    """What `down` calls for a data dir `up --apiserver upstream` ran in: etcd (kube-apiserver
    is stopped with the apiserver's pid file)."""
    from bench.peers.upstream import ETCD_DIR, UpstreamControlPlane  # noqa: PLC0415 - benchmarks load lazily

    if not (Path(data_dir) / ETCD_DIR).is_dir():
        return []
    return UpstreamControlPlane(data_dir).stop()
