"""A load generator process: drives one system with one kind of load and reports its figures.

    python -m bench.store.loadgen  < spec.json  > result.json

It runs apart from the members and from the driver, so that its CPU is its own: it reports
`time.process_time()` over the measured window, and the table shows it next to every
throughput figure (a client near 100 % of a core is the bottleneck, not the server).

The spec (JSON on stdin) names the system, endpoints, mode and timing in CLOCK_MONOTONIC
seconds, which all processes on the machine share: load starts at `t_start`, counting at
`t_measure`, and everything stops at `t_end` or when the driver writes "stop" on stdin.  With
`barrier` (closed loops), the times come later: the generator says "ready" on stdout and the
driver answers "go <t_start> <t_measure> <t_end>" once all of a round's generators are ready.

Modes: write, read (N workers in a closed loop), fill (write keys start..start+count once),
watch (W watchers counting events; with `expect`, until that many arrived), timeline (write,
recording the start and end of every success to a file, for failover), stall (raftkube only:
W connections with one watch each that never read a byte, for slow-watchers).

With `tls` in the spec (the files of `bench.store.tls.ClientTLS`) the client speaks mutual TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from array import array
from typing import Any

from bench.store.adapters import Adapter, make_adapter
from bench.store.tls import ClientTLS

LATENCY_SAMPLE = 50_000
"""At most this many latencies are returned (a uniform sample), so that results stay small."""


def key_of(prefix: str, i: int) -> bytes:
    return f"{prefix}{i:08d}".encode()


def fill_value(i: int, size: int) -> bytes:
    """The value `fill` writes for key i: recognisable, so that a reader can check it."""
    return i.to_bytes(8, "big") * (size // 8) + b"x" * (size % 8)


class Window:
    """Process CPU at the start and end of the measured window."""

    def __init__(self, t_measure: float, t_end: float) -> None:
        self.t_measure = t_measure
        self.t_end = t_end
        self.cpu0: float | None = None
        self.cpu1: float | None = None
        self.wall0 = t_measure
        self.wall1 = t_end

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.sleep(max(0.0, self.t_measure - time.monotonic()))
        self.cpu0 = time.process_time()
        self.wall0 = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, self.t_end - time.monotonic()))
        self.cpu1 = time.process_time()
        self.wall1 = time.monotonic()
        stop.set()

    def result(self) -> dict[str, float]:
        wall = max(1e-9, self.wall1 - self.wall0)
        cpu = (self.cpu1 or 0.0) - (self.cpu0 or 0.0)
        return {"window_s": wall, "client_cpu_s": cpu, "client_cpu_pct": 100.0 * cpu / wall}


async def stdin_stop(stop: asyncio.Event) -> None:
    """The driver writes 'stop' (or closes stdin) to end a run early."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line or line.strip() == "stop":
            stop.set()
            return


async def started(spec: dict[str, Any]) -> None:
    """Sleep until the load starts.  With `barrier` in the spec, the driver gives the schedule
    once every generator of the round is ready, instead of guessing how long they take to start
    (a fixed STARTUP_S of 1.5 s a round, where a generator is ready in 0.2-0.5 s): this says
    "ready" on stdout, with everything done that comes before the first request, and takes the
    times from the driver's answer on stdin, "go <t_start> <t_measure> <t_end>"."""
    if spec.get("barrier"):
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        words = line.split()
        if len(words) != 4 or words[0] != "go":
            raise ValueError(f"expected 'go T_START T_MEASURE T_END' on stdin, got {line.strip()[:100]!r}")
        spec["t_start"], spec["t_measure"], spec["t_end"] = (float(w) for w in words[1:])
    await asyncio.sleep(max(0.0, spec["t_start"] - time.monotonic()))


async def closed_loop(spec: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    """write / read / timeline: `concurrency` workers, each with one request in flight."""
    mode = spec["mode"]
    await started(spec)
    win = Window(spec["t_measure"], spec["t_end"])
    stop = asyncio.Event()
    value = os.urandom(spec.get("value_size", 256))
    keyspace = spec.get("keyspace", 10_000)
    prefix = spec.get("prefix", "/bench/")
    serializable = bool(spec.get("serializable", False))
    lat: list[float] = []
    ops = errors = 0
    first_error = ""
    starts, ends = array("d"), array("d")
    rng = random.Random(os.getpid())
    t_measure, t_end = spec["t_measure"], spec["t_end"]

    async def worker() -> None:
        nonlocal ops, errors, first_error
        mono, perf = time.monotonic, time.perf_counter
        while not stop.is_set():
            key = key_of(prefix, rng.randrange(keyspace))
            t0m = mono()
            t0 = perf()
            try:
                if mode == "read":
                    await adapter.get(key, serializable)
                else:
                    await adapter.put(key, value)
            except Exception as e:
                if stop.is_set():
                    return
                errors += 1
                if not first_error:
                    first_error = f"{type(e).__name__}: {e}"[:300]
                await asyncio.sleep(0.01)
                continue
            dt = perf() - t0
            t1m = mono()
            if mode == "timeline":
                starts.append(t0m)
                ends.append(t1m)
            if t_measure <= t1m < t_end and not stop.is_set():
                ops += 1
                lat.append(dt)

    tasks = [asyncio.create_task(worker()) for _ in range(spec["concurrency"])]
    watcher = asyncio.create_task(stdin_stop(stop))
    await win.run(stop)
    await asyncio.wait(tasks, timeout=spec.get("drain_s", 6.0))
    for t in (*tasks, watcher):
        t.cancel()
    if mode == "timeline":
        with open(spec["timeline_path"], "wb") as f:
            starts.tofile(f)
            ends.tofile(f)
    if len(lat) > LATENCY_SAMPLE:
        lat = rng.sample(lat, LATENCY_SAMPLE)
    return win.result() | {"ops": ops, "errors": errors, "first_error": first_error, "latencies_s": lat}


async def fill(spec: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    """Write keys start..start+count once each (sequential key order, `concurrency` in flight)."""
    value_size = spec.get("value_size", 256)
    prefix, start, count = spec["prefix"], spec.get("start", 0), spec["count"]
    it = iter(range(start, start + count))
    revs: list[int] = []
    errors = 0
    deadline = time.monotonic() + spec.get("timeout_s", 600)

    async def worker() -> None:
        nonlocal errors
        for i in it:
            value = fill_value(i, value_size)
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"fill did not finish within {spec.get('timeout_s', 600)}s")
                try:
                    revs.append(await adapter.put(key_of(prefix, i), value))
                    break
                except Exception:
                    errors += 1
                    await asyncio.sleep(0.05)

    t0, c0 = time.monotonic(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(spec.get("concurrency", 64))))
    wall = time.monotonic() - t0
    return {
        "ops": count,
        "errors": errors,
        "window_s": wall,
        "client_cpu_s": time.process_time() - c0,
        "client_cpu_pct": 100.0 * (time.process_time() - c0) / max(wall, 1e-9),
        "first_revision": min(revs) if revs else 0,
        "last_revision": max(revs) if revs else 0,
    }


async def watch(spec: dict[str, Any], adapter: Adapter) -> dict[str, Any]:
    """W watchers on a prefix; counts events in the window, or times the arrival of `expect` events."""
    expect = spec.get("expect", 0)
    win = Window(spec["t_measure"], spec["t_end"])
    stop = asyncio.Event()
    total = in_window = 0
    done = asyncio.Event()
    t_last = 0.0

    def on_events(n: int) -> None:
        nonlocal total, in_window, t_last
        total += n
        now = time.monotonic()
        if win.cpu0 is not None and not stop.is_set():
            in_window += n
        if expect and total >= expect and not done.is_set():
            t_last = now
            done.set()

    await asyncio.sleep(max(0.0, spec["t_start"] - time.monotonic()))
    t0 = time.monotonic()
    handle = await adapter.watch(
        spec["watch_endpoint"], spec["prefix"].encode(), spec["watchers"], spec.get("start_revision", 0), on_events
    )
    opened_at = time.monotonic()
    if expect:
        c0 = time.process_time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), max(1.0, spec["t_end"] - time.monotonic()))
        await adapter.close_watch(handle)
        wall = (t_last or time.monotonic()) - t0
        cpu = time.process_time() - c0
        return {
            "events": total,
            "expected": expect,
            "complete": total >= expect,
            "seconds": wall,
            "client_cpu_s": cpu,
            "client_cpu_pct": 100.0 * cpu / max(wall, 1e-9),
        }
    stopper = asyncio.create_task(stdin_stop(stop))
    await win.run(stop)
    stopper.cancel()
    await adapter.close_watch(handle)
    return win.result() | {"events": in_window, "total_events": total, "opened_at": opened_at}


async def stall(spec: dict[str, Any]) -> dict[str, Any]:
    """`watchers` connections to `watch_endpoint`, each sending a hello and one watch on
    `prefix` and then never reading: the member's answers pile up in its socket buffers and
    then in the member, which must bound what it keeps for them.

    Blocking sockets, never read after the TLS handshake (an asyncio stream would keep reading
    into its own buffer).  Opened at `t_start`, held until `t_end` or "stop"."""
    import socket

    from store.api import methods as M
    from store.api.framing import encode_frame
    from store.api.kv import prefix_end
    from store.api.protocol import split_url
    from store.api.watch import WatchCreateRequest

    tls = ClientTLS.from_json(spec.get("tls"))
    ctx = tls.ssl_context() if tls is not None else None
    host, port = split_url(spec["watch_endpoint"])
    prefix = spec["prefix"].encode()
    request = encode_frame([1, M.HELLO.name, M.HelloRequest().to_wire()])
    request += encode_frame([2, "watch", WatchCreateRequest(prefix, prefix_end(prefix), 0).to_wire()])
    socks: list[socket.socket] = []
    await asyncio.sleep(max(0.0, spec["t_start"] - time.monotonic()))
    try:
        for _ in range(spec["watchers"]):
            sock = socket.create_connection((host, port), timeout=5.0)
            if ctx is not None:
                sock = ctx.wrap_socket(sock)  # the handshake is the only reading this socket does
            sock.sendall(request)
            socks.append(sock)
        win = Window(spec["t_measure"], spec["t_end"])
        stop = asyncio.Event()
        stopper = asyncio.create_task(stdin_stop(stop))
        await win.run(stop)
        stopper.cancel()
        return win.result() | {
            "connections": len(socks),
            "local_ports": [sock.getsockname()[1] for sock in socks],
            # Bytes the member sent that wait, unread, in our receive queues (never read by us).
            "unread_bytes": [_unread(sock) for sock in socks],
        }
    finally:
        for sock in socks:
            sock.close()


def _unread(sock: Any) -> int:
    """Bytes in a socket's receive queue (FIONREAD), without reading them; -1 if it is closed."""
    import fcntl
    import struct
    import termios

    try:
        return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0])
    except OSError:
        return -1


async def run(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["mode"] == "stall":
        return await stall(spec)
    tls = ClientTLS.from_json(spec.get("tls"))
    adapter = make_adapter(spec["system"], spec["endpoints"], spec.get("timeout_s", 5.0), tls)
    try:
        mode = spec["mode"]
        if mode in ("write", "read", "timeline"):
            return await closed_loop(spec, adapter)
        if mode == "fill":
            return await fill(spec, adapter)
        if mode == "watch":
            return await watch(spec, adapter)
        raise ValueError(f"unknown mode {mode!r}")
    finally:
        await adapter.close()


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
    sys.exit(main())
