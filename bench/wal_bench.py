"""WAL write cost: batches of 1, 64 and 1024 entries of 300 B, with fdatasync on and off.

Each `save()` is timed alone (entry objects are built outside the timing, as the Raft core
hands them over), so "us/entry" is encode + one write() (+ one fdatasync when on) per
batch, divided by the batch size.  With fdatasync off, the fdatasync of each full 64 MiB
segment at rollover (the page cache's backlog) is part of the figure.  Also measured:
encoding alone, and fdatasync latency after a 1-entry and after a 1024-entry write.  Run
it on the disk the members will use (`--dir`): on a tmpfs fdatasync is free.

    python -m bench.wal_bench [--seconds S] [--value-size B] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.raft_core import _positive_float, _positive_int, machine
from store.raft.types import Entry, HardState
from store.wal import WAL
from store.wal.record import encode_batch

BATCH_SIZES = (1, 64, 1024)


@dataclass
class Figure:
    batch: int
    sync: bool
    entries: int
    saves: int
    seconds: float
    """Time inside save() only."""

    @property
    def us_per_entry(self) -> float:
        return self.seconds / self.entries * 1e6

    @property
    def entries_per_second(self) -> float:
        return self.entries / self.seconds


def _batch(first: int, n: int, payload: bytes) -> list[Entry]:
    return [Entry(term=1, index=i, data=payload) for i in range(first, first + n)]


def measure(wal_dir: Path, batch: int, sync: bool, seconds: float, value_size: int) -> Figure:
    payload = bytes(range(256)) * (value_size // 256) + bytes(value_size % 256)
    w = WAL.create(wal_dir, {"member_id": 1})
    spent = 0.0
    saves = 0
    first = 1
    wall0 = time.perf_counter()
    while time.perf_counter() - wall0 < seconds or saves < 3:
        ents = _batch(first, batch, payload)
        hs = HardState(term=1, vote=1, commit=first - 1)
        t0 = time.perf_counter()
        w.save(hs, ents, sync=sync)
        spent += time.perf_counter() - t0
        saves += 1
        first += batch
    w.close()
    shutil.rmtree(wal_dir)
    return Figure(batch, sync, saves * batch, saves, spent)


def encode_us_per_entry(batch: int, value_size: int) -> float:
    ents = _batch(1, batch, bytes(value_size))
    rounds = max(200, 50_000 // batch)
    hs = HardState(term=1, vote=1, commit=0)
    t0 = time.perf_counter()
    for _ in range(rounds):
        encode_batch(None, False, ents, hs)
    return (time.perf_counter() - t0) / rounds / batch * 1e6


def fsync_latency(wal_dir: Path, batch: int, value_size: int, samples: int = 300) -> dict[str, float]:
    """fdatasync alone, after appending one batch of `batch` entries (µs)."""
    w = WAL.create(wal_dir, {"member_id": 1})
    lat = []
    payload = bytes(value_size)
    for k in range(samples):
        w.save(None, _batch(k * batch + 1, batch, payload), sync=False)
        t0 = time.perf_counter()
        w.sync()
        lat.append((time.perf_counter() - t0) * 1e6)
    w.close()
    shutil.rmtree(wal_dir)
    lat.sort()
    return {"p50_us": statistics.median(lat), "p99_us": lat[int(len(lat) * 0.99)], "mean_us": statistics.fmean(lat)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=_positive_float, default=1.0, help="measuring time per configuration")
    p.add_argument("--value-size", type=_positive_int, default=300, help="bytes per entry")
    p.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary directory)")
    p.add_argument("--json", type=Path, default=Path("bench/results/wal.json"), help="where to write results")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    base = Path(tempfile.mkdtemp(prefix="wal-bench-", dir=args.dir))
    try:
        figures = [
            measure(base / f"b{b}-{int(s)}", b, s, args.seconds, args.value_size)
            for s in (False, True)
            for b in BATCH_SIZES
        ]
        encode = {b: encode_us_per_entry(b, args.value_size) for b in BATCH_SIZES}
        fsync = {b: fsync_latency(base / f"fsync{b}", b, args.value_size) for b in (1, 1024)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"WAL save(), {args.value_size} B entries, in {base.parent}")
    print(f"{'batch':>6} {'fdatasync':>9} {'saves':>8} {'us/entry':>9} {'entries/s':>12} {'encode us/entry':>16}")
    for f in figures:
        print(
            f"{f.batch:>6} {'on' if f.sync else 'off':>9} {f.saves:>8} {f.us_per_entry:>9.2f} "
            f"{f.entries_per_second:>12,.0f} {encode[f.batch]:>16.2f}"
        )
    for b, lat in fsync.items():
        print(
            f"fdatasync after a {b}-entry write: p50 {lat['p50_us']:.0f} us, p99 {lat['p99_us']:.0f} us, "
            f"mean {lat['mean_us']:.0f} us"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "wal",
        "value_size": args.value_size,
        "machine": machine(),
        "figures": [
            asdict(f) | {"us_per_entry": f.us_per_entry, "entries_per_second": f.entries_per_second} for f in figures
        ],
        "encode_us_per_entry": encode,
        "fdatasync_latency": fsync,
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
