"""The bench's HTTP/2 watchers (bench/apiserver/h2watch.py) against a server that allows few
streams a connection: the pool opens another connection at the server's advertised limit, as
Go's transport does, instead of having the 101st watch refused by the client library
(kube-apiserver 1.33 advertises 100; the pool's own cap is 200)."""

from __future__ import annotations

import asyncio

from bench.apiserver.h2watch import H2WatchPool, h2_context
from bench.apiserver.http11 import Target
from tests.apiserver.http.test_http2 import STREAMS, Served, served  # noqa: F401 - the fixture

WATCHES = 2 * STREAMS + 1


def test_the_pool_honours_the_servers_stream_limit(served: Served) -> None:  # noqa: F811 - the fixture
    target = Target("127.0.0.1", served.port, str(served.creds.ca), "token")
    ended: list[str] = []

    async def scenario() -> list[int]:
        pool = H2WatchPool(target, h2_context(target))
        try:
            for _ in range(WATCHES):  # /held: answered 200, then held open until the client goes
                await pool.open_watch("/held", lambda _data: None, ended.append)
            return [len(conn.watches) for conn in pool.connections]
        finally:
            await pool.close()

    per_connection = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert per_connection == [STREAMS, STREAMS, 1] and ended == []
