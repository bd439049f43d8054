"""Where `pods/proxy` sends a request: the target as the path names it, the port (a number, a
named container port, or the first declared one), the pod's IP; refusals are 400/503."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.errors import StatusError
from apiserver.http.pod_proxy import ProxyTarget, parse_target, pod_url
from apiserver.http.proxy_rewrite import MAX_REWRITE_BYTES, rewrite_body, rewrite_html, rewrite_url
from apiserver.http.subresources.service_proxy import endpoint_of

POD = {
    "metadata": {"name": "web"},
    "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}, {"containerPort": 9}]}]},
    "status": {"phase": "Running", "podIP": "10.244.1.7"},
}


def test_targets_as_kube_splits_them() -> None:
    assert parse_target("web") == ProxyTarget("", "web", "")
    assert parse_target("web:8080") == ProxyTarget("", "web", "8080")
    assert parse_target("https:web:443") == ProxyTarget("https", "web", "443")
    for bad in ("ftp:web:21", "a:b:c:d", ":80"):
        with pytest.raises(StatusError) as refused:
            parse_target(bad)
        assert refused.value.code == 400


def test_the_url_takes_the_pods_ip_and_port() -> None:
    assert pod_url(POD, parse_target("web"), "", "") == "http://10.244.1.7:8080/"
    assert pod_url(POD, parse_target("web:http"), "a/b c", "x=1") == "http://10.244.1.7:8080/a/b%20c?x=1"
    assert pod_url(POD, parse_target("https:web:9443"), "/healthz", "") == "https://10.244.1.7:9443/healthz"
    with pytest.raises(StatusError, match="no port named 'grpc'"):
        pod_url(POD, parse_target("web:grpc"), "", "")
    done = {**POD, "status": {"phase": "Succeeded", "podIP": "10.244.1.7"}}
    with pytest.raises(StatusError) as refused:
        pod_url(done, parse_target("web"), "", "")
    assert refused.value.code == 503


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_target_and_path_give_an_http_url_to_the_pod_or_a_refusal(name: str, path: str) -> None:
    try:
        url = pod_url(POD, parse_target(name), path, "")
    except StatusError as e:
        assert e.code in (400, 503)
        return
    assert url.startswith(("http://10.244.1.7:", "https://10.244.1.7:"))
    assert "\n" not in url and " " not in url


SERVICE = {
    "metadata": {"name": "web"},
    "spec": {"ports": [{"name": "http", "port": 80}, {"name": "", "port": 81}]},
}
SLICES = [
    {
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [
            {"addresses": ["10.244.1.7"], "conditions": {"ready": True}},
            {"addresses": ["10.244.1.8"], "conditions": {"ready": False}},
        ],
    },
    {"ports": [{"port": 9090}], "endpoints": [{"addresses": ["10.244.2.3"]}]},
]


def test_services_proxy_picks_a_ready_endpoint_of_the_named_or_numbered_port() -> None:
    assert endpoint_of(SERVICE, SLICES, "http") == "10.244.1.7:8080"
    assert endpoint_of(SERVICE, SLICES, "80") == "10.244.1.7:8080"  # a number names the service port
    assert endpoint_of(SERVICE, SLICES, "") == "10.244.2.3:9090"  # none: the port without a name
    for port, says in (("grpc", 'no service port "grpc"'), ("81", 'no endpoints available for service "web"')):
        with pytest.raises(StatusError, match=says) as refused:
            endpoint_of(SERVICE, SLICES[:1], port)
        assert refused.value.code == 503
    external = {"metadata": {"name": "x"}, "spec": {"type": "ExternalName", "externalName": "a.b"}}
    with pytest.raises(StatusError, match="no endpoints available"):
        endpoint_of(external, [], "")


PREFIX = "/api/v1/namespaces/ns/pods/http:web:1080/proxy"


def test_links_in_a_proxied_page_go_through_the_proxy_again_as_kubes_transport_rewrites_them() -> None:
    page = (
        b'<html><a href="/rewriteme">test</a> <A HREF=\'/x/\'>x</A> <img src=/i.png alt="/not-a-link">'
        b'<a href="relative">r</a> <a href="http://elsewhere/y">e</a> <p title="/left">t</p>'
        b'<form action="/api/v1/namespaces/ns/pods/http:web:1080/proxy/done"></form></html>'
    )
    assert rewrite_html(page, PREFIX) == (
        b'<html><a href="' + PREFIX.encode() + b"/rewriteme\">test</a> <A HREF='" + PREFIX.encode() + b"/x/'>x</A> "
        b"<img src=" + PREFIX.encode() + b'/i.png alt="/not-a-link">'
        b'<a href="relative">r</a> <a href="http://elsewhere/y">e</a> <p title="/left">t</p>'
        b'<form action="/api/v1/namespaces/ns/pods/http:web:1080/proxy/done"></form></html>'
    )
    assert rewrite_url("/a?b=1#c", PREFIX) == PREFIX + "/a?b=1#c"
    zipped = gzip.compress(b'<a href="/z">z</a>')
    assert gzip.decompress(rewrite_body(zipped, "gzip", PREFIX) or b"") == b'<a href="' + PREFIX.encode() + b'/z">z</a>'
    assert rewrite_body(b"not gzip", "gzip", PREFIX) is None  # relayed as it is
    bomb = gzip.compress(b"<" * (MAX_REWRITE_BYTES + 10))
    assert rewrite_body(bomb, "gzip", PREFIX) is None  # inflated no further than the bound
    assert rewrite_body(b"x", "br", PREFIX) is None


@given(st.binary(max_size=300))
def test_any_page_rewrites_without_raising(page: bytes) -> None:
    rewrite_html(page, PREFIX)
    rewrite_body(page, "gzip", PREFIX)
