"""RBAC as kubectl users meet it, against a real cluster (`raftkube up`): `kubectl auth can-i`
(with --list and --as), `kubectl auth whoami`, the Forbidden message kubectl prints, and an
aggregated role extended while the cluster runs."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.apiserver.support import KUBECTL_MINORS, ApiserverUnderTest, kubectl_binary
from tests.support.cli import raftkube

NS = "auth-web"
VIEW_BINDING = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: ann-view, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: ann}}]
"""


@pytest.fixture(scope="module")
def cluster(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    raftkube_apiserver.ok("create", "namespace", NS, minor=31)
    raftkube_apiserver.ok("create", "namespace", "auth-other", minor=31)
    raftkube_apiserver.ok("apply", "-f", "-", stdin=VIEW_BINDING)
    return raftkube_apiserver


@pytest.mark.parametrize("minor", KUBECTL_MINORS)  # 1.32+ post the reviews as protobuf
def test_can_i_yes_and_no(cluster: ApiserverUnderTest, minor: int) -> None:
    yes = cluster.kubectl("auth", "can-i", "list", "pods", "-n", NS, "--as", "ann", minor=minor)
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes"), yes.stderr
    no = cluster.kubectl("auth", "can-i", "list", "pods", "-n", "auth-other", "--as", "ann", minor=minor)
    assert (no.returncode, no.stdout.strip()) == (1, "no"), no.stderr
    secrets = cluster.kubectl("auth", "can-i", "get", "secrets", "-n", NS, "--as", "ann", minor=minor)
    assert secrets.stdout.strip() == "no"
    assert cluster.kubectl("auth", "can-i", "create", "pods", "-n", NS, minor=minor).stdout.strip() == "yes"


def test_can_i_list_shows_the_roles_rules(cluster: ApiserverUnderTest) -> None:
    out = cluster.ok("auth", "can-i", "--list", "-n", NS, "--as", "ann")
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert lines[0] == "Resources Non-Resource URLs Resource Names Verbs"
    assert "pods [] [] [get list watch]" in lines
    assert "deployments.apps [] [] [get list watch]" in lines
    assert "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]" in lines
    assert "[/api/*] [] [get]" in lines
    assert not any(line.startswith("secrets ") for line in lines)


def test_whoami(cluster: ApiserverUnderTest) -> None:
    me = json.loads(cluster.ok("auth", "whoami", "-o", "json"))
    assert me["status"]["userInfo"]["username"] == "admin"
    assert "system:masters" in me["status"]["userInfo"]["groups"]
    ann = cluster.ok("auth", "whoami", "--as", "ann", "--as-group", "devs")
    rows = [" ".join(line.split()) for line in ann.splitlines()]
    assert "Username ann" in rows and "Groups [devs system:authenticated]" in rows


def test_forbidden_as_kubectl_prints_it(cluster: ApiserverUnderTest) -> None:
    r = cluster.kubectl("get", "pods", "-n", "auth-other", "--as", "ann")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        'Error from server (Forbidden): pods is forbidden: User "ann" cannot list resource "pods" '
        'in API group "" in the namespace "auth-other"'
    )


def test_an_aggregated_role_extends_view_while_running(cluster: ApiserverUnderTest) -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "view-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
    }
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": NS, "verb": "list", "resource": "secrets"}},
    }
    with cluster.http() as http:
        ask = lambda: http.post(  # noqa: E731
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review, headers={"Impersonate-User": "ann"}
        ).json()["status"]["allowed"]
        assert ask() is False
        assert http.post("/apis/rbac.authorization.k8s.io/v1/clusterroles", json=role).status_code == 201
        started = time.monotonic()
        while not ask():
            assert time.monotonic() - started < 10, "the aggregated rule never applied"
            time.sleep(0.02)
        took = time.monotonic() - started
    print(f"aggregated rule applied after {took * 1000:.0f} ms")
    assert cluster.ok("get", "secrets", "-n", NS, "--as", "ann").strip() in (
        "",
        "No resources found in auth-web namespace.",
    )


def test_user_add_writes_a_kubeconfig_rbac_then_governs(cluster: ApiserverUnderTest, tmp_path: Path) -> None:
    out = tmp_path / "bob.kubeconfig"
    made = raftkube("user", "add", "bob", "--group", "auditors", "--data-dir", str(cluster.data_dir), "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert f"wrote {out} for user bob (groups: auditors)" in made.stdout
    as_bob = ["--kubeconfig", str(out), "--cache-dir", str(tmp_path / "cache")]
    me = subprocess.run(
        [str(kubectl_binary(33)), *as_bob, "auth", "whoami", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    info = json.loads(me.stdout)["status"]["userInfo"]
    assert info["username"] == "bob" and info["groups"] == ["auditors", "system:authenticated"]
    denied = subprocess.run(
        [str(kubectl_binary(33)), *as_bob, "get", "pods", "-n", NS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert denied.returncode == 1 and 'User "bob" cannot list resource "pods"' in denied.stderr
    cluster.ok("create", "rolebinding", "auditors-view", "--clusterrole=view", "--group=auditors", "-n", NS)
    started = time.monotonic()
    while True:
        got = subprocess.run(
            [str(kubectl_binary(33)), *as_bob, "get", "pods", "-n", NS],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if got.returncode == 0 or time.monotonic() - started > 10:
            break
        time.sleep(0.05)
    assert got.returncode == 0, got.stderr
    reserved = raftkube("user", "add", "system:evil", "--data-dir", str(cluster.data_dir))
    assert reserved.returncode == 2 and "reserved for components" in reserved.stderr
