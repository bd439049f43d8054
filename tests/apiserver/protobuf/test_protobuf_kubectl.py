"""kubectl 1.32 and 1.33 send protobuf bodies (typed clients, no JSON fallback): each command
must store exactly what kubectl 1.31 (JSON bodies) stores for it.

For every `kubectl create <generator>` and `kubectl autoscale`, the test runs the same command
with 1.31, 1.32 and 1.33 (each in its own namespace, or under its own name when cluster
scoped), checks that 1.32+ really sent protobuf (`-v=8` logs the request's Content-Type),
then GETs the three objects as JSON and compares them, ignoring what differs between any two
creates (uid, resourceVersion, creationTimestamp, managedFields times, status).  Commands
whose kind were not served would fail `test_every_command_names_a_served_resource`.  kubectl
prints the created object's name from our answer, which is protobuf when kubectl asks for it
first, so the encoder is exercised by the same runs.  `kubectl drain` checks the DELETE
fallback's protobuf DeleteOptions and the Eviction body: a grace-0 delete that was not decoded
would leave the pod waiting for a kubelet and drain would time out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from apiserver.resources import catalog
from tests.apiserver.support import ApiserverUnderTest

PROTOBUF = "application/vnd.kubernetes.protobuf"
REFERENCE = 31  # sends JSON
PROTOBUF_MINORS = (32, 33)

Args = Callable[[str, str], list[str]]  # (name, namespace) -> kubectl arguments


@dataclass(frozen=True)
class Command:
    id: str
    group: str
    plural: str  # what the command creates
    args: Args
    namespaced: bool = True
    subresource: str = ""  # a subresource the command needs served (token)
    prepare: str = ""  # "deployment": a Deployment of the same name first; "serviceaccount": likewise


COMMANDS = (
    Command(
        "deployment",
        "apps",
        "deployments",
        lambda n, ns: ["create", "deployment", n, "--image=nginx:1.27", "--replicas=2", "--port=80", "-n", ns],
    ),
    Command("namespace", "", "namespaces", lambda n, ns: ["create", "namespace", n], namespaced=False),
    Command(
        "configmap",
        "",
        "configmaps",
        lambda n, ns: ["create", "configmap", n, "--from-literal=a=b", "--from-literal=c=d", "-n", ns],
    ),
    Command(
        "secret-generic",
        "",
        "secrets",
        lambda n, ns: ["create", "secret", "generic", n, "--from-literal=k=v", "--type=Opaque", "-n", ns],
    ),
    Command(
        "secret-docker-registry",
        "",
        "secrets",
        lambda n, ns: [
            *("create", "secret", "docker-registry", n, "--docker-server=registry.invalid"),
            *("--docker-username=u", "--docker-password=p", "-n", ns),
        ],
    ),
    Command(
        "service",
        "",
        "services",
        lambda n, ns: ["create", "service", "clusterip", n, "--clusterip=None", "--tcp=80:8080", "-n", ns],
    ),
    Command("serviceaccount", "", "serviceaccounts", lambda n, ns: ["create", "serviceaccount", n, "-n", ns]),
    Command(
        "job",
        "batch",
        "jobs",
        lambda n, ns: ["create", "job", n, "--image=busybox:1.36", "-n", ns, "--", "echo", "hi"],
    ),
    Command(
        "cronjob",
        "batch",
        "cronjobs",
        lambda n, ns: [
            *("create", "cronjob", n, "--image=busybox:1.36", "--schedule=*/5 * * * *", "-n", ns),
            *("--", "echo", "hi"),
        ],
    ),
    Command(
        "priorityclass",
        "scheduling.k8s.io",
        "priorityclasses",
        lambda n, ns: ["create", "priorityclass", n, "--value=1000", "--description=pb"],
        namespaced=False,
    ),
    Command(
        "quota",
        "",
        "resourcequotas",
        # (no cpu/memory: a quota on them is enforced now, and would refuse the drain tests' pods)
        lambda n, ns: ["create", "quota", n, "--hard=count/configmaps=100,secrets=50,pods=20", "-n", ns],
    ),
    Command(
        "role",
        "rbac.authorization.k8s.io",
        "roles",
        lambda n, ns: ["create", "role", n, "--verb=get,list", "--resource=pods,deployments.apps", "-n", ns],
    ),
    Command(
        "rolebinding",
        "rbac.authorization.k8s.io",
        "rolebindings",
        lambda n, ns: [
            *("create", "rolebinding", n, "--role=r", "--user=u", "--group=g"),
            *(f"--serviceaccount={ns}:sa", "-n", ns),
        ],
    ),
    Command(
        "clusterrole",
        "rbac.authorization.k8s.io",
        "clusterroles",
        lambda n, ns: ["create", "clusterrole", n, "--verb=get,list", "--resource=nodes"],
        namespaced=False,
    ),
    Command(
        "clusterrolebinding",
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        lambda n, ns: ["create", "clusterrolebinding", n, "--clusterrole=view", "--user=u"],
        namespaced=False,
    ),
    Command(
        "poddisruptionbudget",
        "policy",
        "poddisruptionbudgets",
        lambda n, ns: ["create", "poddisruptionbudget", n, "--selector=app=x", "--min-available=1", "-n", ns],
    ),
    Command(
        "ingress",
        "networking.k8s.io",
        "ingresses",
        lambda n, ns: ["create", "ingress", n, "--rule=foo.example/bar=svc:80", "-n", ns],
    ),
    Command(
        "autoscale",
        "autoscaling",
        "horizontalpodautoscalers",
        lambda n, ns: ["autoscale", "deployment", n, "--min=1", "--max=3", "--cpu-percent=50", "-n", ns],
        prepare="deployment",
    ),
    Command(
        "token",
        "",
        "serviceaccounts",
        lambda n, ns: ["create", "token", n, "-n", ns],
        subresource="token",
        prepare="serviceaccount",
    ),
)


def _served() -> dict[tuple[str, str], set[str]]:
    """(group, plural) -> subresources, for what this branch serves."""
    return {(r.group, r.plural): {s.name for s in r.subresources} for r in catalog()}


def _unserved(cmd: Command) -> str | None:
    served = _served()
    if (cmd.group, cmd.plural) not in served:
        return f"{cmd.plural}.{cmd.group}" if cmd.group else cmd.plural
    if cmd.subresource and cmd.subresource not in served[(cmd.group, cmd.plural)]:
        return f"{cmd.plural}/{cmd.subresource}"
    return None


def test_every_command_names_a_served_resource() -> None:
    """Each command of the issue's list runs below; none is left out for want of its resource."""
    assert [(c.id, _unserved(c)) for c in COMMANDS if _unserved(c)] == []


def _params() -> list[Any]:
    return [pytest.param(cmd, id=cmd.id) for cmd in COMMANDS]


@pytest.fixture(scope="module")
def server(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    return raftkube_apiserver


@pytest.fixture(scope="module")
def api(server: ApiserverUnderTest) -> Any:
    with server.http() as client:
        for minor in (REFERENCE, *PROTOBUF_MINORS):
            r = client.post("/api/v1/namespaces", json={"metadata": {"name": f"pb{minor}"}})
            assert r.status_code == 201, r.text
        yield client


def _path(cmd: Command, name: str, ns: str) -> str:
    res = next(r for r in catalog() if (r.group, r.plural) == (cmd.group, cmd.plural))
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    return f"{base}/namespaces/{ns}/{cmd.plural}/{name}" if cmd.namespaced else f"{base}/{cmd.plural}/{name}"


def _normalized(obj: dict[str, Any], name: str, ns: str, minor: int) -> Any:
    meta = obj["metadata"]
    text = json.dumps(obj, sort_keys=True)
    for value, placeholder in ((meta.get("uid", "-"), "UID"), (name, "NAME"), (ns, "NS")):
        text = text.replace(value, placeholder)
    out = json.loads(text)
    for key in ("uid", "resourceVersion", "creationTimestamp"):
        out["metadata"].pop(key, None)
    for entry in out["metadata"].get("managedFields") or []:
        entry.pop("time", None)
        if entry.get("manager") == "kubectl-autoscale":
            # 1.33 posts autoscaling/v2 where 1.31 posted v1: the manager's version and field
            # set name the version it wrote; the object itself is the same
            entry.pop("apiVersion", None)
            entry.pop("fieldsV1", None)
    out.pop("status", None)  # controllers may have written it since
    return out


def _sent_protobuf(stderr: str) -> bool:
    """kubectl -v=8 logs each request's headers: did a write carry a protobuf body?"""
    return bool(re.search(rf"Content-Type: {re.escape(PROTOBUF)}", stderr))


def _answered_protobuf(stderr: str) -> bool:
    """-v=8 dumps each response body in hex (both 1.32's and 1.33's log formats): did one
    start with the protobuf magic `k8s\\x00`?"""
    return bool(re.search(r'"Response Body" body=<\s*00000000  6b 38 73 00', stderr))


def _run(server: ApiserverUnderTest, api: httpx.Client, cmd: Command, minor: int) -> tuple[str, str, str]:
    ns = f"pb{minor}"
    name = f"pb-{cmd.id}-{minor}"
    if cmd.prepare == "deployment":
        labels = {"app": name}
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
            },
        }
        assert api.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=body).status_code == 201
    if cmd.prepare == "serviceaccount":
        r = api.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": name}})
        assert r.status_code == 201, r.text
    proc = server.kubectl("-v=8", *cmd.args(name, ns), minor=minor)
    assert proc.returncode == 0, f"kubectl 1.{minor} {cmd.id}: {proc.stderr[-3000:]}"
    return name, ns, proc.stdout + "\n" + proc.stderr


@pytest.mark.parametrize("cmd", _params())
def test_protobuf_create_stores_what_json_stores(server: ApiserverUnderTest, api: httpx.Client, cmd: Command) -> None:
    name, ns, _ = _run(server, api, cmd, REFERENCE)
    got = api.get(_path(cmd, name, ns))
    assert got.status_code == 200, got.text
    want = _normalized(got.json(), name, ns, REFERENCE)
    for minor in PROTOBUF_MINORS:
        name, ns, output = _run(server, api, cmd, minor)
        assert _sent_protobuf(output), f"kubectl 1.{minor} {cmd.id} sent no protobuf body:\n{output[-3000:]}"
        assert _answered_protobuf(output), f"kubectl 1.{minor} {cmd.id} got no protobuf answer:\n{output[-3000:]}"
        got = api.get(_path(cmd, name, ns), headers={"Accept": "application/json"})
        assert got.status_code == 200, got.text
        assert _normalized(got.json(), name, ns, minor) == want, f"kubectl 1.{minor} {cmd.id}"


def _node_with_a_pod(api: httpx.Client, node: str, ns: str) -> str:
    r = api.post("/api/v1/nodes", json={"metadata": {"name": node}})
    assert r.status_code == 201, r.text
    pod = {
        "metadata": {"name": f"{node}-pod"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
    }
    r = api.post(f"/api/v1/namespaces/{ns}/pods", json=pod)
    assert r.status_code == 201, r.text
    return f"{node}-pod"


@pytest.mark.parametrize("minor", (REFERENCE, *PROTOBUF_MINORS), ids=lambda m: f"kubectl-1.{m}")
@pytest.mark.parametrize("eviction", [True, False], ids=["eviction", "delete-fallback"])
def test_drain_grace_zero_reaches_the_server(
    server: ApiserverUnderTest, api: httpx.Client, minor: int, eviction: bool
) -> None:
    """Evictions (POST Eviction) and `--disable-eviction` (DELETE with DeleteOptions): grace 0
    deletes a pod at once, so drain finishes only if the body's gracePeriodSeconds arrived."""
    ns = f"pb{minor}"
    node = f"pbnode-{minor}-{'ev' if eviction else 'del'}"
    pod = _node_with_a_pod(api, node, ns)
    args = ["drain", node, "--force", "--grace-period=0", "--timeout=30s", "-v=8"]
    if not eviction:
        args.append("--disable-eviction")
    proc = server.kubectl(*args, minor=minor, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"node/{node} drained" in proc.stdout, proc.stdout
    assert api.get(f"/api/v1/namespaces/{ns}/pods/{pod}").status_code == 404
    if minor != REFERENCE:
        assert _sent_protobuf(proc.stderr), proc.stderr[-3000:]


@pytest.mark.parametrize("minor", PROTOBUF_MINORS, ids=lambda m: f"kubectl-1.{m}")
def test_an_error_answered_in_protobuf_prints_as_kube_words_it(
    server: ApiserverUnderTest, api: httpx.Client, minor: int
) -> None:
    name = f"pb-twice-{minor}"
    server.ok("create", "configmap", name, "-n", f"pb{minor}", minor=minor)
    proc = server.kubectl("-v=8", "create", "configmap", name, "-n", f"pb{minor}", minor=minor)
    assert proc.returncode == 1
    assert _answered_protobuf(proc.stderr), proc.stderr[-3000:]
    assert proc.stderr.rstrip().endswith(f'error: failed to create configmap: configmaps "{name}" already exists')
