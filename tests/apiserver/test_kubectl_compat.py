"""kubectl 1.31, 1.32 and 1.33 against a real apiserver over the raftkube store: what each
command PRINTS, not only its exit code.

One apiserver for the module; every test runs once per kubectl version, on objects named for
that version so the runs never see each other.  The test plays the parts no component plays yet
(the kubelet confirming a pod's deletion, the namespace controller finalizing a namespace, a
node reporting Ready) through the API, as those components will.  The storage-agnostic subset
(get, apply, delete, watch) runs over etcd too in test_kubectl_backends.py.
"""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from apiserver.version import version_info
from tests.apiserver.kubectl_support import (
    MINORS,
    Kubectl,
    configmap,
    deployment,
    finish,
    json_of,
    kubectl_running,
    pod,
    rows,
    write,
)
from tests.apiserver.support import ApiserverUnderTest

WAIT = ("wait", "--for=delete", "--timeout=30s", "-v=6")  # -v=6 logs the watch request: see LineReader.watching


@pytest.fixture(scope="module")
def server(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    return raftkube_apiserver


@pytest.fixture(scope="module")
def api(server: ApiserverUnderTest) -> Any:
    with server.http() as client:
        yield client


@pytest.fixture(params=MINORS, ids=lambda m: f"kubectl-1.{m}")
def minor(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def k(server: ApiserverUnderTest, minor: int, tmp_path: Path) -> Kubectl:
    return Kubectl(server, minor, tmp_path)


# -- discovery-level commands -----------------------------------------------------------------


def test_version_names_client_and_server(k: Kubectl) -> None:
    proc = k.server.kubectl("version", minor=k.minor)
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"^Client Version: v1\.{k.minor}\.\d+$", proc.stdout, re.M), proc.stdout
    assert f"Server Version: {version_info()['gitVersion']}\n" in proc.stdout
    skew_warning = "exceeds the supported minor version skew of +/-1"
    assert (skew_warning in proc.stderr) == (k.minor == 31), proc.stderr  # 1.31 is two minors behind
    info = json.loads(k("version", "-o", "json"))
    assert info["serverVersion"]["major"] == "1" and info["serverVersion"]["minor"] == "33"


def test_kubectl_speaks_http2_to_the_apiserver(k: Kubectl, api: httpx.Client) -> None:
    """Go's client offers h2 and takes it (GODEBUG=http2debug=1 logs its frames): a LIST, a
    create with a body and a watch that sees it all run over HTTP/2, as with kube-apiserver."""
    name = f"h2-{k.minor}"
    env = {"GODEBUG": "http2debug=1"}
    proc = k.server.kubectl("get", "namespaces", "-o", "name", minor=k.minor, env=env)
    assert proc.returncode == 0 and "namespace/default" in proc.stdout, proc.stderr[-2000:]
    assert "http2: Transport received HEADERS" in proc.stderr, proc.stderr[-2000:]
    proc = k.server.kubectl("create", "-f", k.file(configmap(name, a="1")), minor=k.minor, env=env)
    assert proc.returncode == 0 and '":method" = "POST"' in proc.stderr, proc.stderr[-2000:]
    proc = k.server.kubectl(
        "get", "configmap", name, "--watch", "--request-timeout=3s", "-o", "name", minor=k.minor, env=env
    )
    assert f"configmap/{name}" in proc.stdout, proc.stderr[-2000:]
    assert "watch=true" in proc.stderr and "http2: Transport received DATA" in proc.stderr, proc.stderr[-2000:]
    api.delete(f"/api/v1/namespaces/default/configmaps/{name}")


def test_api_resources_lists_every_kind_with_its_short_names(k: Kubectl) -> None:
    table = rows(k("api-resources"))
    assert table[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    # by name and group-version: metrics.k8s.io serves `nodes` and `pods` too, as kube's does
    by_name = {(r[0], r[-3]): r for r in table[1:]}
    assert by_name["pods", "v1"] == ["pods", "po", "v1", "true", "Pod"]
    assert by_name["deployments", "apps/v1"] == ["deployments", "deploy", "apps/v1", "true", "Deployment"]
    assert by_name["nodes", "v1"] == ["nodes", "no", "v1", "false", "Node"]
    assert by_name["secrets", "v1"] == ["secrets", "v1", "true", "Secret"]  # no short name: the column is blank
    assert by_name["pods", "metrics.k8s.io/v1beta1"] == ["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"]
    cluster_scoped = k("api-resources", "--namespaced=false", "-o", "name").split()
    assert {"namespaces", "nodes", "clusterroles.rbac.authorization.k8s.io"} <= set(cluster_scoped)
    assert "pods" not in cluster_scoped


def test_cluster_info_prints_the_control_plane_url(k: Kubectl) -> None:
    out = k("cluster-info")
    # no kube-system service is labelled kubernetes.io/cluster-service=true: only the control plane line
    assert (
        re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines()[0] == f"Kubernetes control plane is running at {k.server.url}"
    )


def test_explain_reads_the_openapi_schemas(k: Kubectl) -> None:
    out = k("explain", "pods.spec")
    assert re.search(r"^KIND:\s+Pod$", out, re.M) and re.search(r"^VERSION:\s+v1$", out, re.M)
    assert "FIELD: spec <PodSpec>" in out
    assert re.search(r"^  containers\t<\[\]Container> -required-$", out, re.M), out
    assert "Specification of the desired behavior of the pod." in out
    leaf = k("explain", "pods.spec.containers.image")
    assert "FIELD: image <string>" in leaf and "Container image name." in leaf


# -- get ------------------------------------------------------------------------------------


def test_get_in_every_output_format(k: Kubectl, api: httpx.Client) -> None:
    name = f"out-{k.minor}"
    assert k("create", "-f", k.file(pod(name, {"app": name, "tier": "web"}))) == f"pod/{name} created\n"
    table = rows(k("get", "pods", name))
    assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1][:4] == [name, "0/1", "Pending", "0"] and re.fullmatch(r"\d+s", table[1][4])
    wide = rows(k("get", "pod", name, "-o", "wide"))
    assert wide[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert wide[1][5:] == ["<none>"] * 4
    as_yaml = yaml.safe_load(k("get", "pod", name, "-o", "yaml"))
    assert as_yaml["kind"] == "Pod" and as_yaml["metadata"]["labels"] == {"app": name, "tier": "web"}
    assert as_yaml["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"  # defaulted by the server
    assert as_yaml["metadata"]["resourceVersion"].isdigit() and len(as_yaml["metadata"]["uid"]) == 36
    listed = json_of(k, "pods", "-l", f"app={name}")
    assert listed["kind"] == "List" and [i["metadata"]["name"] for i in listed["items"]] == [name]
    assert k("get", "pods", "-l", f"app={name}", "-o", "name") == f"pod/{name}\n"
    assert k("get", "pod", name, "-o", "jsonpath={.metadata.labels.tier} {.status.phase}") == "web Pending"
    got = k("get", "pods", "-l", f"app={name}", "-o", "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}")
    assert got == f"{name}\n"
    missing = k.fails("get", "pod", f"nope-{k.minor}")
    assert missing.strip() == f'Error from server (NotFound): pods "nope-{k.minor}" not found'


def test_get_across_namespaces_with_selectors_sorting_and_labels(k: Kubectl) -> None:
    ns = f"sel-{k.minor}"
    k("create", "-f", k.file({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    for name, tier in (("c", "back"), ("a", "front"), ("b", "front")):
        k("create", "-n", ns, "-f", k.file(configmap(f"{name}-{k.minor}", {"tier": tier, "set": ns}, k="v")))
    everywhere = rows(k("get", "configmaps", "-A", "-l", f"set={ns}"))
    assert everywhere[0] == ["NAMESPACE", "NAME", "DATA", "AGE"]
    assert [r[:3] for r in everywhere[1:]] == [[ns, f"{n}-{k.minor}", "1"] for n in "abc"]
    front = rows(k("get", "cm", "-n", ns, "-l", "tier=front,set", "--show-labels"))
    assert front[0] == ["NAME", "DATA", "AGE", "LABELS"]
    assert [(r[0], r[3]) for r in front[1:]] == [(f"{n}-{k.minor}", f"set={ns},tier=front") for n in "ab"]
    assert [r[0] for r in rows(k("get", "cm", "-n", ns, "-l", "tier notin (front)"))[1:]] == [f"c-{k.minor}"]
    by_field = rows(k("get", "cm", "-A", "--field-selector", f"metadata.name=b-{k.minor},metadata.namespace={ns}"))
    assert [r[:2] for r in by_field[1:]] == [[ns, f"b-{k.minor}"]]
    nothing = k.server.kubectl("get", "cm", "-n", ns, "--field-selector", "metadata.name=zzz", minor=k.minor)
    assert (
        nothing.returncode == 0
        and nothing.stdout == ""
        and nothing.stderr == f"No resources found in {ns} namespace.\n"
    )
    bad = k.fails("get", "cm", "-n", ns, "--field-selector", "data.k=v")
    assert "BadRequest" in bad and "data.k" in bad
    by_tier = [r[0] for r in rows(k("get", "cm", "-n", ns, "-l", f"set={ns}", "--sort-by=.metadata.labels.tier"))[1:]]
    assert by_tier[0] == f"c-{k.minor}" and sorted(by_tier[1:]) == [f"a-{k.minor}", f"b-{k.minor}"]  # back < front
    by_name = k("get", "cm", "-n", ns, "-l", f"set={ns}", "--sort-by=.metadata.name", "-o", "name")
    assert by_name.split() == [f"configmap/{n}-{k.minor}" for n in "abc"]


def test_get_watch_prints_each_change_as_a_row(k: Kubectl, api: httpx.Client) -> None:
    label = f"watch-{k.minor}"
    k("create", "-f", k.file(configmap(f"w0-{k.minor}", {"w": label}, a="1")))
    with kubectl_running(k.server, "get", "configmaps", "-w", "-l", f"w={label}", minor=k.minor) as watch:
        assert rows(watch.next_line())[0] == ["NAME", "DATA", "AGE"]
        assert rows(watch.next_line())[0][:2] == [f"w0-{k.minor}", "1"]
        r = api.post(
            "/api/v1/namespaces/default/configmaps", json=configmap(f"w1-{k.minor}", {"w": label}, a="1", b="2")
        )
        assert r.status_code == 201, r.text
        assert rows(watch.next_line())[0][:2] == [f"w1-{k.minor}", "2"]
        k("label", "cm", f"w0-{k.minor}", "seen=yes")
        assert rows(watch.next_line())[0][:2] == [f"w0-{k.minor}", "1"]
        k("delete", "cm", f"w1-{k.minor}")
        assert rows(watch.next_line())[0][:2] == [f"w1-{k.minor}", "2"]
        assert watch.proc.poll() is None  # the watch stays open: kubectl sends no timeoutSeconds


# -- create / apply / diff / delete / replace -----------------------------------------------


def test_create_from_a_file_and_again(k: Kubectl) -> None:
    path = k.file(configmap(f"made-{k.minor}", a="1"))
    assert k("create", "-f", path) == f"configmap/made-{k.minor} created\n"
    again = k.fails("create", "-f", path)
    assert again.strip() == (
        f'Error from server (AlreadyExists): error when creating "{path}": configmaps "made-{k.minor}" already exists'
    )
    bad = configmap(f"bad-{k.minor}", a="1")
    bad["dta"] = {}
    unknown = k.fails("create", "-f", k.file(bad))
    assert 'unknown field "dta"' in unknown and "BadRequest" in unknown


def test_client_side_apply_first_unchanged_changed_and_diff(k: Kubectl) -> None:
    name = f"app-{k.minor}"
    path = k.file(deployment(name, replicas=2))
    assert k("apply", "-f", path) == f"deployment.apps/{name} created\n"
    assert k("apply", "-f", path) == f"deployment.apps/{name} unchanged\n"
    same = k.server.kubectl("diff", "-f", path, minor=k.minor)
    assert (same.returncode, same.stdout, same.stderr) == (0, "", "")
    path = k.file(deployment(name, replicas=3, image="nginx:1.28"))
    changed = k.server.kubectl("diff", "-f", path, minor=k.minor)
    assert changed.returncode == 1, changed.stderr
    assert f"apps.v1.Deployment.default.{name}" in changed.stdout.splitlines()[0]
    assert "-  replicas: 2\n+  replicas: 3\n" in changed.stdout
    assert "-      - image: nginx:1.27\n+      - image: nginx:1.28\n" in changed.stdout
    assert "-  generation: 1\n+  generation: 2\n" in changed.stdout
    assert json_of(k, "deployment", name)["spec"]["replicas"] == 2  # diff is a dry run
    assert k("apply", "-f", path) == f"deployment.apps/{name} configured\n"
    live = json_of(k, "deployment", name)
    assert live["spec"]["replicas"] == 3 and live["metadata"]["generation"] == 2
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.28"
    last = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["replicas"] == 3
    after = k.server.kubectl("diff", "-f", path, minor=k.minor)
    assert (after.returncode, after.stdout) == (0, "")


def test_server_side_apply_conflict_and_force(k: Kubectl) -> None:
    name = f"ssa-{k.minor}"
    path = k.file(configmap(name, a="1", b="1"))
    assert k("apply", "--server-side", "-f", path) == f"configmap/{name} serverside-applied\n"
    assert k("apply", "--server-side", "-f", path) == f"configmap/{name} serverside-applied\n"
    assert k("patch", "cm", name, "--type", "merge", "-p", '{"data":{"a":"2"}}') == f"configmap/{name} patched\n"
    path = k.file(configmap(name, a="3", b="1"))
    conflict = k.fails("apply", "--server-side", "-f", path)
    assert conflict.startswith('error: Apply failed with 1 conflict: conflict with "kubectl-patch"'), conflict
    assert ".data.a" in conflict and "--force-conflicts" in conflict
    assert json_of(k, "cm", name)["data"] == {"a": "2", "b": "1"}
    forced = k("apply", "--server-side", "--force-conflicts", "-f", path)
    assert forced == f"configmap/{name} serverside-applied\n"
    live = json_of(k, "cm", name, "--show-managed-fields")
    assert live["data"] == {"a": "3", "b": "1"}
    owners = {m["manager"]: m["fieldsV1"] for m in live["metadata"]["managedFields"]}
    assert "f:a" in owners["kubectl"]["f:data"] and "f:a" not in owners.get("kubectl-patch", {}).get("f:data", {})
    # dropping a field from the manifest removes it (the manager owned it alone)
    path = k.file(configmap(name, a="3"))
    k("apply", "--server-side", "-f", path)
    assert json_of(k, "cm", name)["data"] == {"a": "3"}


def test_delete_by_name_file_and_label(k: Kubectl) -> None:
    sel = f"del-{k.minor}"
    paths = [k.file(configmap(f"{sel}-{i}", {"batch": sel}, a="1")) for i in range(4)]
    for p in paths:
        k("create", "-f", p)
    assert k("delete", "configmap", f"{sel}-0") == f'configmap "{sel}-0" deleted\n'
    assert k("delete", "-f", paths[1]) == f'configmap "{sel}-1" deleted\n'
    out = k("delete", "cm", "-l", f"batch={sel}")
    assert out.splitlines() == [f'configmap "{sel}-2" deleted', f'configmap "{sel}-3" deleted']
    gone = k.server.kubectl("get", "cm", "-l", f"batch={sel}", minor=k.minor)
    assert gone.stdout == "" and gone.stderr == "No resources found in default namespace.\n"
    again = k.fails("delete", "cm", f"{sel}-0")
    assert again.strip() == f'Error from server (NotFound): configmaps "{sel}-0" not found'
    assert k("delete", "cm", f"{sel}-0", "--ignore-not-found") == ""


def test_replace_and_a_stale_replace(k: Kubectl, tmp_path: Path) -> None:
    name = f"rep-{k.minor}"
    k("create", "-f", k.file(configmap(name, a="1")))
    live = json_of(k, "cm", name)
    live["data"]["a"] = "2"
    path = write(tmp_path, "replace.json", live)
    assert k("replace", "-f", path) == f"configmap/{name} replaced\n"
    assert json_of(k, "cm", name)["data"] == {"a": "2"}
    stale = k.fails("replace", "-f", path)  # still carries the old resourceVersion
    assert stale.strip() == (
        f'Error from server (Conflict): error when replacing "{path}": Operation cannot be fulfilled on '
        f'configmaps "{name}": the object has been modified; please apply your changes to the latest version '
        "and try again"
    )


# -- scale / label / annotate / patch / edit -----------------------------------------------


def test_scale(k: Kubectl) -> None:
    name = f"sc-{k.minor}"
    k("apply", "-f", k.file(deployment(name, replicas=1)))
    assert k("scale", "deployment", name, "--replicas=4") == f"deployment.apps/{name} scaled\n"
    assert k("get", "deploy", name, "-o", "jsonpath={.spec.replicas}") == "4"
    ready = rows(k("get", "deploy", name))
    assert ready[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"] and ready[1][:4] == [name, "0/4", "0", "0"]
    # --current-replicas: GET /scale, then PUT /scale with that precondition (no Content-Type)
    assert k("scale", "deployment", name, "--current-replicas=4", "--replicas=2") == f"deployment.apps/{name} scaled\n"
    wrong = k.fails("scale", "deployment", name, "--current-replicas=9", "--replicas=1")
    assert "Expected replicas to be 9, was 2" in wrong
    assert k("get", "deploy", name, "-o", "jsonpath={.spec.replicas}") == "2"


def test_label_and_annotate(k: Kubectl) -> None:
    name = f"lab-{k.minor}"
    k("create", "-f", k.file(configmap(name, a="1")))
    assert k("label", "cm", name, "tier=web") == f"configmap/{name} labeled\n"
    refused = k.fails("label", "cm", name, "tier=db")
    assert refused.strip() == "error: 'tier' already has a value (web), and --overwrite is false"
    assert k("label", "cm", name, "tier=db", "--overwrite") == f"configmap/{name} labeled\n"
    assert k("annotate", "cm", name, "note=hello world") == f"configmap/{name} annotated\n"
    meta = json_of(k, "cm", name)["metadata"]
    assert meta["labels"] == {"tier": "db"} and meta["annotations"] == {"note": "hello world"}
    assert k("label", "cm", name, "tier-") == f"configmap/{name} unlabeled\n"
    assert k("annotate", "cm", name, "note-") == f"configmap/{name} annotated\n"
    meta = json_of(k, "cm", name)["metadata"]
    assert "labels" not in meta and "annotations" not in meta


def test_patch_strategic_merge_and_json(k: Kubectl) -> None:
    name = f"pat-{k.minor}"
    k("apply", "-f", k.file(deployment(name)))
    # strategic (the default): containers merge by name, so the sidecar joins the web container
    sidecar = '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}'
    assert k("patch", "deployment", name, "-p", sidecar) == f"deployment.apps/{name} patched\n"
    containers = json_of(k, "deploy", name)["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("side", "busybox"), ("web", "nginx:1.27")]
    # merge: lists are replaced whole
    assert k("patch", "deployment", name, "--type", "merge", "-p", sidecar) == f"deployment.apps/{name} patched\n"
    containers = json_of(k, "deploy", name)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["side"]
    ops = '[{"op":"replace","path":"/spec/replicas","value":5},{"op":"add","path":"/metadata/labels/x","value":"y"}]'
    assert k("patch", "deployment", name, "--type", "json", "-p", ops) == f"deployment.apps/{name} patched\n"
    live = json_of(k, "deploy", name)
    assert live["spec"]["replicas"] == 5 and live["metadata"]["labels"]["x"] == "y"
    noop = k("patch", "deployment", name, "--type", "merge", "-p", '{"spec":{"replicas":5}}')
    assert noop == f"deployment.apps/{name} patched (no change)\n"
    failing = k.fails(
        "patch", "deployment", name, "--type", "json", "-p", '[{"op":"test","path":"/spec/replicas","value":1}]'
    )
    assert failing.strip() == (
        "The request is invalid: the patch cannot be applied: JSON patch operation 0 (test /spec/replicas): "
        "test failed: /spec/replicas is 5, not 1"
    )
    invalid = k.fails("patch", "deployment", name, "--type", "merge", "-p", '{"spec":{"replicas":-1}}')
    assert invalid.strip() == (
        f'The Deployment "{name}" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'
    )


def test_edit_through_kube_editor(k: Kubectl, tmp_path: Path) -> None:
    name = f"ed-{k.minor}"
    k("create", "-f", k.file(configmap(name, a="before")))
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nsed -i "s/before/after/" "$1"\n')
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    out = k("edit", "cm", name, env={"KUBE_EDITOR": str(editor)})
    assert out == f"configmap/{name} edited\n"
    assert json_of(k, "cm", name)["data"] == {"a": "after"}
    unchanged = k.server.kubectl("edit", "cm", name, minor=k.minor, env={"KUBE_EDITOR": "true"})
    assert unchanged.returncode == 0 and unchanged.stderr == "Edit cancelled, no changes made.\n"


# -- describe / nodes / wait / logs --------------------------------------------------------


def ready_node(api: httpx.Client, name: str) -> None:
    """Register a node and report it Ready through nodes/status, as its kubelet would."""
    r = api.post(
        "/api/v1/nodes",
        json={
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"node-role.kubernetes.io/worker": ""}},
        },
    )
    assert r.status_code == 201, r.text
    status = {
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
            "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Test OS", "kernelVersion": "6.1.0"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        }
    }
    r = api.patch(
        f"/api/v1/nodes/{name}/status?fieldManager=ready-node",
        content=json.dumps(status),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.status_code == 200, r.text


def test_cordon_shows_scheduling_disabled(k: Kubectl, api: httpx.Client) -> None:
    name = f"node-{k.minor}"
    ready_node(api, name)
    before = rows(k("get", "node", name))
    assert before[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [before[1][i] for i in (0, 1, 2, 4)] == [name, "Ready", "worker", "v1.33.0"]
    assert k("cordon", name) == f"node/{name} cordoned\n"
    assert k("cordon", name) == f"node/{name} already cordoned\n"
    entries = json_of(k, "node", name, "--show-managed-fields")["metadata"]["managedFields"]
    by_subresource = {(e["manager"], e.get("subresource", "")): e["fieldsV1"] for e in entries}
    assert "f:status" in by_subresource["ready-node", "status"]  # the kubelet's status write is its own entry
    # cordon sends no fieldManager: the manager is the user agent up to its "/" (this binary: kubectl.1.N)
    assert "f:unschedulable" in by_subresource[f"kubectl.1.{k.minor}", ""]["f:spec"]
    after = rows(k("get", "nodes", "--field-selector", f"metadata.name={name}", "-o", "wide"))
    assert after[1][:3] == [name, "Ready,SchedulingDisabled", "worker"]
    assert after[1][5:8] == ["10.0.0.7", "<none>", "Test OS"]
    assert (
        k("get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name").split().count(f"node/{name}")
        == 1
    )
    assert k("uncordon", name) == f"node/{name} uncordoned\n"
    assert rows(k("get", "node", name))[1][1] == "Ready"


def test_describe_pod_deployment_and_node(k: Kubectl, api: httpx.Client) -> None:
    name = f"desc-{k.minor}"
    node = f"dnode-{k.minor}"
    ready_node(api, node)
    k("create", "-f", k.file(pod(name, nodeName=node)))
    uid = json_of(k, "pod", name)["metadata"]["uid"]
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.1"},
        "involvedObject": {"kind": "Pod", "name": name, "namespace": "default", "uid": uid, "apiVersion": "v1"},
        "reason": "Pulled",
        "message": "Container image already present",
        "type": "Normal",
        "count": 1,
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    assert api.post("/api/v1/namespaces/default/events", json=event).status_code == 201
    described = k("describe", "pod", name)
    for line in (
        rf"Name:\s+{name}",
        r"Namespace:\s+default",
        rf"Node:\s+{node}/",
        r"Status:\s+Pending",
        r"Image:\s+nginx:1.27",
    ):
        assert re.search(rf"^\s*{line}", described, re.M), (line, described)
    assert re.search(r"Normal\s+Pulled\s+.*kubelet\s+Container image already present", described), described
    dep = f"ddep-{k.minor}"
    k("apply", "-f", k.file(deployment(dep, replicas=3)))
    d = k("describe", "deployment", dep)
    assert re.search(rf"^Name:\s+{dep}$", d, re.M) and re.search(rf"^Selector:\s+app={dep}$", d, re.M)
    assert re.search(r"^Replicas:\s+3 desired \| 0 updated \| 0 total \| 0 available \| 0 unavailable$", d, re.M), d
    assert re.search(r"^StrategyType:\s+RollingUpdate$", d, re.M)
    n = k("describe", "node", node)
    assert re.search(rf"^Name:\s+{node}$", n, re.M) and re.search(r"^Roles:\s+worker$", n, re.M)
    assert re.search(r"Ready\s+True\s+.*KubeletReady\s+kubelet is posting ready status", n), n
    assert re.search(rf"default\s+{name}\s+0 \(0%\)", n), n  # the pod bound to the node


def test_wait_for_delete_of_an_object_held_by_a_finalizer(k: Kubectl, api: httpx.Client) -> None:
    name = f"fin-{k.minor}"
    held = configmap(name, a="1")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    k("create", "-f", k.file(held))
    assert k("delete", "cm", name, "--wait=false") == f'configmap "{name}" deleted\n'
    assert json_of(k, "cm", name)["metadata"]["deletionTimestamp"]
    with kubectl_running(k.server, *WAIT, f"configmap/{name}", minor=k.minor) as wait:
        wait.watching()
        r = api.patch(
            f"/api/v1/namespaces/default/configmaps/{name}",
            content='[{"op":"remove","path":"/metadata/finalizers"}]',
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert r.status_code == 200, r.text
        rc, out, err = finish(wait)
    assert (rc, out) == (0, f"configmap/{name} condition met"), err
    assert api.get(f"/api/v1/namespaces/default/configmaps/{name}").status_code == 404


@pytest.mark.parametrize("confirm", ["force", "kubelet"])
def test_wait_for_delete_of_a_scheduled_pod(k: Kubectl, api: httpx.Client, confirm: str) -> None:
    node = f"wnode-{k.minor}-{confirm}"
    ready_node(api, node)
    name = f"gr-{k.minor}-{confirm}"
    k("create", "-f", k.file(pod(name, nodeName=node)))
    assert k("delete", "pod", name, "--wait=false") == f'pod "{name}" deleted\n'
    terminating = rows(k("get", "pod", name))
    assert terminating[1][:3] == [name, "0/1", "Terminating"]
    assert json_of(k, "pod", name)["metadata"]["deletionGracePeriodSeconds"] == 30
    with kubectl_running(k.server, *WAIT, f"pod/{name}", minor=k.minor) as wait:
        wait.watching()
        if confirm == "force":
            forced = k.server.kubectl("delete", "pod", name, "--grace-period=0", "--force", minor=k.minor)
            assert forced.stdout == f'pod "{name}" force deleted\n'
            assert "Immediate deletion does not wait for confirmation" in forced.stderr
        else:  # the kubelet, once the containers stopped
            r = api.request(
                "DELETE",
                f"/api/v1/namespaces/default/pods/{name}",
                json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )
            # a pod's DELETE answers with the pod as it was deleted (kube's pod storage does)
            assert r.status_code == 200 and r.json()["kind"] == "Pod", r.text
        rc, out, err = finish(wait)
    assert (rc, out) == (0, f"pod/{name} condition met"), err


def test_logs_of_a_pod_on_no_node_are_empty(k: Kubectl) -> None:
    """kube answers 204: nothing logged yet.  An unknown container is still refused."""
    name = f"log-{k.minor}"
    k("create", "-f", k.file(pod(name)))
    assert k("logs", name) == ""
    err = k.fails("logs", name, "-c", "nope")
    assert f"container nope is not valid for pod {name}" in err


def test_namespace_delete_stays_terminating_until_finalized(k: Kubectl, api: httpx.Client) -> None:
    """No namespace controller yet: `delete namespace` leaves it Terminating (kube's semantics);
    the test then does the controller's part: the /finalize that empties spec.finalizers removes
    it, as kube-apiserver's does (kube's namespace controller sends no DELETE after it)."""
    ns = f"gone-{k.minor}"
    k("create", "-f", k.file({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    assert k("get", "ns", ns, "--show-labels").splitlines()[1].split()[-1] == f"kubernetes.io/metadata.name={ns}"
    assert k("delete", "namespace", ns, "--wait=false") == f'namespace "{ns}" deleted\n'
    assert rows(k("get", "ns", ns))[1][:2] == [ns, "Terminating"]
    live = json_of(k, "ns", ns)
    assert live["spec"]["finalizers"] == ["kubernetes"] and live["metadata"]["deletionTimestamp"]
    with kubectl_running(k.server, *WAIT, f"namespace/{ns}", minor=k.minor) as wait:
        wait.watching()
        r = api.put(f"/api/v1/namespaces/{ns}/finalize", json={**live, "spec": {"finalizers": []}})
        assert r.status_code == 200 and r.json()["metadata"]["name"] == ns, r.text  # the object it deleted
        assert api.get(f"/api/v1/namespaces/{ns}").status_code == 404
        assert api.delete(f"/api/v1/namespaces/{ns}").status_code == 404
        rc, out, err = finish(wait)
    assert (rc, out) == (0, f"namespace/{ns} condition met"), err


# -- protobuf: kubectl 1.32+ `create <kind>` ------------------------------------------------
# (protobuf/test_protobuf_kubectl.py compares what each generator stores with what 1.31's JSON stores)


@pytest.mark.parametrize(
    ("kind", "args", "printed"),
    [
        ("deployment", ("--image=nginx:1.27",), "deployment.apps/{}"),
        ("namespace", (), "namespace/{}"),
        ("configmap", ("--from-literal=a=b",), "configmap/{}"),
    ],
)
def test_create_generators(k: Kubectl, kind: str, args: tuple[str, ...], printed: str) -> None:
    """1.31 sends JSON, 1.32 and 1.33 protobuf: every one creates and prints the same."""
    name = f"gen-{kind[:3]}-{k.minor}"
    assert k("create", kind, name, *args) == f"{printed.format(name)} created\n"
    assert k("get", kind, name, "-o", "name") == f"{printed.format(name)}\n"
