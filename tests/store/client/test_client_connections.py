"""The client opens one connection per endpoint, however many requests need it at once."""

from __future__ import annotations

import asyncio

from store.api.errors import StoreError, UnavailableError
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


def test_a_closed_client_refuses_requests_without_connecting() -> None:
    """Work still running after close (a watch resuming, a retry) must not open a socket that
    nobody would close: it gets UnavailableError at once."""

    async def main() -> tuple[int, float, str]:
        accepted: list[asyncio.StreamWriter] = []

        async def hold(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            accepted.append(w)

        server = await asyncio.start_server(hold, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        c = Client([f"tcp://127.0.0.1:{port}"], timeout=5.0)
        await c.close()
        t0 = asyncio.get_running_loop().time()
        try:
            await c.get(b"k")
            message = ""
        except UnavailableError as e:
            message = str(e)
        took = asyncio.get_running_loop().time() - t0
        server.close()
        await server.wait_closed()
        return len(accepted), took, message

    accepted, took, message = asyncio.run(main())
    assert accepted == 0
    assert message == "the client is closed"
    assert took < 1.0  # not the 5 s request deadline
