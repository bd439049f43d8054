"""Latency on a host's links where the kernel cannot delay packets: this machine's kernel has
neither tc's netem ("Specified qdisc kind is unknown") nor nft's `queue` (to hold packets in a
program), so KernelMesh.delay puts this proxy in the path instead, still with TLS on.

How: in the sending member's namespace an nft `redirect` (nat, output hook) sends its new TCP
connections to the delayed peers to this process, listening in the same namespace.  It reads
where each connection was going (SO_ORIGINAL_DST: the kernel's conntrack kept it), dials that
peer itself with a socket mark the redirect rule skips (so it is not redirected back to
itself), and forwards the bytes unread (TLS passes through): each chunk the member sends is
held `mean +- jitter` seconds, in order (a later chunk never overtakes an earlier one), before
it goes on.  What comes back is not held: a link i -> j carries only i's messages to j
(store/server/transport.py), as ProxyMesh's links delay one way.

Bounds: at most MAX_HELD_BYTES held per connection (past it the proxy stops reading, and TCP
holds the sender back), MAX_CONNECTIONS at once; a connection to a peer it was not told to
delay is closed at once.  It prints `ready <port>` when it listens (port 0: one the kernel
picks) and runs until killed.

    python -m store.chaos.delay_proxy --mark 0x5243 --delay 10.77.0.12:2380=0.2/0.05 ...
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import random
import socket
import struct
import sys
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
SO_MARK = 36  # asm-generic/socket.h
MARK = 0x5243
"""The mark on the proxy's own connections, which the redirect rule leaves alone."""
MAX_HELD_BYTES = 4 << 20
MAX_CONNECTIONS = 256
CHUNK = 64 << 10
MAX_DELAY_S = 30.0


@dataclass(frozen=True)
class Delay:
    mean_s: float
    jitter_s: float = 0.0

    def draw(self, rng: random.Random) -> float:
        return max(0.0, self.mean_s + rng.uniform(-self.jitter_s, self.jitter_s))


def parse_delay(text: str) -> tuple[tuple[str, int], Delay]:
    """`ADDR:PORT=MEAN[/JITTER]` (seconds); ValueError naming what is wrong."""
    where, sep, how = text.partition("=")
    host, _, port_text = where.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"--delay {text!r}: want ADDR:PORT=MEAN[/JITTER]")
    try:
        address = str(ipaddress.IPv4Address(host))
        mean_text, _, jitter_text = how.partition("/")
        delay = Delay(float(mean_text), float(jitter_text or 0))
    except ValueError:
        raise ValueError(f"--delay {text!r}: want an IPv4 address and seconds as numbers") from None
    if not (0 <= delay.mean_s <= MAX_DELAY_S and 0 <= delay.jitter_s <= delay.mean_s):
        raise ValueError(f"--delay {text!r}: the mean must be 0-{MAX_DELAY_S:g} s and the jitter at most the mean")
    return (address, int(port_text)), delay


def original_destination(sock: socket.socket) -> tuple[str, int]:
    """Where a redirected connection was going (the kernel's record of it)."""
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, packed = struct.unpack("!2xH4s8x", raw)
    return socket.inet_ntoa(packed), port


class DelayProxy:
    def __init__(self, delays: dict[tuple[str, int], Delay], mark: int = MARK, seed: int | None = None) -> None:
        self.delays, self.mark = delays, mark
        self.rng = random.Random(seed)
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            dest = original_destination(writer.get_extra_info("socket"))
            delay = self.delays.get(dest)
            if delay is None or self.connections >= MAX_CONNECTIONS:
                return
            self.connections += 1
            try:
                up_reader, up_writer = await self._dial(dest)
                try:
                    await _both(self._held(reader, up_writer, delay), self._plain(up_reader, writer))
                finally:
                    up_writer.close()
            finally:
                self.connections -= 1
        except OSError:
            pass
        finally:
            writer.close()

    async def _dial(self, dest: tuple[str, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_MARK, self.mark)
            sock.setblocking(False)
            await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, dest), 5.0)
        except (OSError, TimeoutError):
            sock.close()
            raise OSError(f"cannot reach {dest}") from None
        return await asyncio.open_connection(sock=sock)

    async def _held(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay) -> None:
        """Forward what the member sends, each chunk `delay` late, in order; at most
        MAX_HELD_BYTES held (chunks of at most CHUNK bytes: the reader waits while the queue
        is full, and TCP holds the member back)."""
        held: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=MAX_HELD_BYTES // CHUNK)

        async def send() -> None:
            while True:
                due, chunk = await held.get()
                if not chunk:
                    break
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                writer.write(chunk)
                await writer.drain()
            with contextlib.suppress(OSError):
                writer.write_eof()

        sender = asyncio.create_task(send())
        last_due = 0.0
        try:
            while True:
                chunk = await reader.read(CHUNK)
                last_due = max(last_due, time.monotonic() + delay.draw(self.rng))
                put = asyncio.create_task(held.put((last_due, chunk)))
                await asyncio.wait({put, sender}, return_when=asyncio.FIRST_COMPLETED)
                if not put.done():  # the sender ended (failed): say why
                    put.cancel()
                    sender.result()
                    return
                if not chunk:
                    break
            await sender
        finally:
            sender.cancel()

    async def _plain(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(CHUNK):
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()


async def _both(a: Coroutine[Any, Any, None], b: Coroutine[Any, Any, None]) -> None:
    """Run both directions until both end (one may end first: a half-close), or one fails
    (then the other is cancelled)."""
    tasks = [asyncio.create_task(a), asyncio.create_task(b)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if t.exception() is not None:
                raise OSError(f"forwarding failed: {t.exception()!r}")
    finally:
        for t in tasks:
            t.cancel()


async def serve(delays: dict[tuple[str, int], Delay], mark: int, port: int) -> None:
    proxy = DelayProxy(delays, mark)
    server = await asyncio.start_server(proxy.handle, "0.0.0.0", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"ready {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m store.chaos.delay_proxy", description=__doc__.split("\n\n")[0])
    p.add_argument("--delay", action="append", default=[], help="ADDR:PORT=MEAN[/JITTER] seconds (repeatable)")
    p.add_argument("--mark", type=lambda t: int(t, 0), default=MARK, help=f"its own connections' mark ({MARK:#x})")
    p.add_argument("--port", type=int, default=0, help="listen port (0: any)")
    args = p.parse_args(argv)
    try:
        delays = dict(parse_delay(d) for d in args.delay)
        if not delays:
            raise ValueError("--delay: at least one")
        if not 0 <= args.port < 65536 or not 0 < args.mark < 1 << 32:
            raise ValueError("--port must be 0-65535 and --mark a 32-bit number above 0")
    except ValueError as e:
        print(f"delay_proxy: {e}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(delays, args.mark, args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
