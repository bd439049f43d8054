"""Admission webhooks end to end: the in-process apiserver calls a real HTTPS webhook server on
127.0.0.1 (its own CA), configured through a test source as the watch caches will feed it."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
import pytest

from machinery.objects import Obj
from tests.apiserver.webhook_support import (
    REGISTRATION,
    TLS,
    Cluster,
    WebhookServer,
    configuration,
    hook,
    in_process_with_webhooks,
    make_tls,
    service_client_config,
    webhook_server,
)

CM = "/api/v1/namespaces/default/configmaps"
MWC, VWC = "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLS:
    return make_tls(tmp_path_factory.mktemp("webhook-pki"))


def run(tls: TLS, scenario: Callable[[Cluster, WebhookServer], Awaitable[None]]) -> None:
    async def go() -> None:
        async with webhook_server(tls) as server, in_process_with_webhooks() as cluster:
            await scenario(cluster, server)

    asyncio.run(go())


def cm(name: str, labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "data": {"k": "v"}}


def patch(ops: list[Obj]) -> Obj:
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(orjson.dumps(ops)).decode()}


def test_an_allowing_webhook_sees_kubes_admission_review(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        c.validating.set(configuration(VWC, "v", hook("allow.example.com", server.url("/allow"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        [review] = server.reviews["/allow"]
        assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
        req = review["request"]
        assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
        assert req["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
        assert req["requestKind"] == req["kind"] and req["requestResource"] == req["resource"]
        assert (req["name"], req["namespace"], req["operation"]) == ("one", "default", "CREATE")
        assert req["userInfo"]["username"] == "admin" and "system:masters" in req["userInfo"]["groups"]
        assert req["object"]["metadata"]["name"] == "one" and req["oldObject"] is None
        assert req["dryRun"] is False
        assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        assert len(req["uid"]) == 36
        # an update carries the stored object as oldObject
        r = await c.client.put(f"{CM}/one", json={**r.json(), "data": {"k": "w"}})
        assert r.status_code == 200, r.text
        update = server.reviews["/allow"][1]["request"]
        assert update["operation"] == "UPDATE" and update["oldObject"]["data"] == {"k": "v"}
        assert update["options"]["kind"] == "UpdateOptions"

    run(tls, scenario)


def test_a_denial_carries_the_webhooks_message_and_code(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/deny"] = lambda review: {
            "allowed": False,
            "status": {"code": 403, "message": "configmaps are closed today"},
        }
        server.handlers["/plain"] = lambda review: {"allowed": False}
        c.validating.set(configuration(VWC, "v", hook("deny.example.com", server.url("/deny"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 403
        assert (
            r.json()["message"]
            == 'admission webhook "deny.example.com" denied the request: configmaps are closed today'
        )
        c.validating.set(configuration(VWC, "v", hook("plain.example.com", server.url("/plain"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 400
        assert r.json()["message"] == 'admission webhook "plain.example.com" denied the request without explanation'
        assert (await c.client.get(f"{CM}/one")).status_code == 404

    run(tls, scenario)


def test_a_mutating_webhooks_json_patch_is_stored(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/label"] = lambda review: patch(
            [{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}]
        )
        seen: list[Obj] = []

        def look(review: Obj) -> Obj:
            seen.append(review["request"]["object"])
            return {"allowed": True}

        server.handlers["/look"] = look
        c.mutating.set(configuration(MWC, "m", hook("label.example.com", server.url("/label"), tls.ca_bundle)))
        c.validating.set(configuration(VWC, "v", hook("look.example.com", server.url("/look"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["labels"] == {"stamped": "yes"}
        stored = (await c.client.get(f"{CM}/one")).json()
        assert stored["metadata"]["labels"] == {"stamped": "yes"}
        assert seen[0]["metadata"]["labels"] == {"stamped": "yes"}  # validating webhooks see the result

    run(tls, scenario)


def test_warnings_reach_the_client_as_warning_headers(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/warn"] = lambda review: {"allowed": True, "warnings": ["mind the gap", 'say "hi"']}
        server.handlers["/warn-deny"] = lambda review: {"allowed": False, "warnings": ["before the no"]}
        c.validating.set(configuration(VWC, "v", hook("warn.example.com", server.url("/warn"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201
        assert r.headers.get_list("warning") == ['299 - "mind the gap"', '299 - "say \\"hi\\""']
        c.validating.set(configuration(VWC, "v", hook("wd.example.com", server.url("/warn-deny"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("two"))
        assert r.status_code == 400
        assert r.headers.get_list("warning") == ['299 - "before the no"']

    run(tls, scenario)


def test_ignore_webhooks_that_answer_are_honoured(tls: TLS) -> None:
    """failurePolicy governs only a webhook that cannot answer: one under Ignore that answers is
    called, and its denial and its patch count as any other webhook's."""

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/deny"] = lambda review: {"allowed": False, "status": {"code": 403, "message": "not today"}}
        server.handlers["/label"] = lambda review: patch(
            [{"op": "add", "path": "/metadata/labels", "value": {"stamped": "ignore-hook"}}]
        )
        deny = hook("deny.example.com", server.url("/deny"), tls.ca_bundle, failurePolicy="Ignore")
        c.validating.set(configuration(VWC, "v", deny))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 403, r.text
        assert r.json()["message"] == 'admission webhook "deny.example.com" denied the request: not today'
        assert (await c.client.get(f"{CM}/one")).status_code == 404
        c.mutating.set(configuration(MWC, "m", {**deny, "name": "mdeny.example.com"}))
        c.validating.set(configuration(VWC, "v"))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 403, r.text
        assert r.json()["message"] == 'admission webhook "mdeny.example.com" denied the request: not today'
        label = hook("label.example.com", server.url("/label"), tls.ca_bundle, failurePolicy="Ignore")
        c.mutating.set(configuration(MWC, "m", label))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        assert (await c.client.get(f"{CM}/one")).json()["metadata"]["labels"] == {"stamped": "ignore-hook"}
        assert len(server.reviews["/deny"]) == 2 and len(server.reviews["/label"]) == 1

    run(tls, scenario)


async def _slow(server: WebhookServer) -> Obj:
    await asyncio.wait_for(server.release.wait(), 30)
    return {"allowed": True}


def test_a_webhook_that_times_out_is_skipped_under_ignore(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/slow"] = lambda review: _slow(server)
        slow = hook("slow.example.com", server.url("/slow"), tls.ca_bundle, timeoutSeconds=1, failurePolicy="Ignore")
        c.validating.set(configuration(VWC, "v", slow))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text

    run(tls, scenario)


def test_a_webhook_that_times_out_fails_the_request_under_fail(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/slow"] = lambda review: _slow(server)
        slow = hook("slow.example.com", server.url("/slow"), tls.ca_bundle, timeoutSeconds=1, failurePolicy="Fail")
        c.mutating.set(configuration(MWC, "m", slow))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 500
        body = r.json()
        assert body["reason"] == "InternalError"
        assert body["message"] == (
            'Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: '
            f'Post "{server.url("/slow")}?timeout=1s": context deadline exceeded'
        )
        assert (await c.client.get(f"{CM}/one")).status_code == 404

    run(tls, scenario)


def test_a_malformed_answer_is_a_500_naming_the_webhook(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/wrong-uid"] = lambda review: {"uid": "not-yours", "allowed": True}
        server.handlers["/garbage"] = lambda review: b"<html>hello</html>"
        server.handlers["/absent"] = lambda review: orjson.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        )
        cases = {
            "/wrong-uid": 'received invalid webhook response: expected response.uid="',
            "/garbage": "failed to call webhook: couldn't get version/kind; json parse error",
            "/absent": "received invalid webhook response: webhook response was absent",
        }
        for path, words in cases.items():
            c.validating.set(configuration(VWC, "v", hook("bad.example.com", server.url(path), tls.ca_bundle)))
            r = await c.client.post(CM, json=cm("one"))
            assert r.status_code == 500, path
            message = r.json()["message"]
            assert message.startswith('Internal error occurred: failed calling webhook "bad.example.com": '), message
            assert words in message, message
        # a validating webhook may not patch
        server.handlers["/patches"] = lambda review: patch([{"op": "add", "path": "/data/x", "value": "y"}])
        c.validating.set(configuration(VWC, "v", hook("bad.example.com", server.url("/patches"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 500 and "validating webhook may not return response.patch" in r.json()["message"]

    run(tls, scenario)


def test_unreachable_and_untrusted_webhooks_follow_failure_policy(tls: TLS, tmp_path: Path) -> None:
    other = make_tls(tmp_path, "other")

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        untrusted = hook("untrusted.example.com", server.url("/x"), other.ca_bundle)
        c.validating.set(configuration(VWC, "v", untrusted))
        r = await c.client.post(CM, json=cm("one"))
        assert (
            r.status_code == 500
            and "tls: failed to verify certificate: x509: certificate signed by unknown authority"
            in r.json()["message"]
        ), r.text
        closed = hook("closed.example.com", "https://127.0.0.1:1/x", tls.ca_bundle)
        c.validating.set(configuration(VWC, "v", closed))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 500 and "dial tcp 127.0.0.1:1: connect: connection refused" in r.json()["message"], (
            r.text
        )
        c.validating.set(
            configuration(
                VWC,
                "v",
                {**closed, "failurePolicy": "Ignore"},
                {**untrusted, "failurePolicy": "Ignore"},
                hook("svc.example.com", "", tls.ca_bundle, failurePolicy="Ignore")
                | {"clientConfig": {"service": {"namespace": "default", "name": "hooks", "port": 443}}},
            )
        )
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        assert "/x" not in server.reviews

    run(tls, scenario)


def test_namespace_selector_reads_the_namespaces_labels(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/deny"] = lambda review: {"allowed": False, "status": {"message": "not in prod"}}
        for name, labels in (("prod", {"env": "prod"}), ("dev", {})):
            r = await c.client.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}})
            assert r.status_code == 201
        rules = [
            {"operations": ["*"], "apiGroups": [""], "apiVersions": ["*"], "resources": ["configmaps", "namespaces"]}
        ]
        selector = {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}
        c.validating.set(
            configuration(
                VWC,
                "v",
                hook("ns.example.com", server.url("/deny"), tls.ca_bundle, rules=rules, namespaceSelector=selector),
            )
        )
        assert (await c.client.post("/api/v1/namespaces/dev/configmaps", json=cm("a"))).status_code == 201
        r = await c.client.post("/api/v1/namespaces/prod/configmaps", json=cm("a"))
        assert r.status_code == 400 and r.json()["message"].endswith("not in prod")
        # a namespace object is judged by its own labels
        r = await c.client.post("/api/v1/namespaces", json={"metadata": {"name": "prod2", "labels": {"env": "prod"}}})
        assert r.status_code == 400
        assert (await c.client.post("/api/v1/namespaces", json={"metadata": {"name": "qa"}})).status_code == 201
        # a namespace that does not exist: kube's 404 for it
        r = await c.client.post("/api/v1/namespaces/nowhere/configmaps", json=cm("a"))
        assert r.status_code == 404 and r.json()["message"] == 'namespaces "nowhere" not found'

    run(tls, scenario)


def test_object_selector_matches_new_or_old_labels(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/deny"] = lambda review: {"allowed": False, "status": {"message": "locked"}}
        selector = {"matchLabels": {"lock": "yes"}}
        c.validating.set(
            configuration(
                VWC, "v", hook("obj.example.com", server.url("/deny"), tls.ca_bundle, objectSelector=selector)
            )
        )
        assert (await c.client.post(CM, json=cm("free"))).status_code == 201
        assert (await c.client.post(CM, json=cm("locked", {"lock": "yes"}))).status_code == 400
        c.validating.set()
        stored = (await c.client.post(CM, json=cm("was-locked", {"lock": "yes"}))).json()
        c.validating.set(
            configuration(
                VWC, "v", hook("obj.example.com", server.url("/deny"), tls.ca_bundle, objectSelector=selector)
            )
        )
        # removing the label is judged by the old object's labels too
        stored["metadata"]["labels"] = {}
        assert (await c.client.put(f"{CM}/was-locked", json=stored)).status_code == 400

    run(tls, scenario)


def test_reinvocation_reruns_if_needed_hooks_after_a_later_change(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        def add_label(key: str) -> Callable[[Obj], Obj]:
            def answer(review: Obj) -> Obj:
                labels = review["request"]["object"]["metadata"].get("labels") or {}
                if key in labels:
                    return {"allowed": True}
                if not labels:
                    return patch([{"op": "add", "path": "/metadata/labels", "value": {key: "1"}}])
                return patch([{"op": "add", "path": f"/metadata/labels/{key}", "value": "1"}])

            return answer

        server.handlers["/a"] = add_label("a")
        server.handlers["/b"] = add_label("b")
        server.handlers["/never"] = lambda review: {"allowed": True}
        c.mutating.set(
            configuration(MWC, "2-b", hook("b.example.com", server.url("/b"), tls.ca_bundle)),
            configuration(
                MWC,
                "1-a",
                hook("a.example.com", server.url("/a"), tls.ca_bundle, reinvocationPolicy="IfNeeded"),
                hook("never.example.com", server.url("/never"), tls.ca_bundle),
            ),
        )
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        assert r.json()["metadata"]["labels"] == {"a": "1", "b": "1"}
        # a (IfNeeded) ran first, b changed the object after it: a ran again and saw b's label
        assert len(server.reviews["/a"]) == 2
        assert server.reviews["/a"][1]["request"]["object"]["metadata"]["labels"] == {"a": "1", "b": "1"}
        assert len(server.reviews["/never"]) == 1 and len(server.reviews["/b"]) == 1

    run(tls, scenario)


def test_dry_run_reaches_only_hooks_without_side_effects(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        c.validating.set(configuration(VWC, "v", hook("safe.example.com", server.url("/safe"), tls.ca_bundle)))
        r = await c.client.post(f"{CM}?dryRun=All", json=cm("one"))
        assert r.status_code == 201, r.text
        [review] = server.reviews["/safe"]
        assert review["request"]["dryRun"] is True and review["request"]["options"]["dryRun"] == ["All"]
        c.validating.set(
            configuration(VWC, "v", hook("some.example.com", server.url("/some"), tls.ca_bundle, sideEffects="Some"))
        )
        r = await c.client.post(f"{CM}?dryRun=All", json=cm("one"))
        assert r.status_code == 400
        assert r.json()["message"] == 'admission webhook "some.example.com" does not support dry run'
        assert "/some" not in server.reviews
        assert (await c.client.post(CM, json=cm("one"))).status_code == 201  # a real write calls it

    run(tls, scenario)


def test_connections_are_reused_and_rules_filter(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        c.validating.set(configuration(VWC, "v", hook("count.example.com", server.url("/count"), tls.ca_bundle)))
        for i in range(10):
            assert (await c.client.post(CM, json=cm(f"c{i}"))).status_code == 201
        # secrets are not in the rules: no call
        secret = {"metadata": {"name": "s"}, "stringData": {"a": "b"}}
        assert (await c.client.post("/api/v1/namespaces/default/secrets", json=secret)).status_code == 201
        assert len(server.reviews["/count"]) == 10
        assert len(server.connections) == 1  # one TLS connection for all ten calls

    run(tls, scenario)


def test_equivalent_match_policy_sends_the_equivalent_resource(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        rules = [
            {"operations": ["CREATE"], "apiGroups": ["events.k8s.io"], "apiVersions": ["v1"], "resources": ["events"]}
        ]
        server.handlers["/ev"] = lambda review: patch([{"op": "replace", "path": "/note", "value": "patched"}])
        c.mutating.set(
            configuration(
                MWC,
                "m",
                hook("eq.example.com", server.url("/ev"), tls.ca_bundle, rules=rules),
                hook("exact.example.com", server.url("/exact"), tls.ca_bundle, rules=rules, matchPolicy="Exact"),
            )
        )
        event = {
            "metadata": {"name": "e1"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Tested",
            "message": "original",
            "type": "Normal",
        }
        r = await c.client.post("/api/v1/namespaces/default/events", json=event)
        assert r.status_code == 201, r.text
        assert r.json()["message"] == "patched"  # patched as events.k8s.io, stored as core
        [review] = server.reviews["/ev"]
        req = review["request"]
        assert req["resource"] == {"group": "events.k8s.io", "version": "v1", "resource": "events"}
        assert req["requestResource"] == {"group": "", "version": "v1", "resource": "events"}
        assert req["object"]["note"] == "original" and req["object"]["apiVersion"] == "events.k8s.io/v1"
        assert "/exact" not in server.reviews

    run(tls, scenario)


def test_a_webhook_may_not_rename_the_object(tls: TLS) -> None:
    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/rename"] = lambda review: patch([{"op": "replace", "path": "/metadata/name", "value": "x"}])
        server.handlers["/broken"] = lambda review: patch([{"op": "remove", "path": "/nothing/here"}])
        c.mutating.set(configuration(MWC, "m", hook("rename.example.com", server.url("/rename"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert (
            r.status_code == 500
            and 'admission webhook "rename.example.com" changed metadata.name' in r.json()["message"]
        )
        c.mutating.set(configuration(MWC, "m", hook("broken.example.com", server.url("/broken"), tls.ca_bundle)))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 500 and 'admission webhook "broken.example.com" returned a patch' in r.json()["message"]
        assert (await c.client.get(f"{CM}/one")).status_code == 404

    run(tls, scenario)


def test_match_conditions_decide_whether_the_webhook_is_called(tls: TLS) -> None:
    """A condition excluding a name and a namespace: the webhook never hears of those writes
    (they are stored without it), and judges the rest; a configuration whose condition does
    not compile is refused at write time with kube's 422."""

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/deny"] = lambda review: {"allowed": False, "status": {"message": "judged"}}
        assert (await c.client.post("/api/v1/namespaces", json={"metadata": {"name": "quiet"}})).status_code == 201
        conditions = [
            {"name": "not-skip-me", "expression": "object.metadata.name != 'skip-me'"},
            {"name": "not-quiet", "expression": "request.namespace != 'quiet'"},
        ]
        c.validating.set(
            configuration(
                VWC, "v", hook("cond.example.com", server.url("/deny"), tls.ca_bundle, matchConditions=conditions)
            )
        )
        assert (await c.client.post(CM, json=cm("skip-me"))).status_code == 201
        assert (await c.client.post("/api/v1/namespaces/quiet/configmaps", json=cm("other"))).status_code == 201
        assert server.reviews.get("/deny") is None
        r = await c.client.post(CM, json=cm("other"))
        assert r.status_code == 400 and r.json()["message"].endswith("judged")
        [review] = server.reviews["/deny"]
        assert review["request"]["name"] == "other" and review["request"]["namespace"] == "default"

        bad = configuration(
            VWC,
            "bad",
            hook(
                "bad.example.com",
                server.url("/deny"),
                tls.ca_bundle,
                matchConditions=[{"name": "x", "expression": "1 +"}],
            ),
        )
        r = await c.client.post("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", json=bad)
        assert r.status_code == 422, r.text
        [cause] = r.json()["details"]["causes"]
        assert cause["field"] == "webhooks[0].matchConditions[0].expression"
        assert "compilation failed: " in cause["message"]

    run(tls, scenario)


def test_a_mutating_webhook_skips_what_its_match_conditions_exclude(tls: TLS) -> None:
    """kube's `should mutate everything except 'skip-me' configmaps`."""

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        server.handlers["/label"] = lambda review: patch(
            [{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}]
        )
        skip_me = [{"name": "skip-me", "expression": "object.metadata.name != 'skip-me'"}]
        c.mutating.set(
            configuration(
                MWC, "m", hook("label.example.com", server.url("/label"), tls.ca_bundle, matchConditions=skip_me)
            )
        )
        r = await c.client.post(CM, json=cm("skip-me"))
        assert r.status_code == 201 and "labels" not in r.json()["metadata"], r.text
        r = await c.client.post(CM, json=cm("random"))
        assert r.status_code == 201 and r.json()["metadata"]["labels"] == {"stamped": "yes"}, r.text
        assert [rv["request"]["name"] for rv in server.reviews["/label"]] == ["random"]

    run(tls, scenario)


async def _slices_cached(c: Cluster, revision: int) -> None:
    """Wait (bounded) until the EndpointSlices' watch cache, which the resolver reads, saw `revision`."""
    [cache] = [
        v for r, v in c.api.scope.caches.items() if (r.group, r.plural) == ("discovery.k8s.io", "endpointslices")
    ]
    for _ in range(500):
        if cache.revision >= revision:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the EndpointSlices' cache never reached revision {revision}")


def test_a_service_reference_reaches_a_ready_endpoint_verified_as_the_services_dns_name(tmp_path: Path) -> None:
    """As conformance registers its webhooks: clientConfig.service names a Service whose
    EndpointSlice holds the webhook's address; the certificate is issued for `hook.default.svc`
    only, so the call succeeds only if the name verified is the service's, not 127.0.0.1."""
    svc_tls = make_tls(tmp_path, "hook", hosts=("hook.default.svc",))
    config = service_client_config("default", "hook", 8443, "/allow", svc_tls.ca_bundle)
    slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        c.validating.set(configuration(VWC, "v", hook("svc.example.com", "", "", clientConfig=config)))
        shown = (
            'failed calling webhook "svc.example.com": failed to call webhook: '
            'Post "https://hook.default.svc:8443/allow?timeout=5s"'
        )
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 500 and r.json()["message"].endswith(f'{shown}: service "hook" not found'), r.text

        spec = {"ports": [{"name": "https", "port": 8443, "targetPort": "webhook-api"}]}
        r = await c.client.post(
            "/api/v1/namespaces/default/services", json={"metadata": {"name": "hook"}, "spec": spec}
        )
        assert r.status_code == 201, r.text
        r = await c.client.post(CM, json=cm("one"))
        assert r.json()["message"].endswith(f'{shown}: no endpoints available for service "hook"'), r.text

        labels = {"kubernetes.io/service-name": "hook"}
        eps = {
            "metadata": {"name": "hook-1", "labels": labels},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": False}}],
        }
        r = await c.client.post(slices, json=eps)
        assert r.status_code == 201, r.text
        await _slices_cached(c, int(r.json()["metadata"]["resourceVersion"]))
        r = await c.client.post(CM, json=cm("one"))
        assert r.json()["message"].endswith(f'{shown}: no endpoints available for service "hook"'), r.text
        assert "/allow" not in server.reviews

        eps["endpoints"] = [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}]
        r = await c.client.put(f"{slices}/hook-1", json=eps)
        assert r.status_code == 200, r.text
        await _slices_cached(c, int(r.json()["metadata"]["resourceVersion"]))
        r = await c.client.post(CM, json=cm("one"))
        assert r.status_code == 201, r.text
        assert len(server.reviews["/allow"]) == 1

        # the same server by URL: its certificate does not name 127.0.0.1
        by_url = hook("url.example.com", server.url("/allow"), svc_tls.ca_bundle)
        c.validating.set(configuration(VWC, "v", by_url))
        r = await c.client.post(CM, json=cm("two"))
        assert r.status_code == 500 and "tls: failed to verify certificate" in r.json()["message"], r.text

    run(svc_tls, scenario)


def test_what_a_mutating_webhook_adds_is_defaulted(tls: TLS) -> None:
    """Conformance "should mutate pod and apply defaults after mutation": an init container a
    webhook adds gets the defaults a client's would (kube decodes the patched object)."""

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        init = {"name": "webhook-added-init-container", "image": "busybox:1.36", "command": ["true"]}
        added_init = [{"op": "add", "path": "/spec/initContainers", "value": [init]}]
        server.handlers["/init"] = lambda review: patch(added_init)
        rules = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]
        webhook = hook("init.example.com", server.url("/init"), tls.ca_bundle, rules=rules)
        c.mutating.set(configuration(MWC, "m", webhook))
        pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        r = await c.client.post("/api/v1/namespaces/default/pods", json=pod)
        assert r.status_code == 201, r.text
        [added] = r.json()["spec"]["initContainers"]
        assert added["terminationMessagePolicy"] == "File" and added["terminationMessagePath"] == "/dev/termination-log"
        assert added["imagePullPolicy"] == "IfNotPresent"  # a tag other than latest

    run(tls, scenario)


@pytest.mark.parametrize("path", ["", "/"])
def test_a_service_path_that_is_empty_or_the_root_is_valid(tls: TLS, path: str) -> None:
    """As kube's ValidateWebhookService (conformance registers one with an empty path)."""

    async def scenario(c: Cluster, server: WebhookServer) -> None:
        config = service_client_config("default", "hooks", 443, path, tls.ca_bundle)
        body = configuration(VWC, f"empty-path{len(path)}", hook("svc.example.com", "", "", clientConfig=config))
        r = await c.client.post(f"/apis/{REGISTRATION}/validatingwebhookconfigurations", json=body)
        assert r.status_code == 201, r.text

    run(tls, scenario)
