"""metrics.k8s.io/v1beta1: NodeMetrics and PodMetrics, computed from the kubelets' usage.

What metrics-server does, inside the apiserver: every `interval` seconds (the apiserver's
--metric-resolution, metrics-server's flag; INTERVAL_S by default) each Node's kubelet
is asked for `/metrics/resource` (the kubelet's client certificate, as for logs and exec), and
the last two readings of each counter give a rate.  A node's metrics are its CPU in cores
(nanocores, "123456789n") and its working-set memory ("Ki"), over the window between the two
readings; a pod's are those of each of its running containers.  A node or container read
once only is not reported yet, as metrics-server reports nothing before its second scrape;
one that a later scrape no longer shows is forgotten.  A kubelet that does not answer keeps
its last figures for three intervals, then they go.

The kubelet's answer is input from a peer: the exposition is parsed line by line, bounded in
size and in series, and anything that is not a finite number is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from machinery.duration import parse_seconds
from machinery.objects import Obj
from machinery.timestamps import format_time

log = logging.getLogger("raftkube.apiserver.metrics")

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
INTERVAL_S = 10.0
MIN_INTERVAL_S, MAX_INTERVAL_S = 1.0, 3600.0
"""--metric-resolution's bounds: a scrape a second at most (each reads every kubelet), an hour
at least (a reading older than three intervals is dropped, so longer shows nothing)."""
SCRAPE_TIMEOUT_S = 5.0
MAX_BYTES = 4 * 1024 * 1024
MAX_SERIES = 20_000
STALE_INTERVALS = 3


def parse_resolution(text: str) -> float:
    """Seconds between two readings (`--metric-resolution`, cluster.toml's apiserver.
    metric_resolution): a Go duration as metrics-server takes it (`15s`) or plain seconds, from
    MIN_INTERVAL_S to MAX_INTERVAL_S; ValueError says what is wrong."""
    seconds = parse_seconds(text)
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise ValueError(f"from {MIN_INTERVAL_S:g}s to {MAX_INTERVAL_S:g}s, got {text!r}")
    return seconds


# (node name) -> the kubelet's /metrics/resource text; raises when it cannot be read
Fetch = Callable[[Obj], Awaitable[str]]


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    ms: int | None


def _labels(text: str) -> tuple[tuple[str, str], ...] | None:
    """`a="x",b="y"` -> pairs (None when malformed); escapes as the exposition format has them."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0 or eq + 1 >= len(text) or text[eq + 1] != '"':
            return None
        key = text[i:eq].strip().lstrip(",").strip()
        j, value = eq + 2, []
        while j < len(text) and text[j] != '"':
            if text[j] == "\\" and j + 1 < len(text):
                value.append({"n": "\n"}.get(text[j + 1], text[j + 1]))
                j += 2
                continue
            value.append(text[j])
            j += 1
        if j >= len(text) or not key:
            return None
        out.append((key, "".join(value)))
        i = j + 1
        while i < len(text) and text[i] in ", ":
            i += 1
    return tuple(out)


def parse_exposition(text: str, wanted: frozenset[str]) -> list[Sample]:
    """The samples of the metrics named in `wanted` (at most MAX_SERIES); malformed lines are skipped."""
    out: list[Sample] = []
    for line in text.splitlines():
        if len(out) >= MAX_SERIES:
            break
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        brace = line.find("{")
        if brace >= 0:
            close = line.rfind("}")
            if close < brace:
                continue
            name, labels, rest = line[:brace], _labels(line[brace + 1 : close]), line[close + 1 :].split()
        else:
            name, *rest = line.split()
            labels = ()
        if name not in wanted or labels is None or not rest:
            continue
        try:
            value = float(rest[0])
            ms = int(rest[1]) if len(rest) > 1 else None
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            out.append(Sample(name, labels, value, ms))
    return out


@dataclass
class _Series:
    """The last two readings of one counter or gauge: (seconds, value)."""

    readings: list[tuple[float, float]] = field(default_factory=list)

    def add(self, at: float, value: float) -> None:
        if self.readings and at <= self.readings[-1][0]:
            return  # the same reading again
        self.readings = [*self.readings[-1:], (at, value)]


@dataclass(frozen=True)
class Usage:
    cpu_cores: float
    memory_bytes: float
    at: float
    window: float


def _usage(cpu: _Series | None, memory: _Series | None) -> Usage | None:
    if cpu is None or memory is None or len(cpu.readings) < 2 or not memory.readings:
        return None
    (t0, c0), (t1, c1) = cpu.readings
    if t1 <= t0 or c1 < c0:  # a counter that went back: a restarted container, wait for two more
        return None
    return Usage((c1 - c0) / (t1 - t0), memory.readings[-1][1], t1, t1 - t0)


def _quantities(u: Usage) -> dict[str, str]:
    return {"cpu": f"{round(u.cpu_cores * 1e9)}n", "memory": f"{round(u.memory_bytes / 1024)}Ki"}


class ResourceMetrics:
    """The readings of every node and container, and the metrics objects made from them."""

    def __init__(self, fetch: Fetch, clock: Callable[[], float] = time.time, interval: float = INTERVAL_S) -> None:
        self.fetch = fetch
        self.clock = clock
        self.interval = interval
        self._nodes: dict[str, tuple[_Series, _Series, float]] = {}  # node -> cpu, memory, last seen
        # (namespace, pod, container) -> cpu, memory, the node it was read on
        self._containers: dict[tuple[str, str, str], tuple[_Series, _Series, str]] = {}

    async def scrape_forever(self, nodes: Callable[[], Iterable[Obj]]) -> None:
        while True:
            try:
                await self.scrape(list(nodes()))
            except Exception:  # the loop outlives any one round's surprise; it is logged
                log.exception("scraping the kubelets' usage")
            await asyncio.sleep(self.interval)

    async def scrape(self, nodes: list[Obj]) -> None:
        """Read every node's kubelet once, side by side, each bounded in time."""

        async def one(node: Obj) -> None:
            name = str((node.get("metadata") or {}).get("name") or "")
            try:
                async with asyncio.timeout(SCRAPE_TIMEOUT_S):
                    text = await self.fetch(node)
            except Exception as e:  # any failure of one kubelet is that kubelet's alone
                log.debug("metrics of node %s: %s", name, e)
                return
            self.record(name, text[:MAX_BYTES])

        await asyncio.gather(*(one(n) for n in nodes))
        self._forget_stale({str((n.get("metadata") or {}).get("name") or "") for n in nodes})

    def record(self, node: str, text: str) -> None:
        """One kubelet's answer, read now."""
        now = self.clock()
        samples = parse_exposition(
            text,
            frozenset(
                {
                    "node_cpu_usage_seconds_total",
                    "node_memory_working_set_bytes",
                    "container_cpu_usage_seconds_total",
                    "container_memory_working_set_bytes",
                }
            ),
        )
        cpu, memory, _ = self._nodes.get(node) or (_Series(), _Series(), now)
        present: set[tuple[str, str, str]] = set()
        for s in samples:
            at = s.ms / 1000 if s.ms is not None else now
            if s.name == "node_cpu_usage_seconds_total":
                cpu.add(at, s.value)
            elif s.name == "node_memory_working_set_bytes":
                memory.add(at, s.value)
            else:
                labels = dict(s.labels)
                key = (labels.get("namespace", ""), labels.get("pod", ""), labels.get("container", ""))
                if not all(key):
                    continue
                present.add(key)
                c_cpu, c_memory, _ = self._containers.get(key) or (_Series(), _Series(), node)
                (c_cpu if s.name == "container_cpu_usage_seconds_total" else c_memory).add(at, s.value)
                self._containers[key] = (c_cpu, c_memory, node)
        self._nodes[node] = (cpu, memory, now)
        for key in [k for k, (_, _, n) in self._containers.items() if n == node and k not in present]:
            del self._containers[key]  # gone from its kubelet: a finished or deleted container

    def _forget_stale(self, known: set[str]) -> None:
        cutoff = self.clock() - STALE_INTERVALS * self.interval
        for node in [n for n, (_, _, seen) in self._nodes.items() if n not in known or seen < cutoff]:
            del self._nodes[node]
            for key in [k for k, (_, _, n) in self._containers.items() if n == node]:
                del self._containers[key]

    # -- the objects ------------------------------------------------------------------------------

    def node_metrics(self, node: Obj) -> Obj | None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        cpu, memory, _ = self._nodes.get(name) or (None, None, 0.0)
        usage = _usage(cpu, memory)
        if usage is None:
            return None
        return {
            "kind": "NodeMetrics",
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {
                "name": name,
                "creationTimestamp": format_time(self.clock()),
                "labels": dict(meta.get("labels") or {}),
            },
            "timestamp": format_time(usage.at),
            "window": f"{round(usage.window)}s",
            "usage": _quantities(usage),
        }

    def pod_metrics(self, pod: Obj) -> Obj | None:
        meta = pod.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        containers = []
        latest: Usage | None = None
        for container in (pod.get("spec") or {}).get("containers") or ():
            cpu, memory, _ = self._containers.get((namespace, name, str(container.get("name") or ""))) or (
                None,
                None,
                "",
            )
            usage = _usage(cpu, memory)
            if usage is None:
                continue
            containers.append({"name": container["name"], "usage": _quantities(usage)})
            latest = usage if latest is None or usage.at > latest.at else latest
        if latest is None:
            return None
        return {
            "kind": "PodMetrics",
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": format_time(self.clock()),
                "labels": dict(meta.get("labels") or {}),
            },
            "timestamp": format_time(latest.at),
            "window": f"{round(latest.window)}s",
            "containers": containers,
        }


def metrics_list(kind: str, items: list[Obj]) -> Obj:
    return {"kind": f"{kind}List", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items}
