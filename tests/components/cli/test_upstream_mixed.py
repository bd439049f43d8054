"""A mixed control plane (issue 24 section 4): `raftkube up --upstream scheduler,controller-manager`
runs the built kube-scheduler and kube-controller-manager v1.33 against our apiserver, our store
and two of our kubelets, and kube's own controllers make a workload scenario converge on our
API: a Deployment scaled and rolled, a Job, a CronJob, garbage collection through
ownerReferences, namespace deletion, a StatefulSet, a DaemonSet, a PodDisruptionBudget that
`kubectl drain` respects.  Their informers sync and their logs carry no list/watch errors.

Deselected by default (the `peers` marker: CI does not build peers); it fails, naming the
build command, when a peer is missing.  Every wait is bounded; `raftkube down` and stops by pid
leave no process behind."""

from __future__ import annotations

import functools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.cli import upstream
from components.cli.upstream import UpstreamComponent
from machinery.process.peers import peer_path
from tests.apiserver.support import ApiserverUnderTest
from tests.support.cli import raftkube
from tests.support.detached import detached_cluster
from tests.support.paths import HOST_NETWORK
from tests.support.wait import until as wait_until

pytestmark = pytest.mark.peers

WAIT_S = 120.0
PARTS = ("scheduler", "controller-manager")
LOG_ERRORS = re.compile(r"Failed to watch|failed to list|forbidden|the server could not find", re.IGNORECASE)
BUSYBOX = {"image": "busybox", "name": "main"}


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    return wait_until(what, check, wait, step=0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    for part in PARTS:
        binary = peer_path(upstream.BINARIES[part])
        if not binary.is_file():
            pytest.fail(f"{binary} is not built: run `{upstream.build_command(PARTS)}`")
    config = "[store]\nmembers = 3\n[store.raft]\ntick_ms = 20\n[apiserver]\nstartup_timeout = 60.0\n" + HOST_NETWORK

    def stop_parts(data_dir: Path) -> None:
        for part in PARTS:
            UpstreamComponent(data_dir, part).stop(timeout=5)

    tmp = tmp_path_factory.mktemp("mixed")
    upstream_args = ("--kubelets", "2", "--hollow-nodes", "0", "--upstream", ",".join(PARTS))
    with detached_cluster(tmp, config, *upstream_args, also_stop=stop_parts) as up:
        yield up


def apply(cluster: ApiserverUnderTest, obj: dict[str, Any], ns: str = "default") -> None:
    cluster.ok("apply", "-n", ns, "-f", "-", stdin=json.dumps(obj))


def get(cluster: ApiserverUnderTest, *what: str, ns: str = "default") -> Any:
    return json.loads(cluster.ok("get", "-n", ns, *what, "-o", "json"))


def absent(cluster: ApiserverUnderTest, *what: str, ns: str = "default") -> bool:
    proc = cluster.kubectl("get", "-n", ns, *what, "-o", "name")
    return proc.returncode != 0 and "NotFound" in proc.stderr


def pods(cluster: ApiserverUnderTest, selector: str, ns: str = "default") -> list[dict[str, Any]]:
    return [
        p for p in get(cluster, "pods", "-l", selector, ns=ns)["items"] if not p["metadata"].get("deletionTimestamp")
    ]


def running(cluster: ApiserverUnderTest, selector: str, n: int, ns: str = "default") -> list[dict[str, Any]] | None:
    live = pods(cluster, selector, ns)
    up = [p for p in live if p.get("status", {}).get("phase") == "Running"]
    return up if len(up) == n == len(live) else None


def template(app: str, script: str = "exec sleep 3600") -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [{**BUSYBOX, "command": ["sh", "-c", script]}],
        },
    }


def workload(kind: str, name: str, replicas: int | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}, "template": template(name), **spec}
    if replicas is not None:
        body["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


def test_both_run_healthy_and_lead(cluster: ApiserverUnderTest) -> None:
    proc = raftkube("status", "--data-dir", str(cluster.data_dir), "-o", "json", timeout=60)
    rows = {r["part"]: r for r in json.loads(proc.stdout)}
    for part in PARTS:
        assert rows[part]["healthy"] and rows[part]["url"].startswith("https://127.0.0.1:"), rows[part]
    for lease in ("kube-scheduler", "kube-controller-manager"):
        until(f"the {lease} Lease held", functools.partial(_holder, cluster, lease))
    until("node-1 and node-2 Ready", lambda: _ready_nodes(cluster) == 2)


def _holder(cluster: ApiserverUnderTest, lease: str) -> str | None:
    holder = get(cluster, "lease", lease, ns="kube-system")["spec"].get("holderIdentity")
    return holder if isinstance(holder, str) else None


def _ready_nodes(cluster: ApiserverUnderTest) -> int:
    return sum(
        any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
        for n in get(cluster, "nodes")["items"]
    )


def test_a_cronjob_starts_jobs(cluster: ApiserverUnderTest) -> None:
    """First, as its schedule's minute may be a minute away."""
    apply(
        cluster,
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "tick"},
            "spec": {
                "schedule": "* * * * *",
                "jobTemplate": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{**BUSYBOX, "command": ["sh", "-c", "echo tick"]}],
                            }
                        }
                    }
                },
            },
        },
    )


def test_a_deployment_scaled_and_rolled(cluster: ApiserverUnderTest) -> None:
    apply(cluster, workload("Deployment", "web", 2))
    cluster.ok("rollout", "status", "deployment/web", "--timeout=120s", timeout=130)
    until("2 web pods Running", lambda: running(cluster, "app=web", 2))
    cluster.ok("scale", "deployment/web", "--replicas=3")
    until("3 web pods Running", lambda: running(cluster, "app=web", 3))
    cluster.ok("set", "env", "deployment/web", "ROLLED=1")
    cluster.ok("rollout", "status", "deployment/web", "--timeout=120s", timeout=130)
    up = until("3 rolled web pods Running", lambda: running(cluster, "app=web", 3))
    assert all({"name": "ROLLED", "value": "1"} in p["spec"]["containers"][0].get("env", []) for p in up), (
        "a pod of the old template is left"
    )
    d = get(cluster, "deployment", "web")
    assert d["status"].get("updatedReplicas") == 3 and d["status"].get("availableReplicas") == 3, d["status"]
    sets = get(cluster, "replicasets", "-l", "app=web")["items"]
    assert len(sets) == 2 and sorted(rs["spec"]["replicas"] for rs in sets) == [0, 3]


def test_a_job_completes(cluster: ApiserverUnderTest) -> None:
    apply(
        cluster,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "once"},
            "spec": {
                "completions": 2,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{**BUSYBOX, "command": ["sh", "-c", "echo ok"]}]}
                },
            },
        },
    )
    until("the Job complete", lambda: get(cluster, "job", "once")["status"].get("succeeded") == 2)
    until(
        "the Job's Complete condition",
        lambda: any(c["type"] == "Complete" for c in get(cluster, "job", "once")["status"].get("conditions", [])),
    )


def test_garbage_collection_follows_owner_references(cluster: ApiserverUnderTest) -> None:
    apply(cluster, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}})
    uid = get(cluster, "configmap", "owner")["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
    apply(cluster, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "ownerReferences": [ref]}})
    cluster.ok("delete", "configmap", "owner")
    until("the owned ConfigMap collected", lambda: absent(cluster, "configmap", "owned"))
    # foreground: the owner waits for its dependents (the ReplicaSet, then its pods)
    apply(cluster, workload("Deployment", "gone", 1))
    until("the gone pod Running", lambda: running(cluster, "app=gone", 1))
    cluster.ok("delete", "deployment", "gone", "--cascade=foreground", "--timeout=120s", timeout=130)
    until("the ReplicaSet and pod collected", lambda: not get(cluster, "rs,pods", "-l", "app=gone")["items"])


def test_namespace_deletion_empties_it(cluster: ApiserverUnderTest) -> None:
    cluster.ok("create", "namespace", "doomed")
    apply(cluster, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, ns="doomed")
    until("the default ServiceAccount made", lambda: not absent(cluster, "serviceaccount", "default", ns="doomed"))
    apply(cluster, workload("Deployment", "inside", 1), ns="doomed")
    until("the pod in doomed Running", lambda: running(cluster, "app=inside", 1, ns="doomed"))
    cluster.ok("delete", "namespace", "doomed", "--wait=false")
    until("the namespace gone", lambda: absent(cluster, "namespace", "doomed", ns="default"))


def test_a_statefulset(cluster: ApiserverUnderTest) -> None:
    apply(cluster, workload("StatefulSet", "db", 2, serviceName="db"))
    up = until("db-0 and db-1 Running", lambda: running(cluster, "app=db", 2))
    assert sorted(p["metadata"]["name"] for p in up) == ["db-0", "db-1"]
    until("the StatefulSet's status", lambda: get(cluster, "statefulset", "db")["status"].get("readyReplicas") == 2)
    cluster.ok("scale", "statefulset/db", "--replicas=1")
    until("db-1 removed", lambda: running(cluster, "app=db", 1))


def test_a_daemonset_runs_on_every_node(cluster: ApiserverUnderTest) -> None:
    apply(cluster, workload("DaemonSet", "agent", None))
    up = until("an agent pod Running on each node", lambda: running(cluster, "app=agent", 2))
    assert {p["spec"]["nodeName"] for p in up} == {"node-1", "node-2"}
    until(
        "the DaemonSet's status",
        lambda: get(cluster, "daemonset", "agent")["status"].get("numberReady") == 2,
    )


def test_drain_respects_a_pod_disruption_budget(cluster: ApiserverUnderTest) -> None:
    apply(cluster, workload("Deployment", "kept", 2))
    until("2 kept pods Running", lambda: running(cluster, "app=kept", 2))
    apply(
        cluster,
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "kept"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "kept"}}},
        },
    )
    until(
        "the budget allows one disruption",
        lambda: get(cluster, "pdb", "kept")["status"].get("disruptionsAllowed") == 1,
    )
    try:
        cluster.ok(
            "drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s",
            timeout=170,
        )  # fmt: skip
        up = until("kept back to 2 Running, off node-1", lambda: running(cluster, "app=kept", 2))
        assert all(p["spec"]["nodeName"] == "node-2" for p in up), [p["spec"]["nodeName"] for p in up]
    finally:
        cluster.ok("uncordon", "node-1")


def test_the_cronjob_ran(cluster: ApiserverUnderTest) -> None:
    def owned_job() -> bool:
        jobs = get(cluster, "jobs")["items"]
        return any(
            r.get("kind") == "CronJob" and r.get("name") == "tick"
            for j in jobs
            for r in j["metadata"].get("ownerReferences", [])
            if j.get("status", {}).get("succeeded")
        )

    until("a Job of the CronJob succeeded", owned_job, wait=150)
    until(
        "the CronJob's lastSuccessfulTime", lambda: get(cluster, "cronjob", "tick")["status"].get("lastSuccessfulTime")
    )


def test_their_logs_carry_no_list_or_watch_errors(cluster: ApiserverUnderTest) -> None:
    """Their informers synced (the controller-manager logs "Caches are synced" per controller;
    the scheduler, quiet at -v 0, schedules only once its caches synced, which the scenario
    showed) and nothing failed to list or watch, was forbidden, or hit an unserved resource."""
    before = _aggregated_versions(cluster)
    time.sleep(5)  # a last resync round
    # two aggregation writers (ours in the apiserver, kube's in the controller-manager) agree
    assert _aggregated_versions(cluster) == before, "admin/edit/view rewritten while nothing changed"
    logs = {part: UpstreamComponent(cluster.data_dir, part).log_file.read_text(errors="replace") for part in PARTS}
    assert "successfully acquired lease kube-system/kube-scheduler" in logs["scheduler"]
    assert logs["controller-manager"].count("Caches are synced") >= 10, "the controller-manager's informers"
    for part, log in logs.items():
        bad = Counter(_message(line) for line in log.splitlines() if LOG_ERRORS.search(line))
        assert not bad, f"{part} logged errors:\n" + "\n".join(f"{n}x {m}" for m, n in bad.most_common(20))


def _aggregated_versions(cluster: ApiserverUnderTest) -> dict[str, str]:
    roles = get(cluster, "clusterroles", "admin", "edit", "view")["items"]
    return {r["metadata"]["name"]: r["metadata"]["resourceVersion"] for r in roles}


def _message(line: str) -> str:
    """A klog line without its header (time, pid, file:line), so repeats count together."""
    return re.sub(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+\] ", "", line)[:400]
