"""`raftkube bench network`: Service traffic through the proxy against pod-to-pod direct, and
the time from an EndpointSlice change to its rule being live (target p99 <= 1 s, 1,000 Services).

    raftkube bench network [--quick] [--duration S] [--services N] [--changes M] [--no-peer]

Root only: everything happens in network namespaces it creates (`rkbn-<hex>-<role>`) and
deletes, never in the host's.  The datapath (datapath.py): 2 server pods and a client pod on a
private bridge, the proxy's table for one ClusterIP; direct and through the ClusterIP, `--duration`
seconds each.  The sync latency (sync.py): a real `raftkube up` without kubelets, N Services and
slices, `raftkube proxy --netns`, then M slice changes; the peer is upstream kube-proxy in
nftables mode when built at $RAFTKUBE_BENCH_KUBE_PROXY (default /tmp/kube-proxy).  --quick:
1 s a path, 50 Services, 20 changes, no results file.  Progress on stderr, the table and one
JSON line on stdout, the JSON in bench/results/network.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _positive(cap: float, whole: bool = True) -> Any:
    def parse(text: str) -> float:
        try:
            v = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not 0 < v <= cap:
            raise argparse.ArgumentTypeError(f"must be above 0 and at most {cap:g}, got {text}")
        return v

    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="1 s a path, 50 Services, 20 changes; no results file")
    p.add_argument("--duration", type=_positive(120, whole=False), help="seconds of each datapath leg (default 5)")
    p.add_argument("--services", type=_positive(5000), help="Services (default 1000)")
    p.add_argument("--changes", type=_positive(2000), help="EndpointSlice changes (default 100)")
    p.add_argument("--interval", type=_positive(10, whole=False), default=0.1, help="seconds between changes")
    p.add_argument("--workers", type=_positive(16), default=2, help="client processes of the datapath")
    p.add_argument("--concurrency", type=_positive(256), default=16, help="connections in flight per client process")
    p.add_argument("--no-peer", action="store_true", help="do not run upstream kube-proxy even when built")
    p.add_argument("--skip-datapath", action="store_true", help="only the sync latency")
    p.add_argument("--skip-sync", action="store_true", help="only the datapath")
    p.add_argument("--json", type=Path, default=Path("bench/results/network.json"), help="where to write the results")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")


def run(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("raftkube bench network: needs root (it creates network namespaces)", file=sys.stderr)
        return 2
    from bench.network import datapath, report, sync

    duration = args.duration or (1.0 if args.quick else 5.0)
    services = args.services or (50 if args.quick else 1000)
    changes = args.changes or (20 if args.quick else 100)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    machine = report.machine()
    config = {
        "quick": args.quick,
        "duration_s": duration,
        "services": services,
        "changes": changes,
        "interval_s": args.interval,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "kube_proxy_binary": str(sync.KUBE_PROXY) if sync.KUBE_PROXY.is_file() and not args.no_peer else None,
    }
    failed: dict[str, str] = {}
    dp = sy = None
    started = time.monotonic()
    if not args.skip_datapath:
        try:
            dp = datapath.run(duration, args.workers, args.concurrency, say, cycles=1 if args.quick else 2)
        except Exception as e:  # the other half still runs; the failure is in the results
            traceback.print_exc()
            failed["datapath"] = f"{type(e).__name__}: {e}"
    if not args.skip_sync:
        try:
            sy = sync.run(services, changes, args.interval, not args.no_peer, say, keep=args.keep)
        except Exception as e:
            traceback.print_exc()
            failed["sync"] = f"{type(e).__name__}: {e}"
    config["wall_s"] = round(time.monotonic() - started, 1)
    doc = report.document(config, machine, dp, sy, failed)
    print(report.render(doc))
    print(json.dumps(doc, separators=(",", ":")))
    if not args.quick:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        say(f"network: wrote {args.json}")
    return 1 if failed else 0
