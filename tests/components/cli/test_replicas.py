"""Two controller-managers and two schedulers (`replicas = 2` in cluster.toml), as an HA control
plane runs them: `up` starts both of each, `status` shows them, exactly one of each leads (its
/metrics says `leader_election_master_status` 1, the standby's 0), and when the leader is
SIGKILLed the standby takes the Lease and the cluster goes on: a Deployment created afterwards
gets its pods, scheduled.  `down` stops every replica."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from components.cli.launcher import LocalComponent
from tests.apiserver.support import ApiserverUnderTest, running_apiserver
from tests.support.cli import raftkube
from tests.support.wait import until

LEASE = [
    *("--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2"),
    *("--leader-elect-retry-period", "0.5"),
]
CONFIG = (
    f"[controller_manager]\nreplicas = 2\nargs = {json.dumps(LEASE)}\n"
    f"[scheduler]\nreplicas = 2\nargs = {json.dumps(LEASE)}\n"
)
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "after-failover"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "after-failover"}},
        "template": {
            "metadata": {"labels": {"app": "after-failover"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"]}]},
        },
    },
}


def leader_of(cluster: ApiserverUnderTest, name: str) -> LocalComponent | None:
    """The one replica of `name` that leads, once exactly one does and the other stands by."""
    replicas = [LocalComponent(cluster.data_dir, n) for n in (name, f"{name}-2")]
    states = [c.leads() for c in replicas]
    return replicas[states.index(True)] if sorted(map(str, states)) == ["False", "True"] else None


def test_a_standby_takes_over_from_a_killed_leader_and_the_cluster_goes_on(tmp_path: Path) -> None:
    with running_apiserver(tmp_path, "raftkube", components=True, hollow=1, config=CONFIG) as cluster:
        status = raftkube("status", "--data-dir", str(cluster.data_dir), "-o", "json", timeout=60)
        assert status.returncode == 0, status.stderr
        rows = {r["part"]: r for r in json.loads(status.stdout)}
        for part in ("controller-manager", "controller-manager-2", "scheduler", "scheduler-2"):
            assert rows[part]["healthy"] and rows[part]["pid"], rows.get(part)

        for name in ("controller-manager", "scheduler"):
            leader = until(f"one {name} leads", lambda n=name: leader_of(cluster, n), wait=30)
            pid = leader.pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)

            def taken_over(n: str = name, old: str = leader.name) -> bool:
                x = leader_of(cluster, n)
                return x is not None and x.name != old

            assert until(f"the standby {name} leads", taken_over, wait=30)

        cluster.ok("apply", "-f", "-", stdin=json.dumps(DEPLOYMENT))

        def scheduled() -> bool:
            pods = json.loads(cluster.ok("get", "pods", "-l", "app=after-failover", "-o", "json"))["items"]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        assert until("the Deployment's pods created and scheduled", scheduled, wait=60)
