"""`raftkube bench apiserver`: the apiserver over raftkube and over etcd, side by side.

    raftkube bench apiserver [--servers raftkube,kube-apiserver] [--storage raftkube,etcd] [--quick]
                             [--only fanout,throughput,lists,creates] [--http2] [--profile]

For each storage backend, in the same run: its store (raftkube: 3 members through the store
launcher, fsync on; etcd: one etcd 3.4 member), ONE `raftkube apiserver` process over it on a
free port, then the phases, with load generators in processes of their own:
  client      CPU per request of the load generators' HTTP client against httpx (first backend)
  fanout      (a) 1,000 watchers with fieldSelector=spec.nodeName=node-i + 10 unfiltered,
              pods created at 500/s: events delivered vs expected, delivery latency
  lists       (c) LIST of 10,000 pods, from the cache (resourceVersion=0) and consistent
  throughput  (b) 100 unfiltered watchers while creates go at full speed: events/s
  creates     (d) pod creates at 64 in flight: creates/s and latency
  custom      (f) a CRD's widgets created as in (d) and watched as in (b): the ratio to pods
  gates       (e) creates with the whole admission/authorization chain on against it off, two
              fresh apiservers over the raftkube store, plus one webhook (raftkube only)
  memory      (g) the apiserver's RSS per cached pod over 10,000 and 100,000 pods added (last:
              it starts from the pods the other phases left; --only memory from none)
A progress line per phase goes to stderr, the table to stdout; the JSON (machine, load
average, versions) and a PNG go to bench/results/.  --profile records the apiserver with
py-spy during every phase (raw stacks and a summary in the JSON).  Every process started is
killed by pid at the end, also on Ctrl-C or an error.
With `--servers ...,kube-apiserver` the upstream kube-apiserver 1.33 over three etcd 3.6
members (bench.apiserver.upstream; built by `raftkube peers build`, exit 2 naming it when
not) runs the same phases in the same run after ours, and a table puts each figure of ours
beside its figure with the ratio, CPU per request included (bench.apiserver.compare).
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
from typing import TYPE_CHECKING, Any

from bench.store import procs
from bench.store.cli import csv_list, positive_seconds
from bench.store.progress import Progress

if TYPE_CHECKING:
    from bench.apiserver.context import Sizes

# Only the standard library and bench.store's (standard-library-only) cli above: the `raftkube`
# command imports this module, and must work without the bench extra.
BACKENDS = ("raftkube", "etcd")
SERVERS = ("raftkube", "kube-apiserver")
"""kube-apiserver: the upstream 1.33 over etcd 3.6 (`raftkube peers build`), bench.apiserver.upstream."""
PHASES = ("client", "fanout", "lists", "throughput", "creates", "custom", "gates", "memory")


def _positive(text: str) -> int:
    v = int(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage",
        type=csv_list(BACKENDS, "storage"),
        default=list(BACKENDS),
        help="backends to run the apiserver over, in this order (default: raftkube,etcd)",
    )
    p.add_argument(
        "--servers",
        type=csv_list(SERVERS, "server"),
        default=["raftkube"],
        help="apiservers under test: raftkube (over each --storage), kube-apiserver (over etcd 3.6); default raftkube",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smaller and shorter: 100 node watchers, 1,000 pods, 20 throughput watchers, 3 s phases",
    )
    p.add_argument(
        "--only", type=csv_list(PHASES, "phase"), default=list(PHASES), help=f"phases (default: {','.join(PHASES)})"
    )
    p.add_argument("--watchers", type=_positive, help="override the fan-out node watchers (a) and watchers of (b)")
    p.add_argument(
        "--pods",
        type=_positive,
        help="override the pods created in (a), listed in (c) and the memory steps of (g) (N, 10N)",
    )
    p.add_argument("--seconds", type=positive_seconds, help="override the measuring time of (b) and (d)")
    p.add_argument("--rate", type=positive_seconds, help="override the create rate of (a), pods/s (default 500)")
    p.add_argument("--clients", type=_positive, default=2, help="load generator processes for watchers and writers")
    p.add_argument(
        "--http2",
        action="store_true",
        help="watchers share HTTP/2 connections (200 watches a connection) instead of one HTTP/1.1 connection each",
    )
    p.add_argument("--profile", action="store_true", help="record the apiserver with py-spy during every phase")
    p.add_argument("--json", type=Path, default=Path("bench/results/apiserver.json"), help="where to write the results")
    p.add_argument("--png", type=Path, default=Path("bench/results/apiserver.png"), help="where to write the plot")
    p.add_argument("--config", type=Path, default=Path("cluster.toml"), help="raftkube settings ([store])")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")


def sizes_from(args: argparse.Namespace) -> Sizes:
    from bench.apiserver.context import Sizes

    s = Sizes.quick() if args.quick else Sizes()
    if args.watchers:
        s.fanout_nodes = s.throughput_watchers = args.watchers
    if args.pods:
        s.fanout_pods = s.list_pods = args.pods
        s.memory_steps = (args.pods, 5 * args.pods)
    if args.seconds:
        s.throughput_s = s.create_s = args.seconds
        s.warmup_s = min(s.warmup_s, args.seconds / 2)
    if args.rate:
        s.fanout_rate = args.rate
    s.clients = args.clients
    s.watch_http2 = args.http2
    return s


def _on_signal(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace) -> int:
    try:
        from bench.apiserver import backends, compare, plot, report, targets, upstream
        from bench.apiserver.context import Context
        from bench.apiserver.phases import client, creates, custom, fanout, gates, lists, memory, throughput
        from bench.store.peers import PeerError, etcd_binary
    except ImportError as e:
        print(f"raftkube bench apiserver: {e} (install the bench extra: pip install -e '.[bench]')", file=sys.stderr)
        return 1
    if "etcd" in args.storage:
        try:
            etcd_binary()
        except PeerError as e:
            print(f"raftkube bench apiserver: {e}", file=sys.stderr)
            return 1
    runs = (list(args.storage) if "raftkube" in args.servers else []) + [s for s in args.servers if s == upstream.NAME]
    if upstream.NAME in runs:
        from bench.peers.upstream import PeerUnavailable, check_peers

        try:
            check_peers()
        except PeerUnavailable as e:
            print(f"raftkube bench apiserver: {e}", file=sys.stderr)
            return 2
    sizes = sizes_from(args)
    root = Path(tempfile.mkdtemp(prefix="raftkube-bench-apiserver-"))
    progress = Progress()
    profile_dir = args.json.parent / "profiles" if args.profile else None
    ctx = Context(root, sizes, progress, profile_dir)
    runners = {
        "client": client.run,
        "fanout": fanout.run,
        "lists": lists.run,
        "throughput": throughput.run,
        "creates": creates.run,
        "custom": custom.run,
        "gates": gates.run,
        "memory": memory.run,
    }
    old = signal.signal(signal.SIGTERM, _on_signal)
    machine = report.machine()
    phases: dict[str, Any] = {}
    failed: dict[str, str] = {}
    described: dict[str, Any] = {}
    t0 = time.monotonic()
    ok = False
    try:
        for name in runs:
            progress.start(f"{name}: starting")
            try:
                backend = (
                    upstream.start(root / name)
                    if name == upstream.NAME
                    else backends.start(name, root / name, args.config)
                )
            except Exception as e:
                progress.end(f"FAILED: {type(e).__name__}: {e}")
                failed[f"{name}/start"] = f"{type(e).__name__}: {e}"
                procs.kill_all()
                continue
            progress.end(f"apiserver pid {backend.pid} at {backend.endpoint.url} over {backend.endpoint.storage}")
            described[name] = backend.describe()
            try:
                namespaces = ctx.ensure_namespaces(backend)
                if upstream.NAME in runs:  # kube admits a pod only with its service account
                    upstream.ensure_service_accounts(backend, namespaces)
                for phase in PHASES:
                    if phase not in args.only or (phase == "client" and "client" in phases):
                        continue
                    if phase == "gates" and name != "raftkube":
                        continue  # the gates cost the apiserver the same over either store
                    try:
                        result = runners[phase](ctx, backend, namespaces)
                    except KeyboardInterrupt:
                        raise
                    except Exception as e:
                        progress.end(f"FAILED: {type(e).__name__}: {e}")
                        failed[f"{name}/{phase}"] = f"{type(e).__name__}: {e}"
                        continue
                    if phase == "client":
                        phases["client"] = result
                    else:
                        phases.setdefault(phase, {})[name] = result
            finally:
                backend.stop()
                procs.kill_all()
        ok = True
    finally:
        procs.kill_all()
        signal.signal(signal.SIGTERM, old)
        progress.end()
        if not args.keep and ok and not failed:
            shutil.rmtree(root, ignore_errors=True)
        elif not ok or failed:
            print(f"apiserver, store and load generator logs kept in {root}", file=sys.stderr)
    config = {
        "storage": args.storage,
        "servers": args.servers,
        "quick": args.quick,
        "phases": [p for p in PHASES if p in args.only],
        "sizes": asdict(sizes),
        "backends": described,
        "profile": args.profile,
        "wall_s": time.monotonic() - t0,
        "failed_phases": failed,
    }
    found = targets.evaluate(phases, args.storage)
    doc = report.document(config, machine, phases, found)
    compared = compare.rows(phases, runs[0]) if runs and runs[0] != upstream.NAME else []
    if compared:
        doc["comparison"] = {"ours": runs[0], "theirs": upstream.NAME, "rows": [r.to_json() for r in compared]}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(report.render(doc))
    if compared:
        print("\n" + "\n".join(compare.render(compared, runs[0])))
    try:
        plot.plot(doc, args.png)
        print(f"\nwritten {args.json} and {args.png}")
    except ImportError as e:
        print(f"\nwritten {args.json}; no plot ({e}: pip install -e '.[bench]')")
    for name, err in failed.items():
        print(f"{name} failed: {err}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
