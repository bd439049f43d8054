"""From an EndpointSlice change to its rule being live, measured from outside the proxy.

A real cluster (`raftkube up --detach --free-ports --kubelets 0 --hollow-nodes 0` on a temp
data dir; its controller-manager stopped so that nothing but us writes EndpointSlices), N
Services each with one EndpointSlice of 2 endpoints (created through the API, managed-by
`bench.raftkube.local`), and a proxy process programming a private network namespace:
`raftkube proxy --netns`, and as the peer, when built, upstream kube-proxy in nftables mode run
inside another private namespace with `ip netns exec` (at its default minimum of 1 s between
syncs, then at our 0.1 s), then ours once more, so that neither always runs first.

Once the proxy is healthy and its table holds every Service (its first full sync), M changes,
one every `interval` seconds: a merge PATCH of one slice's first endpoint address to an address
never used before.  A poller lists the table's chains (`nft list chains ip`, the same
command for both proxies) back to back and records, for each change, the end of the first
listing that shows the new address's endpoint chain; latency = that moment - the PATCH's
answer.  That is an upper bound (by at most one listing, whose duration is reported too).
Ours also counts its own `raftkube_proxy_sync_latency_seconds` (from the informer event to
the apply's return), scraped before and after, as a cross-check.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from apiserver.launcher import LocalApiserver
from bench.conformance.cluster import kill_leftovers
from bench.network.netns import CLUSTER_CIDR, GATEWAY, Network, in_ns, listen_in
from components.client import kubeconfig
from components.client.rest import RestClient
from components.proxy import rules
from machinery.process.launch import child_env

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "rkbn"
MANAGED_BY = "bench.raftkube.local"
UP_TIMEOUT_S = 300.0
DOWN_TIMEOUT_S = 120.0
HEALTHY_TIMEOUT_S = 120.0
SEEN_TIMEOUT_S = 30.0
"""A change not seen live this long after its PATCH counts as missed."""
CREATE_CONCURRENCY = 8
KUBE_PROXY = Path(os.environ.get("RAFTKUBE_BENCH_KUBE_PROXY", "/tmp/kube-proxy"))
NODE_NAME = "bench"
PEER_MIN_SYNC = (None, "100ms")
"""kube-proxy as shipped (at least 1 s between syncs), then at our proxy's 0.1 s."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _raftkube(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "components.cli", *args]
    return subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL, cwd=ROOT
    )


def _addr(i: int, j: int) -> str:
    """Endpoint j (0 or 1) of Service i at the start: 10.250.1.0 onwards."""
    n = 2 * i + j
    return f"10.250.{1 + n // 250}.{1 + n % 250}"


def _changed_addr(k: int) -> str:
    """The address change k moves an endpoint to: never used before (10.250.128.0 onwards)."""
    return f"10.250.{128 + k // 250}.{1 + k % 250}"


def service_of(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"svc-{i}", "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
    }


def slice_of(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"svc-{i}-bench",
            "namespace": NAMESPACE,
            "labels": {rules.SERVICE_NAME_LABEL: f"svc-{i}", "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [_addr(i, j)], "conditions": {"ready": True}} for j in (0, 1)],
    }


@dataclass
class Change:
    k: int
    index: int
    address: str
    matches: Callable[[str], bool]
    written: float | None = None
    seen: float | None = None
    seen_after_listing_from: float | None = None


@dataclass
class Subject:
    """A proxy under test: how to start it in namespace `ns`, its table, and how a listing of
    the table's chains shows an endpoint address."""

    name: str
    table: str
    start: Callable[[str, Path], subprocess.Popen[bytes]]
    healthy: Callable[[], bool | None]
    shows: Callable[[int, dict[str, Any], str], Callable[[str], bool]]
    metrics_url: str | None = None
    log: Path | None = None
    notes: list[str] = field(default_factory=list)


# -- ours ----------------------------------------------------------------------------------------


def ours(kubeconfig_path: Path, logs: Path) -> Subject:
    port = _free_port()
    node = rules.Node(NODE_NAME, (ipaddress.IPv4Address(GATEWAY),), ipaddress.IPv4Network(CLUSTER_CIDR))
    table = rules.table_name(NODE_NAME)
    log = logs / "raftkube-proxy.log"

    def start(ns: str, _kc: Path) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "components.cli", "proxy", "--netns", ns, "--kubeconfig", str(kubeconfig_path)]
        argv += ["--node-name", NODE_NAME, "--node-ip", GATEWAY, "--cluster-cidr", CLUSTER_CIDR]
        argv += ["--health-port", str(port)]
        with log.open("ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=child_env(), cwd=ROOT)

    def shows(i: int, eps: dict[str, Any], address: str) -> Callable[[str], bool]:
        # the endpoint chain's name is a hash: render this one Service to learn it
        rs = rules.render([service_of(i) | {"spec": {**service_of(i)["spec"], "clusterIP": "10.251.0.1"}}], [eps], node)
        [chain] = [c for c, body in rs.chains.items() if any(f"dnat to {address}:" in r for r in body)]
        pattern = re.compile(rf"\bchain {re.escape(chain)}\b")
        return lambda listing: pattern.search(listing) is not None

    return Subject(
        "raftkube proxy",
        table,
        start,
        lambda: _get(f"http://127.0.0.1:{port}/healthz") == 200,
        shows,
        metrics_url=f"http://127.0.0.1:{port}/metrics",
        log=log,
    )


# -- the peer ------------------------------------------------------------------------------------


class Relay:
    """127.0.0.1:PORT inside a namespace, piped to the apiserver on the host's 127.0.0.1: a
    process in a private namespace cannot reach the host's loopback, and we add no route or
    address to the host's namespace.  Runs on the benchmark's event loop."""

    def __init__(self, ns: str, target: tuple[str, int]) -> None:
        self.sock = listen_in(ns)
        self.port = int(self.sock.getsockname()[1])
        self.target = target
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, sock=self.sock)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            with contextlib.suppress(OSError):
                w.close()

        with contextlib.suppress(asyncio.CancelledError):  # the loop's end: the peer is gone already
            await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)


def kube_proxy(logs: Path, min_sync: str | None) -> Subject:
    health, metrics = _free_port(), _free_port()
    log = logs / f"kube-proxy-{min_sync or 'default'}.log"

    def start(ns: str, kc: Path) -> subprocess.Popen[bytes]:
        # inside the namespace, so its loopback ports are its own
        argv = in_ns(ns, str(KUBE_PROXY), "--proxy-mode=nftables", f"--kubeconfig={kc}")
        argv += [f"--hostname-override={NODE_NAME}", f"--cluster-cidr={CLUSTER_CIDR}"]
        argv += [f"--healthz-bind-address=127.0.0.1:{health}", f"--metrics-bind-address=127.0.0.1:{metrics}"]
        argv += ["--conntrack-max-per-core=0", "--v=1"]
        if min_sync:  # the nftables mode's minimum too, despite the name
            argv.append(f"--iptables-min-sync-period={min_sync}")
        with log.open("ab") as out:
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def shows(i: int, eps: dict[str, Any], address: str) -> Callable[[str], bool]:
        # kube-proxy names an endpoint chain endpoint-HASH-NS/SVC/tcp/PORT__IP/PORT
        needle = f"__{address}/8080"
        return lambda listing: needle in listing

    name = f"kube-proxy (nftables, min sync period {min_sync or '1s, its default'})"
    return Subject(name, "kube-proxy", start, lambda: None, shows, log=log)


# -- measuring -----------------------------------------------------------------------------------


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return 0


def _scrape(url: str | None) -> dict[float, float] | None:
    """The cumulative buckets of raftkube_proxy_sync_latency_seconds (le -> count)."""
    if url is None:
        return None
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    out = {}
    for m in re.finditer(r'^raftkube_proxy_sync_latency_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M):
        out[float(m.group(1))] = float(m.group(2))
    return out


def _bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The upper bound of the bucket holding quantile q of the observations between scrapes."""
    delta = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0
    if not total:
        return None
    for le, n in delta:
        if n >= q * total:
            return le
    return None


async def _nft_chains(ns: str, table: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        *in_ns(ns, "nft", "list", "chains", "ip"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return ""
    return out.decode()


def _pct(xs: list[float], p: float) -> float | None:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(len(xs) * p))], 4) if xs else None


async def measure(
    subject: Subject,
    ns: str,
    client: RestClient,
    services: int,
    changes: int,
    interval: float,
    start_index: int,
    kubeconfig_path: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    started = time.monotonic()
    proc = subject.start(ns, kubeconfig_path)
    try:
        # the first full sync: every Service's chain is there (its listing names N svc chains)
        deadline = started + HEALTHY_TIMEOUT_S
        full = None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{subject.name} exited ({proc.returncode}); its log: {subject.log}")
            listing = await _nft_chains(ns, subject.table)
            if _complete(listing, subject, services):
                full = time.monotonic() - started
                break
            await asyncio.sleep(0.2)
        if full is None:
            raise RuntimeError(f"{subject.name}: no full table within {HEALTHY_TIMEOUT_S:.0f} s")
        healthy = subject.healthy()
        say(f"network: {subject.name}: table with {services} Services live {full:.1f} s after start")
        before = _scrape(subject.metrics_url)
        pending: list[Change] = []
        done: list[Change] = []
        listings: list[float] = []
        writing = True

        async def poll() -> None:
            last_start = time.monotonic()
            while writing or pending:
                t0 = time.monotonic()
                listing = await _nft_chains(ns, subject.table)
                t1 = time.monotonic()
                listings.append(t1 - t0)
                for c in list(pending):
                    if c.written is not None and t1 - c.written > SEEN_TIMEOUT_S:
                        pending.remove(c)
                        done.append(c)
                    elif c.matches(listing):
                        c.seen, c.seen_after_listing_from = t1, last_start
                        pending.remove(c)
                        done.append(c)
                last_start = t0

        poller = asyncio.create_task(poll())
        try:
            tick = time.monotonic()
            for k in range(changes):
                i = (k * 37 + start_index) % services
                address = _changed_addr(start_index + k)
                eps = slice_of(i)
                eps["endpoints"][0]["addresses"] = [address]
                c = Change(k, i, address, subject.shows(i, eps, address))
                pending.append(c)
                path = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices/svc-{i}-bench"
                await client.patch(path, {"endpoints": eps["endpoints"]})
                c.written = time.monotonic()
                tick += interval
                await asyncio.sleep(max(0.0, tick - time.monotonic()))
        finally:
            writing = False
            await asyncio.wait_for(poller, SEEN_TIMEOUT_S + 60)
        after = _scrape(subject.metrics_url)
        seen = [c for c in done if c.seen is not None and c.written is not None]
        lat = [max(0.0, c.seen - c.written) for c in seen]  # type: ignore[operator]
        lower = [max(0.0, c.seen_after_listing_from - c.written) for c in seen]  # type: ignore[operator]
        out: dict[str, Any] = {
            "proxy": subject.name,
            "table": subject.table,
            "full_table_after_start_s": round(full, 2),
            "healthy_at_full_table": healthy,
            "changes": changes,
            "seen": len(seen),
            "missed": changes - len(seen),
            "p50_s": _pct(lat, 0.5),
            "p99_s": _pct(lat, 0.99),
            "max_s": round(max(lat), 4) if lat else None,
            "mean_s": round(sum(lat) / len(lat), 4) if lat else None,
            "lower_bound_p50_s": _pct(lower, 0.5),
            "lower_bound_p99_s": _pct(lower, 0.99),
            "listing_p50_s": _pct(listings, 0.5),
            "listings": len(listings),
            "latencies_s": [round(x, 4) for x in lat],
        }
        if before is not None and after is not None:
            total = max(after.values(), default=0) - max(before.values(), default=0)
            out["own_metric"] = {
                "syncs": int(total),
                "p50_bucket_le_s": _bucket_quantile(before, after, 0.5),
                "p99_bucket_le_s": _bucket_quantile(before, after, 0.99),
            }
        return out
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _complete(listing: str, subject: Subject, services: int) -> bool:
    if subject.table == "kube-proxy":
        return listing.count("chain service-") >= services
    return listing.count("chain svc-") >= services


# -- the cluster ---------------------------------------------------------------------------------


async def _populate(client: RestClient, services: int, say: Callable[[str], None]) -> float:
    t0 = time.monotonic()
    await client.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    # the node the proxies serve: kube-proxy waits for its Node (its addresses) before it syncs
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE_NAME, "labels": {"bench": "network"}}}
    created = await client.create("/api/v1/nodes", node)
    created["status"] = {"addresses": [{"type": "InternalIP", "address": GATEWAY}]}
    await client.replace(f"/api/v1/nodes/{NODE_NAME}/status", created)
    queue = list(range(services))

    async def worker() -> None:
        while queue:
            i = queue.pop()
            await client.create(f"/api/v1/namespaces/{NAMESPACE}/services", service_of(i))
            await client.create(f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices", slice_of(i))

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))
    took = time.monotonic() - t0
    say(f"network: {services} Services and EndpointSlices created in {took:.1f} s")
    return took


def _peer_kubeconfig(admin: Path, port: int, into: Path) -> Path:
    text = admin.read_text()
    text2 = re.sub(r"server: https://127\.0\.0\.1:\d+", f"server: https://127.0.0.1:{port}", text)
    if text2 == text:
        raise RuntimeError(f"{admin}: no https://127.0.0.1 server to point at the relay")
    path = into / "kube-proxy.kubeconfig"
    path.write_text(text2)
    path.chmod(0o600)
    return path


def run(
    services: int, changes: int, interval: float, peer: bool, say: Callable[[str], None], keep: bool = False
) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="raftkube-bench-network-"))
    data_dir = tmp / "cluster"
    logs = tmp / "logs"
    logs.mkdir()
    env = child_env({"XDG_STATE_HOME": str(tmp / "state")})
    result: dict[str, Any] = {"services": services, "changes": changes, "interval_s": interval}
    net = Network()
    try:
        say(f"network: raftkube up (no kubelets) in {data_dir}")
        up = ["up", "--detach", "--free-ports", "--kubelets", "0", "--hollow-nodes", "0", "--data-dir", str(data_dir)]
        proc = _raftkube(up, env, UP_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"raftkube up failed ({proc.returncode}): {proc.stderr[-800:]}")
        from components.cli.launcher import LocalComponent

        LocalComponent(data_dir, "controller-manager").stop()
        admin = LocalApiserver(data_dir).kubeconfig
        result["populate_s"] = round(asyncio.run(_populate_with(admin, services, say)), 2)
        result["ours"] = asyncio.run(
            _measure_with(ours(admin, logs), net.add_ns("p"), admin, services, changes, interval, 0, say)
        )
        if peer:
            if KUBE_PROXY.is_file():
                result["kube_proxy"] = {}
                for n, min_sync in enumerate(PEER_MIN_SYNC):
                    ns = net.add_ns(f"k{n}")
                    result["kube_proxy"][min_sync or "default"] = asyncio.run(
                        _measure_peer(
                            admin, logs, tmp, ns, services, changes, interval, (n + 1) * changes, min_sync, say
                        )
                    )
            else:
                result["kube_proxy"] = {"not_run": f"no kube-proxy binary at {KUBE_PROXY}"}
            if "not_run" not in result["kube_proxy"]:  # ours again after the peer: neither always goes first
                start = (len(PEER_MIN_SYNC) + 1) * changes
                again = asyncio.run(
                    _measure_with(ours(admin, logs), net.add_ns("p2"), admin, services, changes, interval, start, say)
                )
                result["ours_again"] = again | {"proxy": "raftkube proxy (again, after kube-proxy)"}
        return result
    finally:
        net.close()
        if data_dir.exists():
            with contextlib.suppress(subprocess.TimeoutExpired):
                _raftkube(["down", "--data-dir", str(data_dir)], env, DOWN_TIMEOUT_S)
        kill_leftovers(data_dir, say)
        if keep:
            say(f"network: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


async def _populate_with(admin: Path, services: int, say: Callable[[str], None]) -> float:
    async with RestClient(kubeconfig.load(admin), user_agent="raftkube-bench-network") as client:
        return await _populate(client, services, say)


async def _measure_with(
    subject: Subject,
    ns: str,
    admin: Path,
    services: int,
    changes: int,
    interval: float,
    start_index: int,
    say: Callable[[str], None],
) -> dict[str, Any]:
    async with RestClient(kubeconfig.load(admin), user_agent="raftkube-bench-network") as client:
        return await measure(subject, ns, client, services, changes, interval, start_index, admin, say)


async def _measure_peer(
    admin: Path,
    logs: Path,
    tmp: Path,
    ns: str,
    services: int,
    changes: int,
    interval: float,
    start_index: int,
    min_sync: str | None,
    say: Callable[[str], None],
) -> dict[str, Any]:
    endpoint = LocalApiserver(admin.parent).recorded()
    if endpoint is None:
        raise RuntimeError("the apiserver recorded no endpoint")
    relay = Relay(ns, ("127.0.0.1", int(endpoint.url.rsplit(":", 1)[1])))
    await relay.start()
    try:
        kc = _peer_kubeconfig(admin, relay.port, tmp)
        async with RestClient(kubeconfig.load(admin), user_agent="raftkube-bench-network") as client:
            out = await measure(
                kube_proxy(logs, min_sync), ns, client, services, changes, interval, start_index, kc, say
            )
        out["note"] = (
            "its API traffic passes a TCP relay in the benchmark (the namespace cannot reach the host's loopback)"
        )
        return out
    finally:
        await relay.close()
