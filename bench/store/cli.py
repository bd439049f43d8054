"""`raftkube bench store`: the store side by side with etcd 3.4, etcd 3.6 and a pysyncobj dict.

    raftkube bench store [--peers etcd,etcd36,pysyncobj] [--members 3|5] [--quick] [--tls both|on|off]
                         [--only writes,reads,watch,failover,restart,slow-watchers]
    raftkube bench store --api etcd [--quick] [--tls on|off] [--levels ...] [--seconds S | --total N]
                         [--workloads put,range-linearizable,range-serializable,txn-put,watch-latency]

`--api native` (the default) measures every system through its own protocol with our load
generators, as below.  `--api etcd` (bench/store/etcd_api.py) measures raftkube through its
etcd v3 API beside etcd 3.6, both driven by etcd's own load tool (etcd-benchmark, built by
`raftkube peers build --only etcd-benchmark`) with the same flags, into
bench/results/store-etcd-api.json and .md.

Every system runs its members as local processes on free 127.0.0.1 ports in a temp dir,
with fsync on; load generators run in processes of their own and report their CPU.  `etcd` is
Debian's etcd 3.4 (/usr/bin/etcd), `etcd36` the etcd 3.6 `raftkube peers build --only etcd`
builds into the peers cache; a peer asked for and not there ends the run (exit 1) before
anything starts.  With
--tls both (the default) the write phase runs raftkube and each etcd both in plaintext and with
mutual TLS, side by side, and slow-watchers runs raftkube with TLS (as `store up` does); the
other phases run without TLS unless --tls on.  A
progress line per phase goes to stderr, the table to stdout; the JSON (with machine and
versions) and a PNG go to bench/results/.  Every process started is killed by pid at the
end, also on Ctrl-C or an error.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from bench.store import procs
from bench.store.progress import Progress

if TYPE_CHECKING:
    from bench.store.context import Context, Sizes

# Only the standard library above: the `raftkube` command imports this module, and must work
# without the bench extra (grpcio, pysyncobj, matplotlib) for everything but this benchmark.
SYSTEMS = ("raftkube", "etcd", "etcd36", "pysyncobj")
PHASES = ("writes", "reads", "watch", "failover", "restart", "slow-watchers")
TLS_MODES = ("both", "on", "off")
APIS = ("native", "etcd")
ETCD_WORKLOADS = ("put", "range-linearizable", "range-serializable", "txn-put", "watch-latency")
"""`--api etcd`'s workloads (bench.store.etcd_tool.WORKLOADS, which a test keeps equal): named
here so that parsing the command line imports nothing but the standard library."""


def csv_list(allowed: tuple[str, ...], what: str) -> Any:
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {what}: {', '.join(bad)} (known: {', '.join(allowed)})")
        return items

    return parse


def _pair(text: str) -> tuple[int, int]:
    try:
        total, stalled = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOTAL,STALLED (two integers), got {text!r}") from None
    if not 1 <= stalled < total:
        raise argparse.ArgumentTypeError(f"need 1 <= STALLED < TOTAL, got {text!r}")
    return total, stalled


def positive_seconds(text: str) -> float:
    v = float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {v}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api",
        choices=APIS,
        default="native",
        help="native (default): every system through its own protocol, the phases below; etcd: raftkube's "
        "etcd v3 API and etcd 3.6, both driven by etcd's own load tool (etcd-benchmark) with the same flags",
    )
    p.add_argument(
        "--workloads",
        type=csv_list(ETCD_WORKLOADS, "workload"),
        help=f"--api etcd: workloads to run (default: all of {','.join(ETCD_WORKLOADS)})",
    )
    p.add_argument(
        "--total",
        type=positive_int,
        help="--api etcd: requests per level (watch-latency: puts) instead of sizing each level by --seconds",
    )
    p.add_argument(
        "--peers",
        type=csv_list(SYSTEMS[1:], "peer"),
        default=["etcd", "pysyncobj"],
        help="systems to compare raftkube with: etcd (3.4, /usr/bin/etcd), etcd36 (3.6, built by `raftkube peers "
        "build --only etcd`), pysyncobj (default: etcd,pysyncobj)",
    )
    p.add_argument("--members", type=int, choices=(3, 5), default=3, help="members per system (default 3)")
    p.add_argument(
        "--quick", action="store_true", help="shorter phases and smaller data (10k catch-up, 3 kills, 20k keys)"
    )
    p.add_argument(
        "--only",
        type=csv_list(PHASES, "phase"),
        default=list(PHASES),
        help=f"phases to run (default: all of {','.join(PHASES)})",
    )
    p.add_argument(
        "--tls",
        choices=TLS_MODES,
        default="both",
        help="both (default): writes with and without TLS for raftkube and etcd, slow-watchers with TLS, other "
        "phases without; on: every phase with TLS; off: every phase without (pysyncobj has no TLS); "
        "--api etcd: mutual TLS for both systems unless off",
    )
    p.add_argument(
        "--slow-watchers",
        type=_pair,
        metavar="TOTAL,STALLED",
        help="slow-watchers: watchers on the member and how many of them never read (default 1000,10)",
    )
    p.add_argument(
        "--seconds",
        type=positive_seconds,
        help="override the measuring time of each write/read/watch level (--api etcd: of each level, 6 s; 1 s quick)",
    )
    p.add_argument(
        "--levels",
        type=csv_list(("1", "16", "64", "256"), "level"),
        help="write levels; --api etcd: the client counts every workload runs at (default 1,16,64,256)",
    )
    p.add_argument("--clients", type=int, default=2, help="load generator processes at 16+ in flight (default 2)")
    p.add_argument(
        "--json",
        type=Path,
        help="where to write the results (default bench/results/store.json; --api etcd: "
        "bench/results/store-etcd-api.json, and the Markdown table beside it as .md)",
    )
    p.add_argument("--png", type=Path, default=Path("bench/results/store.png"), help="where to write the plot")
    p.add_argument("--config", type=Path, default=Path("cluster.toml"), help="raftkube settings ([store])")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (members' logs) after the run")


def sizes_from(args: argparse.Namespace) -> Sizes:
    from bench.store.context import Sizes

    s = Sizes.quick() if args.quick else Sizes()
    if args.seconds:
        s.write_s = s.read_s = s.watch_s = args.seconds
        s.warmup_s = min(s.warmup_s, args.seconds / 2)
        s.slow_warmup_s = min(s.slow_warmup_s, args.seconds)
        s.slow_backup_s = min(s.slow_backup_s, 2 * args.seconds)
    if args.levels:
        s.write_levels = tuple(int(x) for x in args.levels)
    if args.slow_watchers:
        s.slow_watchers, s.slow_stalled = args.slow_watchers
    s.clients = max(1, args.clients)
    return s


def _on_signal(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    if args.api == "etcd":
        try:
            from bench.store import etcd_api
        except ImportError as e:
            print(f"raftkube bench store: {e} (install the bench extra: pip install -e '.[bench]')", file=sys.stderr)
            return 1
        return etcd_api.run(args)
    args.json = args.json or Path("bench/results/store.json")
    try:
        from bench.store import plot, report, targets
        from bench.store.context import Context
        from bench.store.peers import PeerError, etcd36_binary, etcd_binary
        from bench.store.phases import failover, reads, restart, slow_watchers, watch, writes
    except ImportError as e:
        print(f"raftkube bench store: {e} (install the bench extra: pip install -e '.[bench]')", file=sys.stderr)
        return 1

    systems = ["raftkube", *[p for p in dict.fromkeys(args.peers) if p != "raftkube"]]
    finders = {"etcd": etcd_binary, "etcd36": etcd36_binary}
    try:
        for system in systems:
            if system in finders:
                finders[system]()
    except PeerError as e:
        print(f"raftkube bench store: {e}", file=sys.stderr)
        return 1
    sizes = sizes_from(args)
    root = Path(tempfile.mkdtemp(prefix="raftkube-bench-store-"))
    progress = Progress()
    ctx = Context(root, systems, args.members, sizes, progress, args.config, args.tls)
    runners = {
        "writes": writes.run,
        "reads": reads.run,
        "watch": watch.run,
        "failover": failover.run,
        "restart": restart.run,
        "slow-watchers": slow_watchers.run,
    }
    old = signal.signal(signal.SIGTERM, _on_signal)
    machine = report.machine()
    phases: dict[str, Any] = {}
    failed: dict[str, str] = {}
    t0 = time.monotonic()
    ok = False
    try:
        for name in PHASES:
            if name not in args.only:
                continue
            try:
                phases[name] = runners[name](ctx)
            except KeyboardInterrupt:
                raise
            except Exception as e:
                progress.end(f"FAILED: {type(e).__name__}: {e}")
                failed[name] = f"{type(e).__name__}: {e}"
            finally:
                procs.kill_all()
        ok = True
    finally:
        procs.kill_all()
        signal.signal(signal.SIGTERM, old)
        progress.end()
        if not args.keep and ok and not failed:
            shutil.rmtree(root, ignore_errors=True)
        elif not ok or failed:
            print(f"member and load generator logs kept in {root}", file=sys.stderr)
    config = {
        "systems": systems,
        "members": args.members,
        "quick": args.quick,
        "tls": args.tls,
        "phases": [p for p in PHASES if p in args.only],
        "sizes": asdict(sizes),
        "peers": {s: _describe(s, ctx) for s in systems},
        "wall_s": time.monotonic() - t0,
        "failed_phases": failed,
    }
    found = targets.evaluate(phases)
    doc = report.document(config, machine, phases, found)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(report.render(doc))
    try:
        plot.plot(doc, args.png)
        print(f"\nwritten {args.json} and {args.png}")
    except ImportError as e:
        print(f"\nwritten {args.json}; no plot ({e}: pip install -e '.[bench]')")
    for name, err in failed.items():
        print(f"phase {name} failed: {err}", file=sys.stderr)
    return 1 if failed else 0


def _describe(system: str, ctx: Context) -> dict[str, Any]:
    """Its version and the settings it ran with, from a peer built for the purpose (never started)."""
    from bench.store.peers import make_peer

    return make_peer(system, ctx.root / "describe", ctx.members, ctx.config).describe()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
