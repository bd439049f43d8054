"""Identities against a real cluster (`raftkube up`) with kubectl 1.31: `kubectl create token`
and the token authenticating as the service account (`auth whoami`), 401 for an expired token
and for the token of a deleted-and-recreated account, and the kubeconfig `up` writes for each
component authenticating as that component, with what its RBAC role allows."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.auth import jws
from apiserver.auth.serviceaccount_tokens import DEFAULT_ISSUER, TokenIssuer
from apiserver.pki import DEFAULT_NODES, ApiserverPKI
from tests.apiserver.support import ApiserverUnderTest, kubectl_binary

NS = "sa-web"
MINOR = 31  # kubectl 1.32+ send protobuf bodies for create token / whoami: another part of issue 10


@pytest.fixture(scope="module")
def cluster(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    raftkube_apiserver.ok("create", "namespace", NS, minor=MINOR)
    raftkube_apiserver.ok("create", "serviceaccount", "builder", "-n", NS, minor=MINOR)
    return raftkube_apiserver


def kubectl(cluster: ApiserverUnderTest, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(kubectl_binary(MINOR)), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cluster.cache_dir)]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, check=False, env=dict(os.environ))


def no_user_kubeconfig(cluster: ApiserverUnderTest) -> Path:
    """The cluster and its CA, no credentials: `--token` is the only one a request carries (with the
    admin kubeconfig kubectl would also present the admin certificate, which wins, as in kube)."""
    path = cluster.data_dir.parent / "no-user.kubeconfig"
    doc = yaml.safe_load(cluster.kubeconfig.read_text())
    doc["users"] = [{"name": "nobody", "user": {}}]
    doc["contexts"] = [{"name": "raftkube", "context": {"cluster": doc["clusters"][0]["name"], "user": "nobody"}}]
    doc["current-context"] = "raftkube"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def whoami(cluster: ApiserverUnderTest, kubeconfig: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return kubectl(cluster, kubeconfig, "auth", "whoami", "-o", "json", *extra)


def user_info(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    info: dict[str, Any] = json.loads(proc.stdout)["status"]["userInfo"]
    return info


def until_unauthorized(cluster: ApiserverUnderTest, kubeconfig: Path, token: str, seconds: float = 30) -> None:
    """The watch cache sees a deletion shortly after it is stored: poll, bounded."""
    deadline = time.monotonic() + seconds
    while True:
        proc = whoami(cluster, kubeconfig, "--token", token)
        if proc.returncode != 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert proc.returncode == 1 and "Unauthorized" in proc.stderr, proc.stdout + proc.stderr


def test_create_token_authenticates_as_the_service_account(cluster: ApiserverUnderTest) -> None:
    token = cluster.ok("create", "token", "builder", "-n", NS, minor=MINOR).strip()
    me = user_info(whoami(cluster, no_user_kubeconfig(cluster), "--token", token))
    sa = json.loads(cluster.ok("get", "serviceaccount", "builder", "-n", NS, "-o", "json", minor=MINOR))
    assert me["username"] == f"system:serviceaccount:{NS}:builder"
    assert me["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"]
    assert me["uid"] == sa["metadata"]["uid"]
    assert me["extra"]["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    # nothing is granted to it yet: RBAC denies, worded as kube words it
    proc = kubectl(cluster, no_user_kubeconfig(cluster), "--token", token, "get", "pods", "-n", NS)
    assert proc.returncode == 1
    assert f'User "system:serviceaccount:{NS}:builder" cannot list resource "pods"' in proc.stderr


def test_create_token_flags_and_errors(cluster: ApiserverUnderTest) -> None:
    token = cluster.ok("create", "token", "builder", "-n", NS, "--duration", "2h", "--audience", "vault", minor=MINOR)
    part = token.strip().split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    assert claims["aud"] == ["vault"] and claims["exp"] - claims["iat"] == 7200
    short = cluster.kubectl("create", "token", "builder", "-n", NS, "--duration", "1m", minor=MINOR)
    assert short.returncode == 1
    assert "may not specify a duration less than 10 minutes" in short.stderr
    missing = cluster.kubectl("create", "token", "nobody", "-n", NS, minor=MINOR)
    assert missing.returncode == 1 and 'serviceaccounts "nobody" not found' in missing.stderr


def test_an_expired_token_gets_401(cluster: ApiserverUnderTest) -> None:
    """Signed with the cluster's own key, for the real account, but two hours ago for ten minutes."""
    creds = ApiserverPKI.of(cluster.data_dir)
    sa = json.loads(cluster.ok("get", "serviceaccount", "builder", "-n", NS, "-o", "json", minor=MINOR))
    then = time.time() - 7200
    issuer = TokenIssuer(jws.load_signing_key(creds.service_account_key), DEFAULT_ISSUER, clock=lambda: then)
    expired, _ = issuer.issue(sa, [DEFAULT_ISSUER], 600)
    proc = whoami(cluster, no_user_kubeconfig(cluster), "--token", expired)
    assert proc.returncode == 1 and "Unauthorized" in proc.stderr, proc.stderr
    fresh, _ = TokenIssuer(jws.load_signing_key(creds.service_account_key)).issue(sa, [DEFAULT_ISSUER], 600)
    assert user_info(whoami(cluster, no_user_kubeconfig(cluster), "--token", fresh))["username"].endswith(":builder")


def test_the_token_of_a_deleted_and_recreated_account_gets_401(cluster: ApiserverUnderTest) -> None:
    cluster.ok("create", "serviceaccount", "short-lived", "-n", NS, minor=MINOR)
    token = cluster.ok("create", "token", "short-lived", "-n", NS, minor=MINOR).strip()
    kubeconfig = no_user_kubeconfig(cluster)
    assert user_info(whoami(cluster, kubeconfig, "--token", token))["username"].endswith(":short-lived")
    cluster.ok("delete", "serviceaccount", "short-lived", "-n", NS, minor=MINOR)
    cluster.ok("create", "serviceaccount", "short-lived", "-n", NS, minor=MINOR)
    until_unauthorized(cluster, kubeconfig, token)


@pytest.mark.parametrize(
    ("component", "user", "groups"),
    [
        ("scheduler", "system:kube-scheduler", ["system:authenticated"]),
        ("controller-manager", "system:kube-controller-manager", ["system:authenticated"]),
        *((f"kubelet:{n}", f"system:node:{n}", ["system:nodes", "system:authenticated"]) for n in DEFAULT_NODES),
        ("admin", "admin", ["system:masters", "system:authenticated"]),
    ],
)
def test_each_component_kubeconfig_is_its_own_user(
    cluster: ApiserverUnderTest, component: str, user: str, groups: list[str]
) -> None:
    kubeconfig = ApiserverPKI.of(cluster.data_dir).kubeconfig_of(component)
    me = user_info(whoami(cluster, kubeconfig))
    assert (me["username"], me["groups"]) == (user, groups)


def test_the_scheduler_binds_pods_but_cannot_touch_secrets(cluster: ApiserverUnderTest) -> None:
    cluster.ok("run", "to-bind", "-n", NS, "--image", "busybox", "--restart", "Never", minor=MINOR)
    scheduler = ApiserverPKI.of(cluster.data_dir).kubeconfig_of("scheduler")
    binding = cluster.data_dir.parent / "binding.json"
    binding.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "to-bind"},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
            }
        )
    )
    bound = kubectl(
        cluster, scheduler, "create", "--raw", f"/api/v1/namespaces/{NS}/pods/to-bind/binding", "-f", str(binding)
    )
    assert bound.returncode == 0, bound.stderr
    pod = json.loads(cluster.ok("get", "pod", "to-bind", "-n", NS, "-o", "json", minor=MINOR))
    assert pod["spec"]["nodeName"] == "node-1"
    secret = kubectl(cluster, scheduler, "create", "secret", "generic", "s1", "-n", NS, "--from-literal=a=b")
    assert secret.returncode == 1
    assert 'User "system:kube-scheduler" cannot create resource "secrets"' in secret.stderr
    listed = kubectl(cluster, scheduler, "get", "secrets", "-n", NS)
    assert listed.returncode == 1 and "Forbidden" in listed.stderr


def token_review(
    cluster: ApiserverUnderTest, kubeconfig: Path, token: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    argv = [str(kubectl_binary(MINOR)), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cluster.cache_dir)]
    return subprocess.run(
        # --validate=false: a kind without PATCH makes kubectl validate against /openapi/v2, not served
        [*argv, "create", "--validate=false", "-f", "-", "-o", "json", *extra],
        input=json.dumps(review),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=dict(os.environ),
    )


def test_token_review_of_a_created_token(cluster: ApiserverUnderTest) -> None:
    """What conformance's "should mount an API token into pods" asks: the token's user, reviewed
    by the admin; a service account may review only once bound to system:auth-delegator."""
    token = cluster.ok("create", "token", "builder", "-n", NS, minor=MINOR).strip()
    proc = token_review(cluster, cluster.kubeconfig, token)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["kind"] == "TokenReview" and answer["spec"]["token"] == token
    status = answer["status"]
    assert status["authenticated"] is True and status["audiences"] == [DEFAULT_ISSUER]
    assert status["user"]["username"] == f"system:serviceaccount:{NS}:builder"
    assert status["user"]["groups"] == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{NS}",
        "system:authenticated",
    ]
    unknown = json.loads(token_review(cluster, cluster.kubeconfig, "not-a-token").stdout)["status"]
    assert unknown == {"user": {}}
    empty = token_review(cluster, cluster.kubeconfig, "")
    assert empty.returncode == 1 and "token is required for TokenReview" in empty.stderr, empty.stderr

    as_builder = no_user_kubeconfig(cluster)
    denied = token_review(cluster, as_builder, token, "--token", token)
    assert denied.returncode == 1 and "Forbidden" in denied.stderr, denied.stderr
    cluster.ok(
        "create", "clusterrolebinding", "builder-delegator", "--clusterrole=system:auth-delegator",
        f"--serviceaccount={NS}:builder", minor=MINOR,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while (proc := token_review(cluster, as_builder, token, "--token", token)).returncode != 0:
        assert time.monotonic() < deadline, proc.stderr
        time.sleep(0.2)
    assert json.loads(proc.stdout)["status"]["authenticated"] is True
