"""etcd's own load tool, `etcd-benchmark` (etcd's tools/benchmark, which `raftkube peers build
--only etcd-benchmark` builds): where it is, the command lines `raftkube bench store --api etcd`
gives it, and what its output says.

The same binary with the same flags drives raftkube's etcd API and etcd 3.6, so neither side
is measured by a client of ours.  Each run prints one report of etcd's pkg/report (two for
watch-latency, titled "Put summary:" and "Watch events summary:"):

    Summary:
      Total:        0.0976 secs.        (the run, from the first request to the last answer)
      Slowest / Fastest / Average / Stddev: ... secs.
      Requests/sec: 2048.22             (answered without error, over Total)
    Response time histogram:
      0.00051 [1]   |...                (the counts add up to the requests answered)
    Latency distribution:
      50% in 0.0014 secs.
    Error distribution:
      [6]   etcdserver: request is too large

It leaves out a percentile whose value is 0 (watch events that arrive before the put that
caused them is answered count as 0: their latency is measured from that answer) and one it has
too few samples for (99 % needs 100 requests, 99.9 % needs 1,000): `parse` turns the first
into 0 and the second into None.  It exits 0 with errors counted in its report; a failed dial
or a failed watch-latency put ends it with exit 1 and a message on stderr.

Standard library only, so that the parser's unit test needs neither grpcio nor a cluster.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.store.tls import ClientTLS

PEER = "etcd-benchmark"
BUILD = f"raftkube peers build --only {PEER}"

WORKLOADS = ("put", "range-linearizable", "range-serializable", "txn-put", "watch-latency")
"""What `--api etcd` runs, in this order: each is one of the tool's subcommands."""

RANGE_KEY = "raftkube-bench-range"
"""The key the range workloads read, written (val-size bytes) before the first of them."""

PERCENTILES = ("10", "25", "50", "75", "90", "95", "99", "99.9")
"""The percentiles pkg/report prints, in its order."""


class ToolMissing(Exception):
    """etcd-benchmark is not built (or not as the manifest recorded it)."""


def tool_binary() -> Path:
    """The etcd-benchmark `raftkube peers build` built, unchanged since (its manifest's sha256);
    ToolMissing naming the build command otherwise.  It has no version command: its release is
    the one its folder and manifest name, which the build checked against its Go build info."""
    from bench.peers.manifest import Manifest, State
    from machinery.process import peers

    version, path = peers.pinned_version(PEER), peers.peer_path(PEER)
    state = Manifest(path.parent).state(PEER, version)
    if state is not State.PRESENT:
        raise ToolMissing(f"{PEER} {version} is {state.value} ({path})")
    return path


def tool_version() -> str:
    """The release the built tool was made from, as the peers manifest records it."""
    from machinery.process import peers

    return peers.pinned_version(PEER)


@dataclass(frozen=True)
class Shape:
    """The requests' shape: the same flags for every system."""

    key_size: int = 8
    value_size: int = 256
    keyspace: int = 10_000
    """--key-space-size: put picks each key at random among this many (txn-put cycles through them)."""
    watch_put_rate: int = 100
    """watch-latency's puts per second (the tool's default): watchers get put rate x watchers events/s."""


def conns_for(clients: int) -> int:
    """gRPC connections for `clients` clients: one per 16 clients, at least one (1, 1, 4 and 16
    for 1, 16, 64 and 256), so that many requests share each HTTP/2 connection as real clients'
    do (etcd's own performance guide runs 1,000 clients on 100 connections), yet 256 clients
    are not all queued behind one connection's flow control."""
    return max(1, clients // 16)


def argv(
    binary: str | Path,
    workload: str,
    clients: int,
    total: int,
    endpoints: list[str],
    tls: ClientTLS | None,
    shape: Shape,
) -> list[str]:
    """The tool's command line for one run: `total` requests (watch-latency: `total` puts, each
    seen by `clients` watchers, one watch stream per client) from `clients` clients over
    conns_for(clients) connections, all to the leader (--target-leader: the tool asks the
    first endpoint for the members and the leader, and dials the leader's client URLs)."""
    common = [
        str(binary),
        f"--endpoints={','.join(endpoints)}",
        f"--clients={clients}",
        f"--conns={conns_for(clients)}",
        "--target-leader",
        "--precise",
        "--dial-timeout=10s",
    ]
    if tls is not None:
        common += [f"--cacert={tls.ca}", f"--cert={tls.cert}", f"--key={tls.key}"]
    sizes = [f"--key-size={shape.key_size}", f"--val-size={shape.value_size}"]
    if workload == "put":
        return [*common, "put", *sizes, f"--key-space-size={shape.keyspace}", f"--total={total}"]
    if workload in ("range-linearizable", "range-serializable"):
        consistency = "l" if workload == "range-linearizable" else "s"
        return [*common, "range", RANGE_KEY, f"--consistency={consistency}", f"--total={total}"]
    if workload == "txn-put":
        return [*common, "txn-put", *sizes, f"--key-space-size={shape.keyspace}", f"--total={total}"]
    if workload == "watch-latency":
        return [
            *common,
            "watch-latency",
            f"--streams={clients}",
            "--watchers-per-stream=1",
            f"--put-total={total}",
            f"--put-rate={shape.watch_put_rate}",
            *sizes,
        ]
    raise ValueError(f"unknown workload {workload!r} (known: {', '.join(WORKLOADS)})")


def watch_seconds(put_total: int, rate: int) -> float:
    """How long watch-latency's puts take: its rate limiter lets the first `rate` go at once
    (a burst of one second's worth), then `rate` a second."""
    return max(0, put_total - rate) / rate


# ---------------------------------------------------------------------- the output
@dataclass(frozen=True)
class Summary:
    """One pkg/report report.  Times in milliseconds; None where the report has no figure."""

    requests: int
    """Requests answered without error (the histogram's counts)."""
    errors: int
    error_kinds: dict[str, int] = field(default_factory=dict)
    total_s: float | None = None
    requests_per_s: float | None = None
    average_ms: float | None = None
    fastest_ms: float | None = None
    slowest_ms: float | None = None
    stddev_ms: float | None = None
    percentiles_ms: dict[str, float | None] = field(default_factory=dict)

    @property
    def p50_ms(self) -> float | None:
        return self.percentiles_ms.get("50")

    @property
    def p90_ms(self) -> float | None:
        return self.percentiles_ms.get("90")

    @property
    def p99_ms(self) -> float | None:
        return self.percentiles_ms.get("99")

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"p50_ms": self.p50_ms, "p90_ms": self.p90_ms, "p99_ms": self.p99_ms}


NUMBER = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|NaN|[-+]?Inf))"
TITLE = re.compile(r"^([A-Z][\w ]*) summary:$")
FIELD = re.compile(rf"^\s+(Total|Slowest|Fastest|Average|Stddev):\s+{NUMBER} secs\.$")
RATE = re.compile(rf"^\s+Requests/sec:\s+{NUMBER}$")
BUCKET = re.compile(rf"^\s+{NUMBER} \[(\d+)\]\s+\|")
PERCENTILE = re.compile(rf"^\s+([\d.]+)% in {NUMBER} secs\.$")
ERROR = re.compile(r"^\s+\[(\d+)\]\s+(.*)$")


def parse(text: str) -> dict[str, Summary]:
    """Every report in the tool's output by its title: "" for the one report of put, range and
    txn-put; "put" and "watch events" for watch-latency's.  ValueError when there is none
    (the tool failed before its report)."""
    sections: dict[str, list[str]] = {"": []}
    title = ""
    for line in text.splitlines():
        match = TITLE.match(line.strip())
        if match:
            title = match.group(1).lower()
            sections[title] = []
        else:
            sections[title].append(line)
    reports = {
        name: _summary(lines)
        for name, lines in sections.items()
        if any(line.strip() in ("Summary:", "Error distribution:") for line in lines)
    }
    if not reports:
        raise ValueError(f"no report in the tool's output: {text.strip()[:300]!r}")
    return reports


def _summary(lines: list[str]) -> Summary:
    fields: dict[str, float] = {}
    rate: float | None = None
    requests = 0
    found: dict[str, float] = {}
    errors: dict[str, int] = {}
    part = ""
    for line in lines:
        head = line.strip()
        if head in ("Summary:", "Response time histogram:", "Latency distribution:", "Error distribution:"):
            part = head
            continue
        if part == "Summary:":
            if m := FIELD.match(line):
                fields[m.group(1)] = float(m.group(2))
            elif m := RATE.match(line):
                rate = float(m.group(1))
        elif part == "Response time histogram:" and (m := BUCKET.match(line)):
            requests += int(m.group(2))
        elif part == "Latency distribution:" and (m := PERCENTILE.match(line)):
            found[_percentile_key(m.group(1))] = float(m.group(2)) * 1e3
        elif part == "Error distribution:" and (m := ERROR.match(line)):
            errors[m.group(2).strip()] = errors.get(m.group(2).strip(), 0) + int(m.group(1))
    return Summary(
        requests=requests,
        errors=sum(errors.values()),
        error_kinds=errors,
        total_s=fields.get("Total"),
        requests_per_s=rate if requests else 0.0,
        average_ms=_ms(fields.get("Average")),
        fastest_ms=_ms(fields.get("Fastest")),
        slowest_ms=_ms(fields.get("Slowest")),
        stddev_ms=_ms(fields.get("Stddev")),
        percentiles_ms=_fill(found, fields.get("Slowest")) if requests else dict.fromkeys(PERCENTILES),
    )


def _percentile_key(text: str) -> str:
    """ "50" for the tool's "50", "99.9" for "99.9" (as PERCENTILES names them)."""
    return f"{float(text):g}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _fill(found: dict[str, float], slowest: float | None) -> dict[str, float | None]:
    """Every percentile: the tool's figure; 0 for one it left out below one it printed (it
    prints only figures above 0), or for all when the slowest was 0; None for one above the
    last it printed (too few samples)."""
    if not found and slowest == 0:
        return dict.fromkeys(PERCENTILES, 0.0)
    printed = [i for i, p in enumerate(PERCENTILES) if p in found]
    last = printed[-1] if printed else -1
    return {p: found.get(p, 0.0 if i < last else None) for i, p in enumerate(PERCENTILES)}
