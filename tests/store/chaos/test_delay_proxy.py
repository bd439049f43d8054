"""The delay proxy (store/chaos/delay_proxy.py) at its lowest layer: what it accepts on its
command line (anything else is refused with a message naming the flag, exit 2), and its held
direction over real loopback sockets: every byte arrives, in order, none before its delay,
also for a transfer far larger than what it may hold.  Its place in the kernel's path (the
nft redirect, the original destination, its own marked connections) is shown by
test_kernel_net.py (root)."""

from __future__ import annotations

import asyncio
import hashlib
import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from store.chaos.delay_proxy import MAX_HELD_BYTES, Delay, DelayProxy, main, parse_delay


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10.77.0.12:2380=0.2", (("10.77.0.12", 2380), Delay(0.2, 0.0))),
        ("10.77.0.12:2380=0.2/0.05", (("10.77.0.12", 2380), Delay(0.2, 0.05))),
    ],
)
def test_a_delay_is_read_from_its_flag(text: str, want: tuple[tuple[str, int], Delay]) -> None:
    assert parse_delay(text) == want


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("10.77.0.12:2380", "want ADDR:PORT=MEAN"),
        ("10.77.0.12:0=0.1", "want ADDR:PORT=MEAN"),
        ("host:2380=0.1", "IPv4 address"),
        ("10.77.0.12:2380=fast", "seconds as numbers"),
        ("10.77.0.12:2380=0.1/0.2", "jitter at most the mean"),
        ("10.77.0.12:2380=nan", "the mean must be"),
        ("10.77.0.12:2380=99", "the mean must be"),
    ],
)
def test_a_bad_delay_is_refused_naming_the_flag(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="--delay") as e:
        parse_delay(text)
    assert says in str(e.value)


@given(st.text(max_size=60))
def test_any_flag_text_is_read_or_refused_never_crashes(text: str) -> None:
    try:
        (_, port), delay = parse_delay(text)
    except ValueError:
        return
    assert 0 < port < 65536 and 0 <= delay.jitter_s <= delay.mean_s


def test_the_command_line_refuses_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "--delay: at least one" in capsys.readouterr().err
    assert main(["--delay", "10.0.0.1:1=0.1", "--port", "70000"]) == 2
    assert "--port must be" in capsys.readouterr().err


async def _through_held(payload: bytes, delay: Delay) -> tuple[bytes, float]:
    """Send `payload` through the held direction to a loopback sink; what the sink got and
    when its first byte came (seconds after the first was sent)."""
    got = bytearray()
    first: list[float] = []
    done = asyncio.Event()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while chunk := await reader.read(1 << 16):
            if not first:
                first.append(time.monotonic())
            got.extend(chunk)
        writer.close()
        done.set()

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        _, to_sink = await asyncio.open_connection("127.0.0.1", port)
        source_reader = asyncio.StreamReader(limit=1 << 20)
        proxy = DelayProxy({}, seed=7)
        held = asyncio.create_task(proxy._held(source_reader, to_sink, delay))
        sent = time.monotonic()
        rng = random.Random(3)
        at = 0
        while at < len(payload):  # the member's writes, in pieces of any size
            n = rng.randint(1, 200_000)
            source_reader.feed_data(payload[at : at + n])
            at += n
            await asyncio.sleep(0)
        source_reader.feed_eof()
        await asyncio.wait_for(held, 60)
        await asyncio.wait_for(done.wait(), 60)
        to_sink.close()
        await to_sink.wait_closed()
    return bytes(got), first[0] - sent


def test_every_byte_arrives_in_order_and_none_early() -> None:
    payload = random.Random(1).randbytes(300_000)
    got, first = asyncio.run(_through_held(payload, Delay(0.1, 0.05)))
    assert got == payload
    assert first >= 0.045  # mean - jitter, less the clock's grain


def test_a_transfer_larger_than_what_it_may_hold_passes_whole() -> None:
    payload = random.Random(2).randbytes(3 * MAX_HELD_BYTES)
    got, _ = asyncio.run(_through_held(payload, Delay(0.01)))
    assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()
