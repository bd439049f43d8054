"""free_ports never hands out a port twice in one process: `up` picks a port for each part of
a cluster before that part binds it, and the kernel may offer a released port again."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from machinery.process import launch
from machinery.process.launch import LISTEN_PORT_FLOOR, LauncherError, free_ports


class _Bound:
    """A socket stand-in that says it is bound to `port`."""

    def __init__(self, port: int) -> None:
        self.port = port

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def close(self) -> None:
        pass


def _kernel_offering(ports: list[int]) -> Callable[[str], socket.socket]:
    """A bind_any that gets `ports` from the kernel, in order (the same one again, say)."""
    offered: Iterator[int] = iter(ports)

    def bind_any(host: str) -> socket.socket:
        return _Bound(next(offered))  # type: ignore[return-value]

    return bind_any


@pytest.fixture(autouse=True)
def _fresh_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "_handed_out", {})


def test_a_port_offered_again_is_skipped() -> None:
    # the apiserver's port was released by free_ports and not bound yet when the store's
    # ports were picked: the kernel offered it again (the clean run 14 failure)
    bind_any = _kernel_offering([40001, 40001, 40002, 40003, 40004])
    assert free_ports(1, bind_any=bind_any) == [40001]
    assert free_ports(3, bind_any=bind_any) == [40002, 40003, 40004]


def test_a_process_that_has_handed_out_every_offered_port_gets_a_clear_error() -> None:
    bind_any = _kernel_offering([40001] * 100)
    assert free_ports(1, bind_any=bind_any) == [40001]
    with pytest.raises(LauncherError, match=r"no 1 free ports on 127\.0\.0\.1"):
        free_ports(1, bind_any=bind_any)


def test_the_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "HANDED_OUT_KEPT", 3)
    bind_any = _kernel_offering([1, 2, 3, 4, 1])
    assert [free_ports(1, bind_any=bind_any)[0] for _ in range(4)] == [1, 2, 3, 4]
    assert free_ports(1, bind_any=bind_any) == [1]  # the oldest was forgotten


def test_real_ports_are_distinct_across_calls_and_bindable() -> None:
    picked = [p for _ in range(100) for p in free_ports(2)]
    assert len(set(picked)) == len(picked)
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked[-1]))


def test_ports_come_from_below_the_range_outgoing_connections_take_theirs() -> None:
    """A port from the ephemeral range can be taken by any connect() between free_ports and
    its user's bind; below it only another listener could take it."""
    floor = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(LISTEN_PORT_FLOOR <= p < floor for p in free_ports(20))
