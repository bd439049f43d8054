"""`raftkube bench store --api etcd`: raftkube through its etcd v3 API beside etcd 3.6, both
driven by etcd's own load tool (etcd-benchmark, etcd's tools/benchmark) with the same flags.

    raftkube bench store --api etcd [--quick] [--tls on|off] [--members 3|5] [--levels 1,16,64,256]
                         [--seconds S | --total N] [--workloads put,range-linearizable,...]

Two clusters of `--members` members on 127.0.0.1 with fsync on run side by side for the
whole run: raftkube (its members serve etcd's v3 gRPC API on their client ports) and the etcd
3.6 `raftkube peers build` builds, both with mutual TLS on client and peer ports unless
`--tls off` (the tool shows the cluster's own client certificate: raftkube's admin.crt, the
bench CA's for etcd).  Workloads, in order, each at 1, 16, 64 and 256 clients:

    put                 --key-size 8 --val-size 256 --key-space-size 10000 (random keys)
    range-linearizable  range of one key written first (val-size bytes), --consistency l
    range-serializable  the same, --consistency s
    txn-put             one put per txn, --key-size 8 --val-size 256 --key-space-size 10000
    watch-latency       one watch stream per client on one key, 100 puts/s to it: the time
                        from each put's answer to each watcher's event

Clients share gRPC connections, one per 16 clients (--conns 1, 1, 4, 16), and every
connection goes to the leader (--target-leader).  The tool runs a fixed number of requests
(`--total`), not a duration, so each level starts with a short pilot (max(100, 8 x clients)
requests, which also warms the connections and caches) whose rate sizes the measured run to
about `--seconds` (6 s; 1 s with --quick); a run that still ends before 60 % of that is run
again, sized from its own rate (at most twice), and the last run counts.  `--total N` runs N
requests per level instead, with no pilot.  watch-latency runs (seconds + 1) x 100 puts (its
first second's worth goes at once).  The systems take turns within each level (raftkube first at 1 and 64 clients,
etcd 3.6 first at 16 and 256), so that a neighbour's load on the shared machine hits both
alike; the machine's load average is recorded at the start and the end, since figures from
a busy machine mislead.

The table goes to stdout (and, as Markdown, beside the JSON), progress to stderr, the JSON
to bench/results/store-etcd-api.json.  Exit 1 when etcd 3.6 or etcd-benchmark is not built
(before anything starts, with the build command), or when any level failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from bench.store import etcd_tool, procs
from bench.store.etcd_tool import WORKLOADS, Shape, Summary
from bench.store.loadrun import server_cpu
from bench.store.peers import Peer, PeerError, etcd36_binary, make_peer
from bench.store.progress import Progress

SYSTEMS = ("raftkube", "etcd36")
NAMES = {"raftkube": "raftkube", "etcd36": "etcd 3.6"}
DEFAULT_JSON = Path("bench/results/store-etcd-api.json")
LEVELS = (1, 16, 64, 256)


@dataclass
class Plan:
    """What one run measures, and for how long."""

    levels: tuple[int, ...] = LEVELS
    seconds: float = 6.0
    """Each level's measured run is sized (from its pilot's rate, or a short run's) to last
    about this long."""
    total: int | None = None
    """Requests per level (watch-latency: puts) instead of sizing by `seconds`; no pilot."""
    workloads: tuple[str, ...] = WORKLOADS
    shape: Shape = field(default_factory=Shape)
    members: int = 3
    tls: bool = True

    @staticmethod
    def quick() -> Plan:
        return Plan(seconds=1.0)


def pilot_total(clients: int) -> int:
    """The pilot's requests: enough for every client to send several, and for a rate to mean
    something at one client, yet a fraction of a second on either system."""
    return max(100, 8 * clients)


SHORT_RUN = 0.6
"""A sized run that ends before this share of `seconds` is run again, sized from its own rate."""
RESIZES = 2
"""How many times a level's run may be sized again (each from the previous run's rate)."""


PILOT_EXPECTED_S = 5.0
"""What a pilot's timeout is reckoned from: it should take a fraction of a second, but its
system's rate is what it is there to find out."""


def sized_total(requests_per_s: float, seconds: float, clients: int) -> int:
    """The measured run's requests: `seconds` at the pilot's rate, yet at least two per client
    and at least 100, the fewest for which the tool reports a 99th percentile."""
    return max(2 * clients, 100, round(requests_per_s * seconds))


def run_timeout(expected_s: float | None) -> float:
    """How long one run of the tool may take before it is killed and its level failed: a
    generous multiple of what it should take (a watch whose events stop would wait forever)."""
    return 300.0 if expected_s is None else 60.0 + 10.0 * expected_s


class LevelFailed(Exception):
    """One run of the tool failed: it exited non-zero, timed out, or answered only errors."""


def children_cpu_s() -> float:
    """CPU seconds of every child this process has waited for: its delta around one run of the
    tool is the tool's own CPU (the members are not waited for while they run)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Runner:
    """Runs the tool against one cluster at a time, logging each run under `root/logs`."""

    def __init__(self, plan: Plan, root: Path, tool: Path, progress: Progress) -> None:
        self.plan = plan
        self.root = root
        self.tool = tool
        self.progress = progress
        self.logs = root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._seq = 0

    def endpoints(self, peer: Peer) -> list[str]:
        """The members' URLs as etcd clients write them (https:// with TLS, http:// without)."""
        scheme = "https" if peer.tls else "http"
        return [f"{scheme}://{e.split('://', 1)[-1]}" for e in peer.endpoints]

    def write_range_key(self, peer: Peer) -> None:
        """Put RANGE_KEY (val-size bytes) through the etcd API, for the range workloads to read."""
        from apiserver.storage.etcd_client import EtcdClient

        async def put() -> None:
            client = EtcdClient(peer.endpoints, timeout=10.0, tls=peer.client_tls)
            try:
                await client.put(etcd_tool.RANGE_KEY.encode(), b"v" * self.plan.shape.value_size)
            finally:
                await client.close()

        asyncio.run(put())

    def invoke(
        self, peer: Peer, workload: str, clients: int, total: int, expected_s: float | None, what: str
    ) -> tuple[dict[str, Summary], float, float]:
        """One run of the tool: its reports, its wall time and its CPU seconds."""
        self._seq += 1
        log = self.logs / f"{self._seq:03d}-{peer.label}-{workload}-{clients}-{what}.log"
        argv = etcd_tool.argv(
            self.tool, workload, clients, total, self.endpoints(peer), peer.client_tls, self.plan.shape
        )
        log.write_text(" ".join(argv) + "\n")
        timeout = run_timeout(expected_s)
        self.progress.update(f"{peer.label}, {clients} clients: {what} of {total:,}", transient=True)
        cpu0, t0 = children_cpu_s(), time.monotonic()
        proc = procs.spawn(argv, log=log, stdout=subprocess.PIPE)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            procs.kill(proc.pid)
            raise LevelFailed(f"{what} run gave no report within {timeout:.0f} s (log: {log})") from None
        wall, cpu = time.monotonic() - t0, children_cpu_s() - cpu0
        text = out.decode(errors="replace")
        with log.open("a") as f:
            f.write(f"\n--- stdout (exit {proc.returncode}, {wall:.2f} s) ---\n{text}")
        if proc.returncode != 0:
            raise LevelFailed(f"{what} run exited {proc.returncode}: {_last_words(log)} (log: {log})")
        try:
            return etcd_tool.parse(text), wall, cpu
        except ValueError as e:
            raise LevelFailed(f"{what} run: {e} (log: {log})") from None

    def level(self, peer: Peer, workload: str, clients: int) -> dict[str, Any]:
        """One level of one workload on one system.  Unless the requests are fixed (--total,
        watch-latency's puts), a pilot's rate sizes the run to `seconds`; a run that still ends
        before SHORT_RUN of them (a pilot's rate is its warm-up's too: raftkube's reached half
        its rate in the quick run's 16-client pilots) sizes the next from its own rate, up to
        RESIZES times, and the last run is the level's figure."""
        plan = self.plan
        watch = workload == "watch-latency"
        rate = plan.shape.watch_put_rate
        sizing: list[dict[str, Any]] = []
        if watch:
            total = plan.total or round(rate * (plan.seconds + 1))
            expected: float | None = etcd_tool.watch_seconds(total, rate)
        elif plan.total:
            total, expected = plan.total, None
        else:
            n = pilot_total(clients)
            reports, wall, _ = self.invoke(peer, workload, clients, n, PILOT_EXPECTED_S, "pilot")
            first = reports[""]
            if not first.requests or not first.requests_per_s:
                raise LevelFailed(f"the pilot's {n} requests got no answer but errors: {first.error_kinds}")
            sizing.append(_sizing_run(n, first))
            total, expected = sized_total(first.requests_per_s, plan.seconds, clients), plan.seconds
        for attempt in range(RESIZES + 1):
            pids = peer.pids()
            cpu0 = server_cpu(pids)
            reports, wall, client_cpu = self.invoke(peer, workload, clients, total, expected, "run")
            server = server_cpu(pids) - cpu0
            got = reports.get("watch events" if watch else "")
            if got is None:
                raise LevelFailed(f"no {'watch events ' if watch else ''}report in the tool's output")
            main = got
            if not sizing or attempt == RESIZES or not main.requests_per_s:
                break
            if (main.total_s or 0.0) >= SHORT_RUN * plan.seconds:
                break
            sizing.append(_sizing_run(total, main))
            total = sized_total(main.requests_per_s, plan.seconds, clients)
        row: dict[str, Any] = {"clients": clients, "conns": etcd_tool.conns_for(clients), "total": total}
        row |= main.to_json()
        row |= {
            "sizing": sizing,
            "wall_s": wall,
            "client_cpu_s": client_cpu,
            "client_cpu_pct": 100.0 * client_cpu / wall if wall else 0.0,
            "server_cpu_s": server,
            "server_cpu_pct": 100.0 * server / wall if wall else 0.0,
            "server_cpu_ms_per_op": 1e3 * server / main.requests if main.requests else None,
        }
        if watch:
            puts = reports.get("put")
            row |= {"watchers": clients, "put_rate": rate, "puts": puts.to_json() if puts else None}
        return row


def _sizing_run(total: int, summary: Summary) -> dict[str, Any]:
    """What the results keep of a run that only sized the next one."""
    return {
        "total": total,
        "requests_per_s": summary.requests_per_s,
        "total_s": summary.total_s,
        "errors": summary.errors,
    }


def _last_words(log: Path) -> str:
    """The tool's own complaint: the last lines of its stderr that are not gRPC's INFO chatter
    nor its progress bar."""
    try:
        lines = log.read_text(errors="replace").split("--- stdout", 1)[0].splitlines()[1:]
    except OSError:
        return "(no log)"
    said = [x.strip() for x in lines if x.strip() and " INFO: " not in x and "%" not in x]
    return " / ".join(said[-3:])[:400] or "(it said nothing)"


def check_peers() -> Path:
    """etcd-benchmark's path once etcd 3.6 and it are both built; PeerError naming the build
    command for whichever is not (a run never starts without both)."""
    missing: list[str] = []
    problems: list[str] = []
    try:
        etcd36_binary()
    except PeerError as e:
        missing.append("etcd")
        problems.append(str(e).split(": build with", 1)[0])
    tool: Path | None = None
    try:
        tool = etcd_tool.tool_binary()
    except etcd_tool.ToolMissing as e:
        missing.append(etcd_tool.PEER)
        problems.append(str(e))
    if tool is None or missing:
        raise PeerError(f"{'; '.join(problems)}: build with `raftkube peers build --only {','.join(missing)}`")
    return tool


def plan_from(args: argparse.Namespace) -> Plan:
    plan = Plan.quick() if args.quick else Plan()
    if args.seconds:
        plan.seconds = args.seconds
    if args.total:
        plan.total = args.total
    if args.levels:
        plan.levels = tuple(int(x) for x in args.levels)
    if args.workloads:
        plan.workloads = tuple(w for w in WORKLOADS if w in args.workloads)
    plan.members = args.members
    plan.tls = args.tls != "off"
    return plan


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    from bench.store import etcd_api_report, report, targets

    try:
        tool = check_peers()
    except PeerError as e:
        print(f"raftkube bench store --api etcd: {e}", file=sys.stderr)
        return 1
    plan = plan_from(args)
    out_json: Path = args.json or DEFAULT_JSON
    machine = report.machine() | {"etcd_benchmark": etcd_tool.tool_version()}
    root = Path(tempfile.mkdtemp(prefix="raftkube-bench-store-etcd-api-"))
    progress = Progress()
    runner = Runner(plan, root, tool, progress)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {s: {w: [] for w in plan.workloads} for s in SYSTEMS}
    failed: list[str] = []
    described: dict[str, Any] = {}
    old = signal.signal(signal.SIGTERM, _on_signal)
    t0 = time.monotonic()
    ok = False
    try:
        with contextlib.ExitStack() as stack:
            clusters: dict[str, Peer] = {}
            for system in SYSTEMS:
                progress.start(f"{NAMES[system]} cluster")
                peer = make_peer(system, root / system, plan.members, args.config, plan.tls)
                stack.callback(peer.stop)
                progress.update(f"starting {plan.members} members{' with mutual TLS' if plan.tls else ''}")
                peer.start(timeout=60)
                if any(w.startswith("range-") for w in plan.workloads):
                    runner.write_range_key(peer)
                described[system] = peer.describe() | {"tls": plan.tls}
                clusters[system] = peer
                progress.end("ready")
            for workload in plan.workloads:
                progress.start(workload)
                for i, clients in enumerate(plan.levels):
                    for system in SYSTEMS if i % 2 == 0 else SYSTEMS[::-1]:
                        progress.update(f"{NAMES[system]}, {clients} clients")
                        try:
                            row = runner.level(clusters[system], workload, clients)
                        except LevelFailed as e:
                            row = {"clients": clients, "conns": etcd_tool.conns_for(clients), "failed": str(e)}
                            failed.append(f"{NAMES[system]} {workload} at {clients} clients: {e}")
                        results[system][workload].append(row)
                progress.end("done")
        ok = True
    except Exception as e:  # a cluster that did not start: reported with what was measured
        failed.append(f"{type(e).__name__}: {e}")
        ok = True
    finally:
        procs.kill_all()
        signal.signal(signal.SIGTERM, old)
        progress.end()
        if ok and not failed and not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"member and tool logs kept in {root}", file=sys.stderr)
    machine["load_average_at_end"] = list(os.getloadavg())
    config = {
        "api": "etcd",
        "tool": f"{etcd_tool.PEER} {etcd_tool.tool_version()} (etcd's tools/benchmark)",
        "systems": list(SYSTEMS),
        "members": plan.members,
        "quick": args.quick,
        "tls": plan.tls,
        "plan": asdict(plan),
        "conns": "max(1, clients // 16)",
        "target_leader": True,
        "peers": described,
        "wall_s": time.monotonic() - t0,
        "failed": failed,
    }
    found = targets.evaluate_etcd_api(results)
    doc = {
        "benchmark": "store-etcd-api",
        "machine": machine,
        "config": config,
        "results": results,
        "targets": [t.to_json() for t in found],
    }
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(doc, indent=2) + "\n")
    out_md = out_json.with_suffix(".md")
    out_md.write_text(etcd_api_report.markdown(doc))
    print(etcd_api_report.render(doc))
    print(f"\nwritten {out_json} and {out_md}")
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0
