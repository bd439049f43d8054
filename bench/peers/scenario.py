"""The mixed-control-plane scenario (issue 24, section 4), run with kubectl against any cluster:

    python -m bench.peers.scenario --kubeconfig .raftkube/kubeconfig [--kubectl kubectl.1.33]

A Deployment created, scaled and rolled, a Job, a CronJob, garbage collection of a deleted
Deployment's ReplicaSets and pods, a PodDisruptionBudget honoured by `kubectl drain`, and the
deletion of the namespace that held it all.  Each step is bounded in time and prints one
line: ok with its seconds, or FAILED with kubectl's error or the state it waited on.  Run on
`raftkube up` and on `raftkube up --apiserver upstream`, a step that passes on one and not
the other names a bug on our side.  Exit 1 when a step failed.  Needs two Ready nodes (drain).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

NS = "scenario"
PAUSE = "registry.k8s.io/pause:3.10"
PAUSE_OLD = "registry.k8s.io/pause:3.9"


class StepFailed(Exception):
    pass


class Kubectl:
    def __init__(self, binary: str, kubeconfig: str) -> None:
        self.argv = [binary, "--kubeconfig", kubeconfig]

    def __call__(self, *args: str, timeout: float = 120.0) -> str:
        try:
            p = subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise StepFailed(f"kubectl {' '.join(args)}: no answer within {timeout:.0f}s") from e
        if p.returncode != 0:
            raise StepFailed(f"kubectl {' '.join(args)}: {p.stderr.strip()[:600]}")
        return p.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))


def wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    """Poll `check` (once a second) until it returns True; StepFailed with the last thing it
    returned (the state it saw) when `timeout` runs out."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last is True:
            return last
        time.sleep(1.0)
    raise StepFailed(f"{what}: not within {timeout:.0f}s (last seen: {str(last)[:400]})")


def _ready(k: Kubectl, name: str, replicas: int) -> Callable[[], Any]:
    def check() -> Any:
        d = k.json("-n", NS, "get", "deployment", name)
        s = d.get("status", {})
        done = (
            s.get("readyReplicas") == replicas
            and s.get("updatedReplicas") == replicas
            and s.get("replicas") == replicas
            and s.get("observedGeneration", 0) >= d["metadata"]["generation"]
        )
        return True if done else (s or "no status")

    return check


def steps(k: Kubectl) -> list[tuple[str, Callable[[], None]]]:
    def deployment() -> None:
        k("create", "namespace", NS)
        wait("the default service account", lambda: bool(k("-n", NS, "get", "sa", "-o", "name").split()) or "none", 30)
        k("-n", NS, "create", "deployment", "web", f"--image={PAUSE_OLD}", "--replicas=2")
        wait("2 ready replicas", _ready(k, "web", 2), 120)

    def scale() -> None:
        k("-n", NS, "scale", "deployment", "web", "--replicas=4")
        wait("4 ready replicas", _ready(k, "web", 4), 120)

    def roll() -> None:
        k("-n", NS, "set", "image", "deployment/web", f"pause={PAUSE}")
        k("-n", NS, "rollout", "status", "deployment/web", "--timeout=150s", timeout=180)
        wait("4 ready replicas of the new image", _ready(k, "web", 4), 60)
        rs = [r for r in k.json("-n", NS, "get", "rs")["items"] if r["spec"].get("replicas")]
        images = {c["image"] for r in rs for c in r["spec"]["template"]["spec"]["containers"]}
        if images != {PAUSE}:
            raise StepFailed(f"ReplicaSets with replicas run {images}")

    def job() -> None:
        k("-n", NS, "create", "job", "once", "--image=busybox", "--", "sh", "-c", "exit 0")
        k("-n", NS, "wait", "--for=condition=complete", "job/once", "--timeout=120s", timeout=150)

    def cronjob() -> None:
        k("-n", NS, "create", "cronjob", "tick", "--image=busybox", "--schedule=* * * * *", "--", "true")

        def completed() -> Any:
            jobs = k.json("-n", NS, "get", "jobs")["items"]
            mine = [j for j in jobs if any(o.get("name") == "tick" for o in j["metadata"].get("ownerReferences", []))]
            done = [j for j in mine if j.get("status", {}).get("succeeded")]
            return True if done else [j.get("status") for j in mine] or "no job yet"

        wait("a completed job of the cronjob", completed, 150)
        k("-n", NS, "delete", "cronjob", "tick", "--wait=true")

    def garbage_collection() -> None:
        k("-n", NS, "delete", "deployment", "web", "--cascade=background")

        def gone() -> Any:
            left = k("-n", NS, "get", "rs,pods", "-l", "app=web", "-o", "name").split()
            return left or True

        wait("the deployment's ReplicaSets and pods collected", gone, 120)

    def drain() -> None:
        nodes = [n["metadata"]["name"] for n in k.json("get", "nodes")["items"]]
        if len(nodes) < 2:
            raise StepFailed(f"drain needs two nodes, the cluster has {nodes}")
        k("-n", NS, "create", "deployment", "guarded", f"--image={PAUSE}", "--replicas=2")
        wait("2 ready replicas", _ready(k, "guarded", 2), 120)
        k("-n", NS, "create", "pdb", "guarded", "--selector=app=guarded", "--min-available=1")

        def budget() -> Any:
            s = k.json("-n", NS, "get", "pdb", "guarded").get("status", {})
            return True if s.get("disruptionsAllowed") == 1 else s or "no status"

        wait("the budget allows one disruption", budget, 60)
        pods = k.json("-n", NS, "get", "pods", "-l", "app=guarded")["items"]
        node = pods[0]["spec"]["nodeName"]
        try:
            k("drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s", timeout=180)
            wait("2 ready replicas after the drain", _ready(k, "guarded", 2), 120)
            on = [p["spec"].get("nodeName") for p in k.json("-n", NS, "get", "pods", "-l", "app=guarded")["items"]]
            if node in on:
                raise StepFailed(f"a pod is still on the drained node {node}: {on}")
        finally:
            k("uncordon", node)

    def namespace_deletion() -> None:
        k("delete", "namespace", NS, "--wait=false")

        def gone() -> Any:
            p = subprocess.run(
                [*k.argv, "get", "namespace", NS, "-o", "json"], capture_output=True, text=True, check=False
            )
            if p.returncode != 0 and "NotFound" in p.stderr:
                return True
            return json.loads(p.stdout).get("status") if p.returncode == 0 else p.stderr

        wait("the namespace gone", gone, 150)

    return [
        ("deployment created", deployment),
        ("deployment scaled 2 -> 4", scale),
        ("deployment rolled to a new image", roll),
        ("job completes", job),
        ("cronjob runs a job", cronjob),
        ("garbage collection (background)", garbage_collection),
        ("pdb + kubectl drain", drain),
        ("namespace deletion", namespace_deletion),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--kubectl", default="/usr/lib/google-cloud-sdk/bin/kubectl.1.33")
    args = p.parse_args(argv)
    k = Kubectl(args.kubectl, args.kubeconfig)
    failed = 0
    for name, step in steps(k):
        t0 = time.monotonic()
        try:
            step()
            print(f"ok      {name} ({time.monotonic() - t0:.1f}s)", flush=True)
        except StepFailed as e:
            failed += 1
            print(f"FAILED  {name} ({time.monotonic() - t0:.1f}s): {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
