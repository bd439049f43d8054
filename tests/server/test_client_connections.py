"""The client opens one connection per endpoint, however many requests need it at once."""

from __future__ import annotations

import asyncio

from store.api.errors import StoreError
from store.client.client import Client


def test_concurrent_requests_share_one_connection_attempt() -> None:
    """A member that accepts but never answers the hello: 32 requests at once on a fresh
    client must share each open attempt (before the fix each opened, and leaked, its own)."""

    async def main() -> int:
        accepted: list[asyncio.StreamWriter] = []

        async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            accepted.append(w)

        server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        c = Client([f"tcp://127.0.0.1:{port}"], timeout=0.4, connect_timeout=0.3)
        results = await asyncio.gather(*(c.get(b"k") for _ in range(32)), return_exceptions=True)
        await c.close()
        assert all(isinstance(r, StoreError) for r in results), results
        for w in accepted:
            w.close()
        server.close()
        await server.wait_closed()
        return len(accepted)

    # Within 0.4 s there is room for two rounds of attempts (0.3 s hello timeout, backoff).
    assert 1 <= asyncio.run(main()) <= 2
