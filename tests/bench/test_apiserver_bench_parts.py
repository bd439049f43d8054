"""The apiserver benchmark's pure parts: event parsing, scoring, profile summaries, the client's framing."""

from __future__ import annotations

import asyncio

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.apiserver.http11 import Connection, Target
from bench.apiserver.loadgen import SENT_ANNOTATION, parse_sent, pod_body
from bench.apiserver.phases.fanout import score, split
from bench.apiserver.profile import summarise


def test_a_pod_body_carries_its_stamp_and_node() -> None:
    ns, body = pod_body("r1", 7, ["a", "b"], 5, "p")
    pod = orjson.loads(body)
    assert ns == "b" and pod["metadata"]["name"] == "p-7" and pod["spec"]["nodeName"] == "node-2"
    line = orjson.dumps({"type": "ADDED", "object": pod}) + b"\n"
    kind, run, stamp = parse_sent(line) or (b"", b"", 0.0)
    assert (kind, run) == (b"ADDED", b"r1") and stamp > 0
    assert pod["metadata"]["annotations"][SENT_ANNOTATION].endswith(f"{stamp:.6f}")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_parse_sent_never_raises(line: bytes) -> None:
    parse_sent(line)
    parse_sent(b'{"type":"ADDED","object":{"a":{"' + SENT_ANNOTATION.encode() + b'":"' + line)


def test_split_deals_every_index_once() -> None:
    groups = split(7, 3)
    assert groups == [[0, 3, 6], [1, 4], [2, 5]]
    assert split(1, 4) == [[0]]


def test_score_counts_missing_and_extra_per_watcher() -> None:
    selectors = ["spec.nodeName=node-0", "spec.nodeName=node-1", ""]
    created = [0, 1, 2, 3]  # node-0 gets 0, 2; node-1 gets 1, 3; the unfiltered one all four
    got = score(selectors, [[0, 2], [1]], [[2, 3], [1]], created, nodes=2)
    assert got == {
        "events_expected": 8,
        "events_delivered": 2 + 3 + 1,  # node-0: 2 of 2; unfiltered: 3 of 4; node-1: 1 of 2
        "events_missing": 1 + 1,
        "events_extra": 0,
        "watchers_complete": 1,
    }


def test_profile_summary_shares() -> None:
    raw = (
        "<module> (components/cli.py:1);handle (/work/wt/x/apiserver/http/app.py:10);dumps (orjson.py:1) 30\n"
        "<module> (components/cli.py:1);handle (/work/wt/x/apiserver/http/app.py:10) 10\n"
        "garbage line\n"
    )
    s = summarise(raw, seconds=1.0, rate=80.0)
    assert s["samples"] == 40 and s["busy_pct"] == 50.0
    assert s["self"][0] == {"frame": "dumps (orjson.py)", "pct": 75.0}
    assert s["inclusive"][0] == {"frame": "handle (apiserver/http/app.py)", "pct": 100.0}


def test_the_client_reads_chunked_and_sized_bodies() -> None:
    async def run() -> list[bytes]:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            writer.write(b'6\r\n{"a":1\r\n4\r\n}\n{}\r\n1\r\n\n\r\n0\r\n\r\n')
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = Connection(Target("127.0.0.1", port, "", "t"), ctx=None)  # type: ignore[arg-type]
        conn.reader, conn.writer = await asyncio.open_connection("127.0.0.1", port)
        first = await conn.request("GET", "/x")
        await conn.open_stream("/w")
        lines = [line async for line in conn.lines()]
        await conn.close()
        server.close()
        return [first.body, *lines]

    assert asyncio.run(run()) == [b"hello", b'{"a":1}\n', b"{}\n"]
