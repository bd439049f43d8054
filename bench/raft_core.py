"""CPU cost of the pure Raft core: three in-process nodes over an instant network.

Each round proposes one batch of entries at the leader and runs the cluster until every
node has applied it (persist to MemoryStorage, deliver, apply, advance), so the figure
includes replication, commit and apply on all three nodes — everything but real I/O.

    raftkube bench raft-core [--seconds S] [--value-size B] [--json PATH] [--config cluster.toml]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from store.config import RaftSettings, load_raft_settings
from store.raft import Config, EntryType, MemoryStorage, RawNode
from store.raft.types import ConfChange

BATCH_SIZES = (1, 64, 1024)


@dataclass
class Figure:
    batch: int
    entries: int
    rounds: int
    cpu_seconds: float
    wall_seconds: float

    @property
    def cpu_us_per_entry(self) -> float:
        return self.cpu_seconds / self.entries * 1e6

    @property
    def entries_per_second(self) -> float:
        return self.entries / self.wall_seconds


class InstantCluster:
    """Three RawNodes whose messages are delivered as soon as they are sent."""

    def __init__(self, settings: RaftSettings, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.storages = {i: MemoryStorage() for i in ids}
        self.nodes = {
            i: RawNode(
                Config(
                    id=i,
                    storage=self.storages[i],
                    rng=random.Random(i),
                    election_tick=settings.election_ticks,
                    heartbeat_tick=settings.heartbeat_ticks,
                    max_size_per_msg=settings.max_size_per_msg,
                    max_inflight_msgs=settings.max_inflight_msgs,
                    pre_vote=settings.pre_vote,
                    check_quorum=settings.check_quorum,
                )
            )
            for i in ids
        }
        self.applied = dict.fromkeys(ids, 0)
        for n in self.nodes.values():
            n.bootstrap(list(ids))
        self.run()
        self.nodes[ids[0]].campaign()
        self.run()
        self.leader = self.nodes[ids[0]]

    def run(self) -> None:
        """Process readies and deliver messages until nothing moves."""
        nodes = self.nodes
        moved = True
        while moved:
            moved = False
            for i, n in nodes.items():
                if not n.has_ready():
                    continue
                moved = True
                rd = n.ready()
                st = self.storages[i]
                if rd.snapshot is not None:
                    st.apply_snapshot(rd.snapshot)
                st.append(rd.entries)
                if rd.hard_state is not None:
                    st.set_hard_state(rd.hard_state)
                for m in rd.messages:
                    nodes[m.to].step(m)
                for e in rd.committed_entries:
                    if e.type == EntryType.CONF_CHANGE:
                        n.apply_conf_change(ConfChange.decode(e.data))
                if rd.committed_entries:
                    self.applied[i] = rd.committed_entries[-1].index
                n.advance(rd)

    def compact(self) -> None:
        """Keep memory flat over long runs, as a member's snapshots would."""
        for i, st in self.storages.items():
            idx = self.applied[i]
            if idx > st.first_index() + 10_000:
                st.create_snapshot(idx, self.nodes[i].raft.conf_state(), b"")
                st.compact(idx)


def measure(batch: int, seconds: float, value_size: int, settings: RaftSettings | None = None) -> Figure:
    cluster = InstantCluster(settings or RaftSettings())
    payloads = [bytes([i % 251]) * value_size for i in range(batch)]
    target = cluster.leader.raft.log.last_index()
    rounds = entries = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall0 < seconds or rounds < 3:
        cluster.leader.propose_many(payloads)
        cluster.run()
        target += batch
        if min(cluster.applied.values()) < target:
            raise AssertionError(f"batch not applied everywhere: {cluster.applied} < {target}")
        rounds += 1
        entries += batch
        if rounds % 64 == 0:
            cluster.compact()
    return Figure(batch, entries, rounds, time.process_time() - cpu0, time.perf_counter() - wall0)


def machine() -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=_positive_float, default=2.0, help="measuring time per batch size")
    p.add_argument("--value-size", type=_positive_int, default=256, help="bytes per entry")
    p.add_argument("--json", type=Path, default=Path("bench/results/raft_core.json"), help="where to write results")
    p.add_argument("--config", type=Path, default=Path("cluster.toml"), help="Raft settings ([store.raft])")


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    settings = load_raft_settings(args.config) if args.config.exists() else RaftSettings()
    figures = [measure(b, args.seconds, args.value_size, settings) for b in BATCH_SIZES]
    print(f"Raft core, 3 nodes in one process, instant network, {args.value_size} B entries")
    print(f"{'batch':>6} {'entries':>10} {'CPU us/entry':>13} {'entries/s':>12}")
    for f in figures:
        print(f"{f.batch:>6} {f.entries:>10} {f.cpu_us_per_entry:>13.1f} {f.entries_per_second:>12,.0f}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "raft_core",
        "value_size": args.value_size,
        "machine": machine(),
        "settings": asdict(settings),
        "figures": [
            asdict(f) | {"cpu_us_per_entry": f.cpu_us_per_entry, "entries_per_second": f.entries_per_second}
            for f in figures
        ],
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
