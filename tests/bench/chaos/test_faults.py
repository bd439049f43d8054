"""Fault bookkeeping of `raftkube chaos cluster` at the lowest layer: two network faults never
hold the same links at once (the first one's heal would end the second unseen, its record still
running); the second is recorded as a fault with no target, taking no time."""

from __future__ import annotations

from pathlib import Path

from bench.chaos import faults
from bench.chaos.cluster import ChaosCluster


def test_a_second_network_fault_on_held_links_has_no_target(tmp_path: Path) -> None:
    cluster = ChaosCluster(tmp_path / "rk")
    first = faults.FaultRecord("isolate-store-leader", "store-1", 3.0)
    second = faults.FaultRecord("lossy-store-member", "store-2", 4.0)
    other = faults.FaultRecord("isolate-apiserver", "apiserver-1", 4.5)
    assert faults._hold_links(cluster, faults.STORE_LINKS, first)
    assert not faults._hold_links(cluster, faults.STORE_LINKS, second)  # the members share links
    assert second.ended == second.started and "under another network fault" in second.note
    assert faults._hold_links(cluster, "apiserver-1", other)  # an apiserver's own links are apart
    cluster.net_faulted.discard(faults.STORE_LINKS)  # the first one healed
    assert faults._hold_links(cluster, faults.STORE_LINKS, faults.FaultRecord("slow-store-member", "store-3", 9.0))
