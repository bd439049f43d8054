"""The pysyncobj baseline: one node process = a SyncObj replicating a dict + a msgpack TCP port.

    python -m bench.store.syncobj_service --self 127.0.0.1:P --partner 127.0.0.1:Q ... \\
        --port C --data-dir DIR

What a Python user would write today: a SyncObj subclass with a `@replicated` `set`, its
journal file on (pysyncobj writes it through mmap and never fsyncs it: a known property of
pysyncobj, left as it is), default timing.  A write is answered when pysyncobj's callback
says it was applied on this node; writes to a follower are forwarded by pysyncobj itself.
Reads are local reads of this node's dict: pysyncobj offers no linearizable read.

Protocol: a stream of msgpack arrays.  Request [id, op, args]; reply [id, ok, result].
Ops: "set" [key, value] -> None; "get" [key] -> value or None; "status" [] -> dict.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import msgpack
from pysyncobj import SyncObj, SyncObjConf, replicated


class ReplicatedDict(SyncObj):  # type: ignore[misc]
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_addr, partners, conf=conf)
        self.data: dict[bytes, bytes] = {}

    @replicated  # type: ignore[untyped-decorator]
    def set(self, key: bytes, value: bytes) -> None:
        self.data[key] = value


class _Server(asyncio.Protocol):
    def __init__(self, node: ReplicatedDict, loop: asyncio.AbstractEventLoop) -> None:
        self.node = node
        self.loop = loop
        self.unpacker = msgpack.Unpacker(use_list=True, raw=False)
        self.transport: asyncio.Transport | None = None
        self.pending: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def _reply(self, rid: int, ok: bool, result: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(msgpack.packb([rid, ok, result], use_bin_type=True))

    def data_received(self, data: bytes) -> None:
        self.unpacker.feed(data)
        node = self.node
        for rid, op, args in self.unpacker:
            if op == "set":
                node.set(args[0], args[1], callback=self._callback(rid))
            elif op == "get":
                self._reply(rid, True, node.data.get(args[0]))
            elif op == "status":
                leader = node._getLeader()
                self._reply(
                    rid,
                    True,
                    {
                        "self": node.selfNode.address,
                        "leader": leader.address if leader is not None else None,
                        "ready": node.isReady(),
                        "keys": len(node.data),
                    },
                )
            else:
                self._reply(rid, False, f"unknown op {op!r}")

    def _callback(self, rid: int) -> Any:
        loop, reply = self.loop, self._reply

        def done(result: Any, error: int) -> None:
            # Called on pysyncobj's thread once applied (error 0) or failed.
            loop.call_soon_threadsafe(reply, rid, error == 0, None if error == 0 else f"pysyncobj error {error}")

        return done


async def serve(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    conf = SyncObjConf(
        journalFile=str(data_dir / "journal.bin"),
        fullDumpFile=str(data_dir / "dump.bin"),
    )
    node = ReplicatedDict(args.self_addr, args.partner, conf)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Server(node, loop), "127.0.0.1", args.port, reuse_address=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    with contextlib.suppress(Exception):
        node.destroy()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="syncobj-service", description=__doc__)
    p.add_argument("--self", dest="self_addr", required=True)
    p.add_argument("--partner", action="append", default=[])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--data-dir", required=True)
    args = p.parse_args(argv)
    asyncio.run(serve(args))
    return 0


class _ClientProto(asyncio.Protocol):
    def __init__(self) -> None:
        self.unpacker = msgpack.Unpacker(use_list=True, raw=False)
        self.waiters: dict[int, asyncio.Future[Any]] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.unpacker.feed(data)
        for rid, ok, result in self.unpacker:
            fut = self.waiters.pop(rid, None)
            if fut is None or fut.done():
                continue
            if ok:
                fut.set_result(result)
            else:
                fut.set_exception(SyncobjError(str(result)))

    def connection_lost(self, exc: Exception | None) -> None:
        for fut in self.waiters.values():
            if not fut.done():
                fut.set_exception(SyncobjError(f"connection lost: {exc}"))
        self.waiters.clear()


class SyncobjError(Exception):
    """The service answered an error or the connection is gone."""


class SyncobjClient:
    """Many requests in flight on one connection to one node."""

    def __init__(self, endpoint: str, timeout: float = 5.0) -> None:
        self.endpoint = endpoint.split("://", 1)[-1]
        self.timeout = timeout
        self._proto: _ClientProto | None = None
        self._next = 1

    async def _conn(self) -> _ClientProto:
        if self._proto is None or self._proto.transport is None or self._proto.transport.is_closing():
            host, port = self.endpoint.rsplit(":", 1)
            loop = asyncio.get_running_loop()
            _, proto = await asyncio.wait_for(loop.create_connection(_ClientProto, host, int(port)), self.timeout)
            self._proto = proto
        return self._proto

    async def call(self, op: str, args: list[Any]) -> Any:
        proto = await self._conn()
        rid = self._next
        self._next += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        proto.waiters[rid] = fut
        assert proto.transport is not None
        proto.transport.write(msgpack.packb([rid, op, args], use_bin_type=True))
        try:
            return await asyncio.wait_for(fut, self.timeout)
        finally:
            proto.waiters.pop(rid, None)

    async def put(self, key: bytes, value: bytes) -> None:
        await self.call("set", [key, value])

    async def get(self, key: bytes) -> bytes | None:
        result = await self.call("get", [key])
        return result if result is None else bytes(result)

    async def status(self) -> dict[str, Any]:
        return dict(await self.call("status", []))

    async def close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
