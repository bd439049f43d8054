"""The deterministic CI subset of the chaos suite: every fault kind once, with a fixed seed,
on a fresh 3-member cluster (fast profile: election timeout 200 ms), every check applied.
Then each canary (a test-only unsafe mode) must be caught by some scenario.

A failing scenario's report (history, violations, member logs and data) stays in the
test's tmp dir; its `violations.txt` starts with the command that reruns it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from store.chaos.faults import FAULTS
from store.chaos.report import account, write_scenario
from store.chaos.scenario import Result, Scenario, run_scenario
from tests.support.network import free_cidr

SEED = 7

CI_FAULTS = [f for f in FAULTS if f != "none"]  # the baseline has its own test below
"""Every named fault, each verified end to end through the runner with this seed."""


def run(sc: Scenario, tmp_path: Path, *, report: bool = False) -> Result:
    """Run `sc`; its report is written when it failed (or with `report`): writing the history of
    a passing one took 0.3 s of each scenario's ~4 s for files nobody reads."""
    r = asyncio.run(run_scenario(sc, tmp_path / "report"))
    if report or not r.passed:
        write_scenario(r)
    return r


@pytest.mark.parametrize("fault", CI_FAULTS)
def test_fault_scenario_passes_every_check(fault: str, tmp_path: Path) -> None:
    r = run(Scenario(fault, seed=SEED, after=0.8, warmup=0.8), tmp_path)
    assert "NOT" not in r.fault_account, r.fault_account
    assert r.passed, account(r)


CANARY_SCENARIOS = {
    # Client writes are never fsynced; every member is killed and loses what was not fsynced.
    # (Members also take more snapshots before the kill than they keep, on any machine: see
    # CANARY_SNAPSHOT_COUNT.)  What is lost shows as a lost acknowledged write, or, when the
    # members lost different tails, as two members applying different entries at one index
    # (seen once in CI): both are what unsynced acknowledgements do.
    "ack-before-fsync": ("kill-all", {"lost-write", "applied-agreement"}),
    # A deposed leader keeps answering linearizable reads from its stale state.
    "read-without-readindex": ("isolate-leader", {"realtime", "linearizable-read", "wgl"}),
    # Compaction runs every 100-200 ms; watchers then miss an event.
    "drop-watch-event-at-compaction": ("none", {"watch-reliable", "watch-resumable", "watch-history-agree"}),
    # Deletes reach watchers without their previous value.
    "skip-prev-kv": ("none", {"watch-prev-kv"}),
}


CANARY_SNAPSHOT_COUNT = {"ack-before-fsync": 25}
"""A member snapshot every 25 entries instead of 300: the canary's unsynced snapshot markers
then meet snapshot purging (3 kept) before the kill however fast the machine is; with 300,
only a machine applying 900 entries during the warmup got there (the bootstrap snapshot,
which the only durable marker pointed at, was purged and no member could restart)."""


CANARY_ATTEMPTS = {"read-without-readindex": 3}
"""Seeds to try before a canary counts as missed.  A stale read needs the isolated leader to
answer a read of a key the new leader has already written, in the few hundred milliseconds
before CheckQuorum deposes it: on a loaded machine one run can miss that window (seen once in
CI, seed 7), so this canary gets three seeds; a checker that cannot see stale reads misses all."""


@pytest.mark.parametrize("canary", sorted(CANARY_SCENARIOS))
def test_canary_is_caught(canary: str, tmp_path: Path) -> None:
    fault, expected = CANARY_SCENARIOS[canary]
    snapshot_count = CANARY_SNAPSHOT_COUNT.get(canary, Scenario.snapshot_count)
    accounts = []
    for attempt in range(CANARY_ATTEMPTS.get(canary, 1)):
        sc = Scenario(fault, seed=SEED + attempt, canary=canary, after=0.8, warmup=0.8, snapshot_count=snapshot_count)
        r = run(sc, tmp_path / f"attempt-{attempt}")
        caught = {v.check for v in r.violations}
        if caught:
            break
        accounts.append(account(r))
    assert caught, f"canary {canary} was not caught:\n" + "\n".join(accounts)
    assert caught & expected, f"canary {canary} caught only by {sorted(caught)}:\n{account(r)}"


def test_baseline_without_faults_is_clean(tmp_path: Path) -> None:
    r = run(Scenario("none", seed=SEED), tmp_path, report=True)
    assert r.passed, account(r)
    assert r.ops > 200
    # the report a failing scenario leaves: every operation and watch, and the account
    report = tmp_path / "report"
    assert len((report / "operations.jsonl").read_text().splitlines()) == r.ops
    assert (report / "watches.jsonl").stat().st_size > 0
    assert (report / "violations.txt").read_text().startswith("scenario none@7: PASSED\nrerun: ")


ETCD_API_FAULTS = ["kill-leader", "isolate-leader", "member-replace"]
"""A leader crash, a partition and a membership change, with the KV clients and the compactor
on the members' etcd gRPC API (writes forwarded by followers, keep-alives relayed); every
fault group runs through `raftkube chaos --api etcd` by hand (closing note)."""


@pytest.mark.parametrize("fault", ETCD_API_FAULTS)
def test_fault_scenario_through_the_etcd_api_passes_every_check(fault: str, tmp_path: Path) -> None:
    r = run(Scenario(fault, seed=SEED, after=0.8, warmup=0.8, api="etcd"), tmp_path)
    assert "NOT" not in r.fault_account, r.fault_account
    assert r.passed, account(r)
    assert r.ops > 200 and r.ops > r.errors


def _stale_reads_caught(tmp_path: Path, **where: Any) -> None:
    """The read-without-readindex canary behind an isolated leader is caught within
    CANARY_ATTEMPTS seeds, with the scenario placed as `where` says (api, hosts)."""
    caught: set[str] = set()
    accounts = []
    for attempt in range(CANARY_ATTEMPTS["read-without-readindex"]):
        sc = Scenario(
            "isolate-leader", seed=SEED + attempt, canary="read-without-readindex", after=0.8, warmup=0.8, **where
        )
        r = run(sc, tmp_path / f"attempt-{attempt}")
        caught = {v.check for v in r.violations}
        if caught:
            break
        accounts.append(account(r))
    assert caught & {"realtime", "linearizable-read", "wgl"}, "\n".join(accounts)


def test_a_stale_read_through_the_etcd_api_is_caught(tmp_path: Path) -> None:
    """The checker sees through the etcd API too: a member that answers reads from stale
    state (the read-without-readindex canary) is caught, as on our protocol."""
    _stale_reads_caught(tmp_path, api="etcd")


NETNS_FAULTS = ["partition-majority", "clients-cut", "kill-leader"]
"""A partition and cut clients made by the kernel (nftables in the members' namespaces), and a
crash, with every member on a host of its own and mutual TLS on (root: CI is); the whole
fault set runs through `raftkube chaos --hosts netns` by hand (closing note)."""


@pytest.mark.parametrize("fault", NETNS_FAULTS)
def test_fault_scenario_on_hosts_of_their_own_with_tls_passes_every_check(fault: str, tmp_path: Path) -> None:
    sc = Scenario(fault, seed=SEED, after=0.8, warmup=0.8, hosts="netns", hosts_subnet=free_cidr())
    r = run(sc, tmp_path)
    assert "NOT" not in r.fault_account, r.fault_account
    assert r.passed, account(r)
    assert r.ops > 200 and r.ops > r.errors


def test_a_stale_read_behind_a_kernel_partition_is_caught(tmp_path: Path) -> None:
    """The read-without-readindex canary behind an nftables partition, TLS on: caught."""
    _stale_reads_caught(tmp_path, hosts="netns", hosts_subnet=free_cidr())
