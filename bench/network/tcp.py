"""The datapath's two ends, run inside pod namespaces as `python -m bench.network.tcp`.

    serve PORT            an HTTP/1.1 server without keep-alive: every connection gets one fixed
                          200 response to its request and is closed by the server (so TIME_WAIT
                          sits with the server, not the client's ports); asyncio protocols.
    load --targets IP:PORT[,IP:PORT...] --duration S --workers W --concurrency C
                          W client processes, each with C connections in flight (asyncio): connect,
                          send `GET /`, read the response to the server's close; targets taken in
                          turn.  Prints one JSON line: requests done, errors, rate, latency
                          percentiles (connect to close, ms).

A connection per request measures what a proxy costs most: the DNAT and conntrack entry of
each new connection (an established connection's packets take conntrack's fast path).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import multiprocessing
import sys
import time
from typing import Any

REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\nok"
CONNECT_TIMEOUT_S = 2.0


class _Serve(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" in self.buf and self.transport is not None:
            self.transport.write(RESPONSE)
            self.transport.close()
        elif len(self.buf) > 8192 and self.transport is not None:
            self.transport.close()


async def serve(port: int, lifetime: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Serve, "0.0.0.0", port, backlog=4096, reuse_address=True)
    print("listening", flush=True)
    async with server:
        await asyncio.sleep(lifetime)  # bounded: the benchmark kills it long before


class _Fetch(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[bool]) -> None:
        self.done = done
        self.got = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(REQUEST)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.got += data

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(exc is None and self.got.startswith(b"HTTP/1.1 200"))


async def _worker(
    targets: list[tuple[str, int]], start: int, until: float, lat: list[float], errors: list[int]
) -> None:
    loop = asyncio.get_running_loop()
    i = start
    while time.monotonic() < until:
        host, port = targets[i % len(targets)]
        i += 1
        t0 = time.perf_counter()
        done: asyncio.Future[bool] = loop.create_future()
        try:
            await asyncio.wait_for(
                loop.create_connection(functools.partial(_Fetch, done), host, port), CONNECT_TIMEOUT_S
            )
            ok = await asyncio.wait_for(done, CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError):
            ok = False
        if ok:
            lat.append(time.perf_counter() - t0)
        else:
            errors[0] += 1


def _load_process(targets: list[tuple[str, int]], duration: float, concurrency: int, seed: int, q: Any) -> None:
    async def main() -> tuple[list[float], int]:
        lat: list[float] = []
        errors = [0]
        until = time.monotonic() + duration
        await asyncio.gather(*(_worker(targets, seed + k, until, lat, errors) for k in range(concurrency)))
        return lat, errors[0]

    lat, errors = asyncio.run(main())
    q.put((lat, errors))


def load(
    targets: list[tuple[str, int]], duration: float, workers: int, concurrency: int, keep_raw: bool = False
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_load_process, args=(targets, duration, concurrency, w, q)) for w in range(workers)]
    t0 = time.monotonic()
    for p in procs:
        p.start()
    lat: list[float] = []
    errors = 0
    for _ in procs:
        got, err = q.get(timeout=duration + 30)
        lat += got
        errors += err
    wall = time.monotonic() - t0
    for p in procs:
        p.join(timeout=10)
    lat.sort()
    n = len(lat)
    raw = {"latencies_us": [round(x * 1e6) for x in lat]} if keep_raw else {}

    def pct(p: float) -> float | None:
        return round(lat[min(n - 1, int(n * p))] * 1e3, 3) if n else None

    return {
        "requests": n,
        "errors": errors,
        "duration_s": duration,
        "wall_s": round(wall, 3),
        "rate_per_s": round(n / duration, 1),
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(lat[-1] * 1e3, 3) if n else None,
    } | raw


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.network.tcp")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("port", type=int)
    s.add_argument("--lifetime", type=float, default=900.0)
    ld = sub.add_parser("load")
    ld.add_argument("--targets", required=True)
    ld.add_argument("--duration", type=float, default=5.0)
    ld.add_argument("--workers", type=int, default=2)
    ld.add_argument("--concurrency", type=int, default=16)
    ld.add_argument("--raw", action="store_true", help="also every latency, in microseconds")
    args = p.parse_args(argv)
    if args.cmd == "serve":
        asyncio.run(serve(args.port, args.lifetime))
        return 0
    targets = []
    for t in args.targets.split(","):
        host, _, port = t.rpartition(":")
        targets.append((host, int(port)))
    print(json.dumps(load(targets, args.duration, args.workers, args.concurrency, args.raw)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
