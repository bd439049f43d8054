"""One async client interface over the three systems, used inside the load generators.

Each adapter uses the system's own client path: raftkube's `store.client` (leader discovery,
retries), our etcd gRPC client, the pysyncobj service's msgpack client; raftkube and etcd
with mutual TLS when their cluster runs it (`ClientTLS`).  Watch streams only count events
(both raftkube's msgpack and etcd's protobuf are scanned, not turned into objects), so that
the watch benchmark measures the servers rather than a Python decoder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from bench.store.tls import ClientTLS

OnEvents = Callable[[int], None]
"""Called with the number of events in each watch response."""


class Adapter(Protocol):
    async def put(self, key: bytes, value: bytes) -> int:
        """Write one key; the revision when the system has one (else 0)."""
        ...

    async def get(self, key: bytes, serializable: bool) -> bytes | None: ...

    async def watch(self, endpoint: str, prefix: bytes, watchers: int, start_revision: int, on_events: OnEvents) -> Any:
        """Open `watchers` watches on `prefix` at `endpoint`; returns a handle for close_watch."""
        ...

    async def close_watch(self, handle: Any) -> None: ...

    async def close(self) -> None: ...


class RaftkubeAdapter:
    def __init__(self, endpoints: list[str], timeout: float, tls: ClientTLS | None = None) -> None:
        from store.client.client import Client

        self.tls = tls.ssl_context() if tls is not None else None
        self.client = Client(endpoints, timeout=timeout, tls=self.tls)

    async def put(self, key: bytes, value: bytes) -> int:
        return (await self.client.put(key, value)).revision

    async def get(self, key: bytes, serializable: bool) -> bytes | None:
        r = await self.client.get(key, serializable=serializable)
        return r.kvs[0].value if r.kvs else None

    async def watch(self, endpoint: str, prefix: bytes, watchers: int, start_revision: int, on_events: OnEvents) -> Any:
        from store.api.kv import prefix_end
        from store.api.protocol import ERROR
        from store.api.watch import WatchCreateRequest
        from store.client.connection import Connection

        conn = Connection(endpoint, tls=self.tls)
        await conn.open(5.0)
        req = WatchCreateRequest(prefix, prefix_end(prefix), start_revision).to_wire()

        def on_frame(kind: int, header: Any, payload: Any) -> None:
            if kind != ERROR:
                n = len(payload[2])
                if n:
                    on_events(n)

        for _ in range(watchers):
            conn.open_stream("watch", req, on_frame)
        return conn

    async def close_watch(self, handle: Any) -> None:
        await handle.close()

    async def close(self) -> None:
        await self.client.close()


class EtcdAdapter:
    def __init__(self, endpoints: list[str], timeout: float, tls: ClientTLS | None = None) -> None:
        from apiserver.storage.etcd_client import EtcdClient

        self.client = EtcdClient(endpoints, timeout=timeout, tls=tls)

    async def put(self, key: bytes, value: bytes) -> int:
        return await self.client.put(key, value)

    async def get(self, key: bytes, serializable: bool) -> bytes | None:
        kv = await self.client.get(key, serializable=serializable)
        return kv.value if kv is not None else None

    async def watch(self, endpoint: str, prefix: bytes, watchers: int, start_revision: int, on_events: OnEvents) -> Any:
        from apiserver.storage.etcd_client import WatchStream, prefix_end

        created = asyncio.Event()
        count = 0

        def on_response(watch_id: int, events: int, is_created: bool, canceled: bool) -> None:
            nonlocal count
            if is_created:
                count += 1
                if count == watchers:
                    created.set()
            if events:
                on_events(events)

        ws = WatchStream(self.client, endpoint, on_response)
        for _ in range(watchers):
            ws.create(prefix, prefix_end(prefix), start_revision)
        await asyncio.wait_for(created.wait(), 10)
        return ws

    async def close_watch(self, handle: Any) -> None:
        await handle.close()

    async def close(self) -> None:
        await self.client.close()


class SyncobjAdapter:
    def __init__(self, endpoints: list[str], timeout: float) -> None:
        from bench.store.syncobj_service import SyncobjClient

        self.client = SyncobjClient(endpoints[0], timeout=timeout)

    async def put(self, key: bytes, value: bytes) -> int:
        await self.client.put(key, value)
        return 0

    async def get(self, key: bytes, serializable: bool) -> bytes | None:
        return await self.client.get(key)  # always a local read of the node's dict

    async def watch(self, endpoint: str, prefix: bytes, watchers: int, start_revision: int, on_events: OnEvents) -> Any:
        raise NotImplementedError("pysyncobj has no watch")

    async def close_watch(self, handle: Any) -> None:
        return None

    async def close(self) -> None:
        await self.client.close()


def make_adapter(system: str, endpoints: list[str], timeout: float = 5.0, tls: ClientTLS | None = None) -> Adapter:
    """`tls`: the client files of a cluster started with TLS (pysyncobj has none)."""
    if system == "raftkube":
        return RaftkubeAdapter(endpoints, timeout, tls)
    if system == "etcd":
        return EtcdAdapter(endpoints, timeout, tls)
    if system == "pysyncobj":
        if tls is not None:
            raise ValueError("pysyncobj has no TLS")
        return SyncobjAdapter(endpoints, timeout)
    raise ValueError(f"unknown system {system!r}")
