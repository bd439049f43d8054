"""The rendered table: its structure per feature, that nft accepts it, and hostile objects."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.proxy import nft, rules
from tests.components.proxy.support import NODE, endpoint, in_ns, netns, service, sh, slice_


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    with netns("r") as name:
        yield name


def chain(text: str, name_prefix: str) -> list[list[str]]:
    """The rules of every chain whose name starts with `name_prefix`."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("chain "):
            current = [] if s.split()[1].startswith(name_prefix) else None
            if current is not None:
                out.append(current)
        elif s == "}":
            current = None
        elif current is not None:
            current.append(s)
    return out


def render(svcs: list[Any], slices: list[Any]) -> rules.Ruleset:
    return rules.render(svcs, slices, NODE)


def test_cluster_ip_balances_over_ready_endpoints(ns: str) -> None:
    rs = render(
        [service("web", "10.96.0.50")],
        [slice_("web", endpoint("10.244.1.2"), endpoint("10.244.1.3", node=None), endpoint("10.244.1.9", ready=False))],
    )
    assert "10.96.0.50 . tcp . 80 : goto svc-" in rs.text
    (picks,) = chain(rs.text, "all-")
    assert picks[-1].startswith("numgen random mod 2 vmap")
    dnats = sorted(r[-1] for r in chain(rs.text, "ep-"))
    assert dnats == ["meta l4proto tcp dnat to 10.244.1.2:8080", "meta l4proto tcp dnat to 10.244.1.3:8080"]
    (svc,) = chain(rs.text, "svc-")
    assert svc[0] == "ip daddr 10.96.0.50 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade"
    assert rs.table == rules.table_name("node-a") and rs.table.startswith("rk-proxy-") and len(rs.table) == 19
    nft.check(rs, prefix=in_ns(ns))


def test_terminating_endpoints_serve_only_when_none_is_ready() -> None:
    old = endpoint("10.244.1.2", ready=False, serving=True, terminating=True)
    rs = render([service("web", "10.96.0.50")], [slice_("web", old)])
    assert [r[-1] for r in chain(rs.text, "ep-")] == ["meta l4proto tcp dnat to 10.244.1.2:8080"]
    rs = render([service("web", "10.96.0.50")], [slice_("web", old, endpoint("10.244.1.3"))])
    assert [r[-1] for r in chain(rs.text, "ep-")] == ["meta l4proto tcp dnat to 10.244.1.3:8080"]


def test_no_endpoints_reject_and_headless_externalname_are_left_out(ns: str) -> None:
    rs = render(
        [
            service("empty", "10.96.0.50", {"name": "d", "port": 53, "protocol": "UDP"}),
            service("headless", "None"),
            service("noip", None),
            {"metadata": {"namespace": "x", "name": "ext"}, "spec": {"type": "ExternalName", "externalName": "a.b"}},
        ],
        [],
    )
    assert "10.96.0.50 . udp . 53 : goto reject-chain" in rs.text
    assert "svc-" not in rs.text and "ep-" not in rs.text
    nft.check(rs, prefix=in_ns(ns))


def test_ports_are_matched_by_name_and_protocol(ns: str) -> None:
    svc = service("multi", "10.96.0.50", {"name": "a", "port": 80}, {"name": "b", "port": 81, "protocol": "SCTP"})
    sl = slice_("multi", endpoint("10.244.1.2"), port=8080, port_name="a")
    sl["ports"].append({"name": "b", "port": 9000, "protocol": "SCTP"})
    rs = render([svc], [sl])
    assert sorted(r[-1] for r in chain(rs.text, "ep-")) == [
        "meta l4proto sctp dnat to 10.244.1.2:9000",
        "meta l4proto tcp dnat to 10.244.1.2:8080",
    ]
    nft.check(rs, prefix=in_ns(ns))


def test_node_port_masquerades_with_policy_cluster_and_matches_only_this_node(ns: str) -> None:
    svc = service("np", "10.96.0.50", {"name": "http", "port": 80, "nodePort": 30080}, type="NodePort")
    rs = render([svc], [slice_("np", endpoint("10.244.1.2"))])
    assert "tcp . 30080 : goto ext-" in rs.text
    assert "elements = { 10.244.1.1 }" in rs.text  # nodeport-ips: this node's address only
    (ext,) = chain(rs.text, "ext-")
    assert ext[0] == "jump mark-for-masquerade" and ext[1].startswith("goto all-")
    nft.check(rs, prefix=in_ns(ns))


def test_external_traffic_policy_local(ns: str) -> None:
    port = {"name": "http", "port": 80, "nodePort": 30080}
    svc = service("np", "10.96.0.50", port, type="NodePort", externalTrafficPolicy="Local")
    rs = render([svc], [slice_("np", endpoint("10.244.1.2"), endpoint("10.244.1.3", node="node-b"))])
    (ext,) = chain(rs.text, "ext-")
    assert ext[0].startswith("ip saddr 10.244.0.0/16 goto all-") and ext[-1].startswith("goto loc-")
    (loc,) = chain(rs.text, "loc-")
    assert loc == [f"numgen random mod 1 vmap {{ 0 : goto {loc[0].split()[-2]} }}"]
    nft.check(rs, prefix=in_ns(ns))
    elsewhere = render([svc], [slice_("np", endpoint("10.244.1.3", node="node-b"))])
    assert chain(elsewhere.text, "ext-")[0][-1] == "drop"


def test_internal_traffic_policy_local(ns: str) -> None:
    svc = service("web", "10.96.0.50", internalTrafficPolicy="Local")
    rs = render([svc], [slice_("web", endpoint("10.244.1.2"), endpoint("10.244.1.3", node="node-b"))])
    assert [r[-1] for r in chain(rs.text, "ep-")] == ["meta l4proto tcp dnat to 10.244.1.2:8080"]
    elsewhere = render([svc], [slice_("web", endpoint("10.244.1.3", node="node-b"))])
    assert "10.96.0.50 . tcp . 80 : drop" in elsewhere.text
    nft.check(elsewhere, prefix=in_ns(ns))


def test_internal_traffic_policy_local_is_for_this_nodes_pods_when_their_cidr_is_known(ns: str) -> None:
    node = rules.Node(NODE.name, NODE.ips, NODE.cluster_cidr, ipaddress.IPv4Network("10.244.1.0/24"))
    svc = service("web", "10.96.0.50", internalTrafficPolicy="Local")
    rs = rules.render([svc], [slice_("web", endpoint("10.244.1.2"))], node)
    (chain_,) = chain(rs.text, "svc-")
    assert chain_[0] == "ip saddr != 10.244.1.0/24 fib saddr type != local return"
    nft.check(rs, prefix=in_ns(ns))
    cluster_policy = rules.render([service("web", "10.96.0.50")], [slice_("web", endpoint("10.244.1.2"))], node)
    assert "return" not in chain(cluster_policy.text, "svc-")[0][0]


def test_session_affinity_sets_per_endpoint(ns: str) -> None:
    svc = service(
        "s", "10.96.0.50", sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 30}}
    )
    rs = render([svc], [slice_("s", endpoint("10.244.1.2"), endpoint("10.244.1.3"))])
    assert len(rs.sets) == 2 and rs.text.count("timeout 30s") == 2
    (pick,) = chain(rs.text, "all-")
    assert [r.split()[2] for r in pick[:2]] == sorted(f"@{s}" for s in rs.sets if s.startswith("aff-"))
    for ep in chain(rs.text, "ep-"):
        assert ep[1].startswith("update @aff-") and ep[1].endswith("{ ip saddr }")
    nft.check(rs, prefix=in_ns(ns))


def test_rendering_is_deterministic_whatever_the_order() -> None:
    svcs = [service(f"s{i}", f"10.96.0.{i + 10}") for i in range(5)]
    slices = [slice_(f"s{i}", endpoint(f"10.244.1.{i + 2}"), endpoint("10.244.2.9")) for i in range(5)]
    assert render(svcs, slices).text == render(svcs[::-1], slices[::-1]).text


def test_duplicate_cluster_ip_and_node_port_keep_the_first(ns: str) -> None:
    a = service("a", "10.96.0.50", {"name": "http", "port": 80, "nodePort": 30080}, type="NodePort")
    b = service("b", "10.96.0.50", {"name": "http", "port": 80, "nodePort": 30080}, type="NodePort")
    rs = render([b, a], [slice_("a", endpoint("10.244.1.2")), slice_("b", endpoint("10.244.1.3"))])
    assert rs.text.count("10.96.0.50 . tcp . 80 :") == 1 and rs.text.count("tcp . 30080 :") == 1
    nft.check(rs, prefix=in_ns(ns))


@pytest.mark.parametrize(
    "bad",
    [
        service("x", "10.96.0.999"),
        service("x", "fd00::1"),
        service("x", "10.96.0.50", {"port": 0}),
        service("x", "10.96.0.50", {"port": 70000}),
        service("x", "10.96.0.50", {"port": "80"}),
        service("x", "10.96.0.50", {"port": 80, "protocol": "ICMP"}),
        service("x", "10.96.0.50", {"port": 80, "nodePort": -1}, type="NodePort"),
        service(
            "x", "10.96.0.50", sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 0}}
        ),
        {"metadata": {"namespace": "x", "name": "x"}, "spec": {"clusterIP": "10.96.0.50", "ports": "80"}},
        {"metadata": "x", "spec": {}},
        "not an object",
        {"metadata": {"name": 'x"; flush ruleset;'}, "spec": {"clusterIP": "1.2.3.4; flush ruleset", "ports": []}},
    ],
)
def test_a_malformed_service_is_left_out(bad: Any) -> None:
    rs = render([bad, service("good", "10.96.0.60")], [])
    assert "10.96.0.60 . tcp . 80 : goto reject-chain" in rs.text
    assert "10.96.0.50" not in rs.text and "flush" not in rs.text and "999" not in rs.text


def test_load_balancer_ingress_ips_are_external_destinations(ns: str) -> None:
    port = {"name": "http", "port": 80, "nodePort": 30080}
    svc = service("lb", "10.96.0.50", port, type="LoadBalancer")
    svc["status"] = {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}, {"hostname": "lb.example"}, {"ip": "fd00::1"}]}}
    rs = render([svc], [slice_("lb", endpoint("10.244.1.2"))])
    assert "192.0.2.10 . tcp . 80 : goto ext-" in rs.text and "tcp . 30080 : goto ext-" in rs.text
    nft.check(rs, prefix=in_ns(ns))


def test_a_malformed_endpoint_or_slice_is_left_out() -> None:
    sl = slice_("web", endpoint("10.244.1.2"), endpoint("10.244.1.300"), {"addresses": "x"}, endpoint("::1"))
    sl["endpoints"].append({"addresses": ["10.244.1.4"], "conditions": {"ready": "yes"}})
    bad_port = slice_("web", endpoint("10.244.1.5"), port=0, name="web-2")
    v6 = {**slice_("web", endpoint("10.244.1.6"), name="web-3"), "addressType": "IPv6"}
    rs = render([service("web", "10.96.0.50")], [sl, bad_port, v6, "nope", {"metadata": None}])
    assert [r[-1] for r in chain(rs.text, "ep-")] == ["meta l4proto tcp dnat to 10.244.1.2:8080"]


# -- random objects: never an exception, never a text nft refuses -------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70000),
    st.text(max_size=12),
    st.sampled_from([[], {}, [1], {"a": 1}, 1.5, float("nan")]),
)
ips = st.one_of(
    st.sampled_from(["10.96.0.50", "10.96.0.51", "None", "", "fd00::1", "10.244.1.2", "999.1.1.1"]),
    st.ip_addresses(v=4).map(str),
    scalars,
)
ports = st.one_of(st.integers(1, 3), st.integers(-1, 70000), scalars)
port_dicts = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.sampled_from(["", "http", "b"]), scalars),
        "port": ports,
        "nodePort": st.one_of(st.integers(30000, 30003), ports),
        "protocol": st.sampled_from(["TCP", "UDP", "SCTP", "ICMP", None, 7]),
    },
)
spec = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName", None]),
        "clusterIP": ips,
        "clusterIPs": st.one_of(st.lists(ips, max_size=2), scalars),
        "externalIPs": st.one_of(st.lists(ips, max_size=2), scalars),
        "ports": st.one_of(st.lists(st.one_of(port_dicts, scalars), max_size=3), scalars),
        "sessionAffinity": st.sampled_from(["ClientIP", "None", None]),
        "sessionAffinityConfig": st.one_of(
            scalars, st.fixed_dictionaries({"clientIP": st.fixed_dictionaries({"timeoutSeconds": ports})})
        ),
        "externalTrafficPolicy": st.sampled_from(["Local", "Cluster", None, 3]),
        "internalTrafficPolicy": st.sampled_from(["Local", "Cluster", None]),
    },
)
names = st.sampled_from(["a", "b", "c"])
meta = st.one_of(st.fixed_dictionaries({"namespace": st.sampled_from(["default", "x"]), "name": names}), scalars)
hostile_services = st.one_of(st.fixed_dictionaries({"metadata": meta, "spec": spec}), scalars)
good_ports = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["http", "http", "b"]),
            "port": st.sampled_from([80, 81]),
            "protocol": st.sampled_from(["TCP", "TCP", "TCP", "UDP", "SCTP"]),
        },
        optional={"nodePort": st.sampled_from([30000, 30001])},
    ),
    min_size=1,
    max_size=2,
)
good_services = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"namespace": st.just("default"), "name": names}),
        "spec": st.fixed_dictionaries(
            {"clusterIP": st.sampled_from(["10.96.0.50", "10.96.0.51"]), "ports": good_ports},
            optional={
                "type": st.sampled_from(["ClusterIP", "NodePort"]),
                "externalIPs": st.lists(st.sampled_from(["192.0.2.1", "192.0.2.2"]), max_size=1),
                "sessionAffinity": st.just("ClientIP"),
                "sessionAffinityConfig": st.fixed_dictionaries(
                    {"clientIP": st.fixed_dictionaries({"timeoutSeconds": st.sampled_from([10, 20])})}
                ),
                "externalTrafficPolicy": st.just("Local"),
                "internalTrafficPolicy": st.just("Local"),
            },
        ),
    }
)
services = st.lists(st.one_of(good_services, good_services, hostile_services), max_size=4)
endpoints_ = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "addresses": st.one_of(st.lists(ips, max_size=2), scalars),
            "conditions": st.one_of(
                scalars, st.fixed_dictionaries({}, optional={k: scalars for k in ("ready", "serving", "terminating")})
            ),
            "nodeName": st.one_of(st.sampled_from(["node-a", "node-b"]), scalars),
        },
    ),
    scalars,
)
hostile_slices = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": st.one_of(
                st.fixed_dictionaries(
                    {
                        "namespace": st.sampled_from(["default", "x"]),
                        "name": st.text(max_size=4),
                        "labels": st.one_of(st.fixed_dictionaries({"kubernetes.io/service-name": names}), scalars),
                    }
                ),
                scalars,
            ),
            "addressType": st.sampled_from(["IPv4", "IPv6", "FQDN", None]),
            "ports": st.one_of(st.lists(st.one_of(port_dicts, scalars), max_size=2), scalars),
            "endpoints": st.one_of(st.lists(endpoints_, max_size=3), scalars),
        }
    ),
    scalars,
)
good_endpoints = st.lists(
    st.fixed_dictionaries(
        {
            "addresses": st.lists(st.sampled_from(["10.244.1.2", "10.244.1.3", "10.244.2.2"]), min_size=1, max_size=1),
            "conditions": st.fixed_dictionaries(
                {k: st.booleans() for k in ("ready", "serving", "terminating")},
            ),
        },
        optional={"nodeName": st.sampled_from(["node-a", "node-b"])},
    ),
    min_size=1,
    max_size=3,
)
good_slices = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries(
            {
                "namespace": st.just("default"),
                "name": st.sampled_from(["s1", "s2", "s3"]),
                "labels": st.fixed_dictionaries({"kubernetes.io/service-name": names}),
            }
        ),
        "addressType": st.just("IPv4"),
        "ports": good_ports.map(lambda ps: [{**p, "port": p["port"] + 8000} for p in ps]),
        "endpoints": good_endpoints,
    }
)
slices = st.lists(st.one_of(good_slices, good_slices, hostile_slices), max_size=4)


@st.composite
def objects(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    """Services and slices: some that match (a Service and a slice of it with the same ports),
    some well formed at random, some hostile."""
    svcs, sls = draw(services), draw(slices)
    for _ in range(draw(st.integers(0, 3))):
        svc = draw(good_services)
        sl = draw(good_slices)
        sl["metadata"]["labels"]["kubernetes.io/service-name"] = svc["metadata"]["name"]
        sl["ports"] = [{**p, "port": p["port"] + 8000} for p in svc["spec"]["ports"]]
        svcs.insert(draw(st.integers(0, len(svcs))), svc)
        sls.insert(draw(st.integers(0, len(sls))), sl)
    return svcs, sls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects())
def test_random_objects_never_raise_nor_make_text_nft_refuses(ns: str, objs: Any) -> None:
    rs = rules.render(*objs, NODE)
    nft.check(rs, prefix=in_ns(ns))


def test_a_node_without_addresses_still_renders(ns: str) -> None:
    node = rules.Node("n", (), ipaddress.IPv4Network("10.244.0.0/16"))
    nft.check(rules.render([service("web", "10.96.0.50")], [], node), prefix=in_ns(ns))


def live(ns: str, table: str) -> dict[str, Any]:
    """The live table as nft reports it, without handles or order of creation."""
    out: dict[str, Any] = {}
    for item in json.loads(sh(*in_ns(ns), "nft", "-j", "list", "table", "ip", table))["nftables"]:
        for kind, body in item.items():
            body.pop("handle", None)
            if kind == "rule":
                out.setdefault(f"rule {body['chain']}", []).append(json.dumps(body["expr"], sort_keys=True))
            elif kind in ("chain", "set", "map"):
                elems = sorted(json.dumps(e, sort_keys=True) for e in body.pop("elem", []))
                out[f"{kind} {body['name']}"] = [json.dumps(body, sort_keys=True), *elems]
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects(), objects())
def test_an_update_in_place_leaves_what_a_replace_would(ns: str, one: Any, two: Any) -> None:
    first, second = rules.render(*one, NODE), rules.render(*two, NODE)
    nft.apply(second, prefix=in_ns(ns))
    want = live(ns, second.table)
    nft.apply(first, prefix=in_ns(ns))
    nft.apply(second, first, prefix=in_ns(ns))
    assert live(ns, second.table) == want
    nft.remove(second.table, prefix=in_ns(ns))


def test_an_update_of_a_big_table_writes_only_what_changed(ns: str) -> None:
    svcs = [service(f"s{i}", f"10.96.1.{i}", sessionAffinity="ClientIP") for i in range(1, 60)]
    sls = [slice_(f"s{i}", endpoint(f"10.244.1.{i}"), endpoint(f"10.244.2.{i}")) for i in range(1, 60)]
    first = rules.render(svcs, sls, NODE)
    sls[0] = slice_("s1", endpoint("10.244.3.1"))
    second = rules.render(svcs, sls, NODE)
    script = nft.update_script(second, first)
    assert len(script.splitlines()) < 20, script
    nft.apply(first, prefix=in_ns(ns))
    nft.apply(second, first, prefix=in_ns(ns))
    assert live(ns, second.table) == (nft.apply(second, prefix=in_ns(ns)) or live(ns, second.table))
