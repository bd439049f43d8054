"""A load generator process for the apiserver benchmark.

    python -m bench.apiserver.loadgen  < spec.json  > result.json

Like bench.store.loadgen (whose Window and stdin stop it reuses): its own process, so that
its CPU is its own; times in CLOCK_MONOTONIC seconds, which every process on the machine
shares, so that a watcher can subtract the writer's stamp from its own clock.

Modes:
  create   pod creates, either open loop (`rate` per second, `count` pods, at most
           `connections` in flight) or closed loop (`connections` in flight from t_start to
           t_end, counted from t_measure; with several namespaces, the latencies also by
           namespace, so that two admission chains taken in turns share every drift of the
           machine; with `barrier`, the times come from the driver once every generator is
           ready, as bench.store.loadgen's closed loops take them).  Each pod carries the
           annotation SENT_ANNOTATION =
           "<run>:<monotonic time just before the request was written>".
  watch    one watch per entry of `selectors` ("" = unfiltered) from `resource_version`, each
           on a connection of its own, or with `http2` as streams of shared HTTP/2 connections;
           `latency`: per-watcher counts of this run's ADDED events and their delivery
           latency (receipt - stamp); else counts every event line in the window only.
           Once all are open it writes `ready_path` and reads its timing from stdin.
  list     `requests` GETs of `path` one after the other: latency, bytes, items.
  client   the CPU cost per request of this module's HTTP client against httpx's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from bench.apiserver.h2watch import H2WatchPool, h2_context
from bench.apiserver.http11 import Connection, HTTPError, Target
from bench.store.loadgen import LATENCY_SAMPLE, Window, started, stdin_stop

SENT_ANNOTATION = "bench.raftkube.io/sent"
_SENT = b'"' + SENT_ANNOTATION.encode() + b'":"'
OPEN_PARALLEL = 64
"""Watch connections opened at once (TLS handshakes) while a watcher process starts."""


def _body(
    api_version: str, kind: str, run: str, seq: int, namespaces: list[str], nodes: int, prefix: str
) -> tuple[str, bytes]:
    """(namespace, JSON) of object `seq`: on node-<seq % nodes>, one container, stamped with the
    time now.  Pods and widgets share the shape, so the two kinds cost the same to encode and
    differ by their path."""
    ns = namespaces[seq % len(namespaces)]
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": f"{prefix}-{seq}",
            "labels": {"app": "bench", "run": run},
            "annotations": {SENT_ANNOTATION: f"{run}:{time.monotonic():.6f}"},
        },
        "spec": {
            "nodeName": f"node-{seq % nodes}",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}],
        },
    }
    return ns, orjson.dumps(obj)


def pod_body(run: str, seq: int, namespaces: list[str], nodes: int, prefix: str) -> tuple[str, bytes]:
    return _body("v1", "Pod", run, seq, namespaces, nodes, prefix)


CUSTOM_GROUP, CUSTOM_VERSION, CUSTOM_PLURAL = "bench.raftkube.io", "v1", "widgets"
"""The custom resource the `custom` phase creates and watches (bench.apiserver.phases.custom)."""


def widget_body(run: str, seq: int, namespaces: list[str], nodes: int, prefix: str) -> tuple[str, bytes]:
    return _body(f"{CUSTOM_GROUP}/{CUSTOM_VERSION}", "Widget", run, seq, namespaces, nodes, prefix)


KINDS = {
    "pods": (pod_body, "/api/v1"),
    CUSTOM_PLURAL: (widget_body, f"/apis/{CUSTOM_GROUP}/{CUSTOM_VERSION}"),
}
"""What a create or watch spec's `kind` creates and watches: (body, the group-version's prefix)."""


def parse_sent(line: bytes) -> tuple[bytes, bytes, float] | None:
    """(event type, run, stamp) of a watch event line carrying the annotation, else None."""
    i = line.find(_SENT)
    if i < 0:
        return None
    j = i + len(_SENT)
    k = line.find(b'"', j)
    run, _, stamp = line[j:k].partition(b":")
    kind = line[9 : line.find(b'"', 9)] if line.startswith(b'{"type":"') else b""
    try:
        return kind, run, float(stamp)
    except ValueError:
        return None


def _sample(values: list[float], rng: random.Random) -> list[float]:
    return values if len(values) <= LATENCY_SAMPLE else rng.sample(values, LATENCY_SAMPLE)


# ---------------------------------------------------------------------- create
async def create(spec: dict[str, Any], target: Target) -> dict[str, Any]:
    ctx = target.ssl_context()
    conns = [Connection(target, ctx) for _ in range(spec["connections"])]
    await asyncio.gather(*(c.open() for c in conns))
    run, prefix, nodes, namespaces = spec["run"], spec["prefix"], spec["nodes"], spec["namespaces"]
    kind = spec.get("kind", "pods")
    make_body, prefix_path = KINDS[kind]
    lat: list[float] = []
    lat_by_namespace: dict[str, list[float]] = {ns: [] for ns in namespaces}
    created: list[int] = []
    errors = 0
    first_error = ""
    rng = random.Random(os.getpid())
    mono = time.monotonic

    async def one(conn: Connection, seq: int) -> float | None:
        """Create pod `seq`; its latency, or None when it failed."""
        nonlocal errors, first_error
        ns, body = make_body(run, seq, namespaces, nodes, prefix)
        t0 = mono()
        try:
            r = await conn.request("POST", f"{prefix_path}/namespaces/{ns}/{kind}", body)
        except (OSError, HTTPError, asyncio.IncompleteReadError) as e:
            await conn.close()
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {e}"[:300]
            return None
        if r.status == 201:
            return mono() - t0
        errors += 1
        first_error = first_error or f"HTTP {r.status}: {r.body[:300]!r}"
        return None

    start = spec.get("start", 0)
    if "rate" in spec:  # open loop: the i-th create is due at t_start + i / rate
        pool: asyncio.Queue[Connection] = asyncio.Queue()
        for c in conns:
            pool.put_nowait(c)
        late = 0.0

        async def fire(conn: Connection, seq: int) -> None:
            try:
                dt = await one(conn, seq)
                if dt is not None:
                    lat.append(dt)
                    created.append(seq)
            finally:
                pool.put_nowait(conn)

        await asyncio.sleep(max(0.0, spec["t_start"] - mono()))
        t0, c0 = mono(), time.process_time()
        tasks = []
        for i in range(spec["count"]):
            due = spec["t_start"] + i / spec["rate"]
            if due > mono():
                await asyncio.sleep(due - mono())
            conn = await pool.get()
            late = max(late, mono() - due)
            tasks.append(asyncio.create_task(fire(conn, start + i)))
        await asyncio.wait(tasks, timeout=spec.get("drain_s", 30.0))
        wall, cpu = mono() - t0, time.process_time() - c0
        out = {"window_s": wall, "client_cpu_s": cpu, "client_cpu_pct": 100.0 * cpu / max(wall, 1e-9)}
        out |= {"max_late_s": late, "scheduled": spec["count"]}
    else:  # closed loop
        await started(spec)  # the connections are open: ready
        win = Window(spec["t_measure"], spec["t_end"])
        stop = asyncio.Event()
        seqs = iter(range(start, start + 10**9))

        async def worker(conn: Connection) -> None:
            while not stop.is_set():
                seq = next(seqs)
                began_in_window = win.cpu0 is not None
                dt = await one(conn, seq)
                if dt is None:
                    await asyncio.sleep(0.01)
                elif began_in_window and not stop.is_set():
                    lat.append(dt)
                    lat_by_namespace[namespaces[seq % len(namespaces)]].append(dt)
                    created.append(seq)

        tasks = [asyncio.create_task(worker(c)) for c in conns]
        stopper = asyncio.create_task(stdin_stop(stop))
        await win.run(stop)
        await asyncio.wait(tasks, timeout=spec.get("drain_s", 10.0))
        for t in (*tasks, stopper):
            t.cancel()
        out = win.result()
    for c in conns:
        await c.close()
    return out | {
        "ops": len(created),
        "errors": errors,
        "first_error": first_error,
        "latencies_s": _sample(lat, rng),
        "latencies_by_namespace_s": {ns: _sample(v, rng) for ns, v in lat_by_namespace.items()}
        if len(namespaces) > 1
        else {},
        "created": created if spec.get("report_created") else [],
    }


# ---------------------------------------------------------------------- watch
async def watch(spec: dict[str, Any], target: Target) -> dict[str, Any]:
    ctx = target.ssl_context()
    selectors: list[str] = spec["selectors"]
    run = spec.get("run", "").encode()
    latency = bool(spec.get("latency"))
    rv = spec.get("resource_version", "")
    counts = [0] * len(selectors)
    other = [0] * len(selectors)
    lat: list[float] = []
    lat_unfiltered: list[float] = []
    failures: list[str] = []
    win = Window(0.0, 0.0)
    stop = asyncio.Event()
    in_window = 0
    last_event = time.monotonic()
    opened = 0
    sem = asyncio.Semaphore(OPEN_PARALLEL)
    mono = time.monotonic

    kind = spec.get("kind", "pods")

    def path(selector: str) -> str:
        q = f"{KINDS[kind][1]}/{kind}?watch=1&timeoutSeconds=3600&resourceVersion={rv}"
        return q + (f"&fieldSelector={selector}" if selector else "")

    def take_line(i: int, line: bytes) -> None:
        """One event line of watcher `i` (latency mode): this run's ADDED events are timed."""
        nonlocal last_event
        now = mono()
        got = parse_sent(line)
        if got is None:
            return
        kind, r, stamp = got
        if r == run and kind == b"ADDED":
            counts[i] += 1
            (lat if selectors[i] else lat_unfiltered).append(now - stamp)
            last_event = now
        else:
            other[i] += 1

    def take_chunk(i: int, chunk: bytes) -> None:
        """A piece of watcher `i`'s stream (count mode): its event lines are counted, not parsed."""
        nonlocal in_window
        n = chunk.count(b"\n")
        counts[i] += n
        if win.cpu0 is not None and not stop.is_set():
            in_window += n

    async def one(i: int) -> None:
        nonlocal opened
        conn = Connection(target, ctx)
        line = b""
        try:
            async with sem:
                await conn.open(30.0)
                await conn.open_stream(path(selectors[i]))
            opened += 1
            if latency:
                async for line in conn.lines():
                    take_line(i, line)
            else:
                async for line in conn.chunks():
                    take_chunk(i, line)
            failures.append(f"watch {i} ended by the server; its last line: {line[:200]!r}")
        except asyncio.CancelledError:
            raise
        except Exception as e:
            failures.append(f"watch {i}: {type(e).__name__}: {e}"[:300])
        finally:
            await conn.close()

    pool = H2WatchPool(target, h2_context(target)) if spec.get("http2") else None

    async def one_h2(i: int) -> None:
        """Watcher `i` as a stream of the process's HTTP/2 connections (`http2` in the spec)."""
        nonlocal opened
        assert pool is not None
        pending = [b""]

        def on_data(chunk: bytes) -> None:
            if not latency:
                take_chunk(i, chunk)
                return
            *lines, pending[0] = (pending[0] + chunk).split(b"\n")
            for line in lines:
                take_line(i, line + b"\n")

        def on_end(why: str) -> None:
            failures.append(f"watch {i} ended: {why}"[:300])

        try:
            async with sem:
                await pool.open_watch(path(selectors[i]), on_data, on_end)
            opened += 1
        except asyncio.CancelledError:
            raise
        except Exception as e:
            failures.append(f"watch {i}: {type(e).__name__}: {e}"[:300])

    tasks = [asyncio.create_task((one_h2 if pool is not None else one)(i)) for i in range(len(selectors))]
    t_open = mono()
    while opened + len(failures) < len(selectors) and mono() - t_open < spec.get("open_timeout_s", 120):
        await asyncio.sleep(0.02)
    open_s = mono() - t_open
    Path(spec["ready_path"]).write_text(json.dumps({"opened": opened, "failures": failures[:5]}))
    # The driver answers with the timing once every watcher process is ready:
    # "go <t_measure> <t_end>" (count the events in that window) or "end <t>" (the writers
    # finished at t: drain until no event came for idle_s, at most drain_s).
    loop = asyncio.get_running_loop()
    command = (await loop.run_in_executor(None, sys.stdin.readline)).split()
    stopper = asyncio.create_task(asyncio.sleep(0))
    if command[:1] == ["end"]:  # the driver's "stop" (when it collects) is not read: drain first
        cap = mono() + spec.get("drain_s", 30.0)
        idle = spec.get("idle_s", 2.0)
        last_event = max(last_event, float(command[1]))
        while not stop.is_set() and mono() < cap and mono() - last_event < idle:
            await asyncio.sleep(0.05)
        cpu = time.process_time()
        out: dict[str, Any] = {"drain_s": mono() - float(command[1]), "client_cpu_s": cpu}
    elif command[:1] == ["go"]:
        stopper = asyncio.create_task(stdin_stop(stop))
        win.t_measure, win.t_end = float(command[1]), float(command[2])
        win.wall0, win.wall1 = win.t_measure, win.t_end
        await win.run(stop)
        out = win.result()
    else:
        raise ValueError(f"expected 'go T0 T1' or 'end T' on stdin, got {command}")
    stopper.cancel()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if pool is not None:
        await pool.close()
    return out | {
        "connections": len(pool.connections) if pool is not None else opened,
        "watchers": len(selectors),
        "opened": opened,
        "open_s": open_s,
        "failures": failures[:20],
        "failed": len(failures),
        "counts": counts,
        "other_events": sum(other),
        "events": in_window if not latency else sum(counts),
        "latencies_s": _sample(lat, random.Random(os.getpid())),
        "latencies_unfiltered_s": _sample(lat_unfiltered, random.Random(os.getpid())),
    }


# ---------------------------------------------------------------------- list
async def list_(spec: dict[str, Any], target: Target) -> dict[str, Any]:
    conn = Connection(target, target.ssl_context())
    await conn.open()
    lat: list[float] = []
    sizes: list[int] = []
    items = -1
    errors = 0
    first_error = ""
    c0 = time.process_time()
    t_all = time.monotonic()
    for _ in range(spec["requests"]):
        t0 = time.perf_counter()
        try:
            r = await conn.request("GET", spec["path"])
        except (OSError, HTTPError, asyncio.IncompleteReadError) as e:
            errors += 1
            first_error = first_error or f"{type(e).__name__}: {e}"
            await conn.close()
            continue
        dt = time.perf_counter() - t0
        if r.status != 200:
            errors += 1
            first_error = first_error or f"HTTP {r.status}: {r.body[:300]!r}"
            continue
        lat.append(dt)
        sizes.append(len(r.body))
        if items < 0:
            items = len(orjson.loads(r.body)["items"])
    await conn.close()
    wall = time.monotonic() - t_all
    cpu = time.process_time() - c0
    return {
        "ops": len(lat),
        "errors": errors,
        "first_error": first_error,
        "latencies_s": lat,
        "bytes": sum(sizes) // max(1, len(sizes)),
        "items": items,
        "window_s": wall,
        "client_cpu_s": cpu,
        "client_cpu_pct": 100.0 * cpu / max(wall, 1e-9),
    }


# ---------------------------------------------------------------------- client
async def client_cost(spec: dict[str, Any], target: Target) -> dict[str, Any]:
    """`requests` GETs of `path` with `connections` in flight, with this client and with httpx
    (HTTP/1.1, keep-alive, the same TLS context): client CPU per request and requests/s."""
    import httpx

    n, k, path = spec["requests"], spec["connections"], spec["path"]
    ctx = target.ssl_context()
    out: dict[str, Any] = {}

    async def raw() -> None:
        conns = [Connection(target, ctx) for _ in range(k)]
        await asyncio.gather(*(c.open() for c in conns))

        async def worker(c: Connection, m: int) -> None:
            for _ in range(m):
                r = await c.request("GET", path)
                assert r.status == 200, r.status

        await worker(conns[0], 20)  # warm
        await measure("raw_asyncio", lambda: asyncio.gather(*(worker(c, n // k) for c in conns)))
        for c in conns:
            await c.close()

    async def hx() -> None:
        limits = httpx.Limits(max_connections=k, max_keepalive_connections=k)
        headers = {"Authorization": f"Bearer {target.token}", "Accept": "application/json"}
        async with httpx.AsyncClient(base_url=target.url, verify=ctx, limits=limits, headers=headers) as c:

            async def worker(m: int) -> None:
                for _ in range(m):
                    r = await c.get(path)
                    assert r.status_code == 200, r.status_code

            await asyncio.gather(*(worker(20 // k + 1) for _ in range(k)))  # warm, open the pool
            await measure("httpx", lambda: asyncio.gather(*(worker(n // k) for _ in range(k))))

    async def measure(name: str, go: Any) -> None:
        t0, c0 = time.monotonic(), time.process_time()
        await go()
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
        done = (n // k) * k
        if name in out and out[name]["client_cpu_ms_per_request"] <= 1e3 * cpu / done:
            return
        out[name] = {
            "requests": done,
            "requests_per_s": done / wall,
            "client_cpu_ms_per_request": 1e3 * cpu / done,
            "client_cpu_pct": 100.0 * cpu / wall,
        }

    await raw()
    await hx()
    await raw()  # again, after httpx: the better of two, against warm-up order effects
    return out


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    target = Target.from_json(spec["target"])
    mode = spec["mode"]
    if mode == "create":
        return await create(spec, target)
    if mode == "watch":
        return await watch(spec, target)
    if mode == "list":
        return await list_(spec, target)
    if mode == "client":
        return await client_cost(spec, target)
    raise ValueError(f"unknown mode {mode!r}")


def main() -> int:
    spec = json.loads(sys.stdin.readline())
    try:
        result = asyncio.run(run(spec))
    except Exception as e:
        result = {"error": f"{type(e).__name__}: {e}"}
    result["pid"] = os.getpid()
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
