"""A CONNECT (exec, attach, port-forward) as admission sees it: the request's options object,
built from the query as kube's connect handler does (400 naming a bad parameter), and the
AdmissionReview a webhook gets for it (the options' kind, no operation options)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.webhook.review import Invocation, build_request
from apiserver.auth.user import User
from apiserver.errors import StatusError
from apiserver.http.kubelet_proxy import ATTACH, EXEC, PORT_FORWARD
from apiserver.resources.core_pods import RESOURCE as PODS

POD = {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "c"}, {"name": "d"}]}}


def test_each_connect_has_kubes_options_object() -> None:
    query = [("command", "sh"), ("command", "-c"), ("command", "true"), ("stdout", "true"), ("container", "c")]
    assert EXEC.options(POD, query) == {
        "kind": "PodExecOptions",
        "apiVersion": "v1",
        "stdin": False,
        "stdout": True,
        "stderr": False,
        "tty": False,
        "container": "c",
        "command": ["sh", "-c", "true"],
    }
    attach = ATTACH.options(POD, [("stdin", "1"), ("container", "d")])
    assert attach["kind"] == "PodAttachOptions" and attach["stdin"] is True and attach["container"] == "d"
    assert "command" not in attach
    ports = PORT_FORWARD.options(POD, [("ports", "80"), ("ports", "8080,9090")])
    assert ports == {"kind": "PodPortForwardOptions", "apiVersion": "v1", "ports": [80, 8080, 9090]}


@pytest.mark.parametrize(
    ("endpoint", "query", "words"),
    [
        (EXEC, [("stdout", "yes"), ("container", "c")], "stdout: invalid value 'yes'"),
        (EXEC, [("stdout", "true")], "a container name must be specified for pod p"),
        (ATTACH, [("container", "nope")], "container nope is not valid for pod p"),
        (PORT_FORWARD, [("ports", "0")], "ports: invalid value '0'"),
        (PORT_FORWARD, [("ports", "http")], "ports: invalid value 'http'"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(endpoint: object, query: list[tuple[str, str]], words: str) -> None:
    with pytest.raises(StatusError) as refused:
        endpoint.options(POD, query)  # type: ignore[attr-defined]
    assert refused.value.code == 400 and words in refused.value.message


@given(st.lists(st.tuples(st.sampled_from(["ports", "stdin", "container", "command"]), st.text(max_size=12))))
def test_any_query_gives_options_or_a_400(query: list[tuple[str, str]]) -> None:
    for endpoint in (EXEC, ATTACH, PORT_FORWARD):
        try:
            out = endpoint.options(POD, query)
        except StatusError as e:
            assert e.code == 400
            continue
        assert out["apiVersion"] == "v1" and out["kind"].startswith("Pod")


def test_a_webhook_sees_a_connect_with_its_options_kind_and_no_operation_options() -> None:
    options = ATTACH.options(POD, [("stdin", "true"), ("container", "c")])
    request = AdmissionRequest("CONNECT", PODS, "attach", "ns", "p", User("alice", ()), options, None)
    review = build_request("uid-1", "v1", request, Invocation(PODS, "attach", options, None))["request"]
    assert review["operation"] == "CONNECT" and review["subResource"] == "attach"
    assert review["kind"] == review["requestKind"] == {"group": "", "version": "v1", "kind": "PodAttachOptions"}
    assert review["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert review["object"] == options and review["oldObject"] is None and "options" not in review
