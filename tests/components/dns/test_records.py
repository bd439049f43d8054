"""The zone's answers: each record type, NXDOMAIN against NODATA, headless Services with host
names and terminating endpoints, ExternalName, reverse names; and that no object breaks it."""

from __future__ import annotations

from typing import Any

from dnslib import QTYPE, RCODE
from hypothesis import given, settings
from hypothesis import strategies as st

from components.dns.records import Zone

D = "cluster.local"


def service(ns: str, name: str, cluster_ip: str | None = "10.96.0.20", **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"name": "http", "port": 80, "protocol": "TCP"}])
    if cluster_ip is not None:
        spec["clusterIP"] = cluster_ip
    return {"metadata": {"namespace": ns, "name": name}, "spec": spec}


def endpoint_slice(
    ns: str, name: str, svc: str, endpoints: list[dict[str, Any]], family: str = "IPv4"
) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name, "labels": {"kubernetes.io/service-name": svc}},
        "addressType": family,
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def ask(zone: Zone, name: str, qtype: str = "A") -> tuple[int, list[str]]:
    got = zone.answer(name, getattr(QTYPE, qtype))
    assert got is not None, f"{name} is not the zone's"
    return got.rcode, [str(r.rdata) for r in got.answers]


def zone() -> Zone:
    z = Zone(D)
    z.set_namespace({"metadata": {"name": "ns1"}})
    z.set_service(service("default", "kubernetes", "10.96.0.1", ports=[{"name": "https", "port": 443}]))
    z.set_service(service("ns1", "web", "10.96.0.20"))
    z.set_service(service("ns1", "dual", "10.96.0.21", clusterIPs=["10.96.0.21", "fd00::21"]))
    z.set_service(service("ns1", "hl", "None"))
    z.set_slice(
        endpoint_slice(
            "ns1",
            "hl-abc",
            "hl",
            [
                {"addresses": ["10.244.1.5"], "hostname": "web-0", "conditions": {"ready": True}},
                {"addresses": ["10.244.1.6"]},  # ready unset: ready
                {"addresses": ["10.244.1.7"], "conditions": {"ready": False, "serving": True, "terminating": True}},
            ],
        )
    )
    z.set_service(service("ns1", "ext", None, type="ExternalName", externalName="example.com."))
    return z


def test_clusterip_a_and_nodata_for_aaaa() -> None:
    z = zone()
    assert ask(z, "kubernetes.default.svc.cluster.local") == (RCODE.NOERROR, ["10.96.0.1"])
    assert ask(z, "Kubernetes.Default.SVC.cluster.local.") == (RCODE.NOERROR, ["10.96.0.1"])
    rcode, answers = ask(z, "kubernetes.default.svc.cluster.local", "AAAA")
    assert (rcode, answers) == (RCODE.NOERROR, [])  # NODATA
    got = z.answer("kubernetes.default.svc.cluster.local", QTYPE.AAAA)
    assert got is not None and [QTYPE[r.rtype] for r in got.authority] == ["SOA"]
    assert ask(z, "dual.ns1.svc.cluster.local", "AAAA") == (RCODE.NOERROR, ["fd00::21"])


def test_answers_carry_the_ttl_and_negative_ones_the_soa() -> None:
    z = Zone(D, ttl=30)
    z.set_service(service("ns1", "web"))
    got = z.answer("web.ns1.svc.cluster.local", QTYPE.A)
    assert got is not None and [r.ttl for r in got.answers] == [30] and not got.authority
    neg = z.answer("nope.ns1.svc.cluster.local", QTYPE.A)
    assert neg is not None and neg.rcode == RCODE.NXDOMAIN
    (soa,) = neg.authority
    assert str(soa.rname) == "cluster.local." and soa.rdata.times[-1] == 30


def test_nxdomain_against_nodata() -> None:
    z = zone()
    assert ask(z, "nope.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "web.nope.svc.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "a.b.c.d.e.f.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "web.ns1.xyz.cluster.local")[0] == RCODE.NXDOMAIN
    for exists in ("cluster.local", "svc.cluster.local", "pod.cluster.local", "ns1.svc.cluster.local"):
        assert ask(z, exists) == (RCODE.NOERROR, []), exists
    assert ask(z, "nons.svc.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "web.ns1.svc.cluster.local", "TXT") == (RCODE.NOERROR, [])
    assert ask(z, "_http._tcp.web.ns1.svc.cluster.local", "A") == (RCODE.NOERROR, [])
    assert ask(z, "_tcp.web.ns1.svc.cluster.local", "SRV") == (RCODE.NOERROR, [])


def test_apex_soa_ns_and_schema_version() -> None:
    z = zone()
    rcode, (soa,) = ask(z, "cluster.local", "SOA")
    assert rcode == RCODE.NOERROR and soa.startswith("ns.dns.cluster.local. hostmaster.cluster.local.")
    assert ask(z, "cluster.local", "NS") == (RCODE.NOERROR, ["ns.dns.cluster.local."])
    assert ask(z, "dns-version.cluster.local", "TXT") == (RCODE.NOERROR, ['"1.1.0"'])


def test_srv_named_and_portless() -> None:
    z = zone()
    srv = "0 100 443 kubernetes.default.svc.cluster.local."
    got = z.answer("_https._tcp.kubernetes.default.svc.cluster.local", QTYPE.SRV)
    assert got is not None and [str(r.rdata) for r in got.answers] == [srv]
    assert [str(r.rdata) for r in got.additional] == ["10.96.0.1"]
    assert ask(z, "kubernetes.default.svc.cluster.local", "SRV")[1] == [srv]
    assert ask(z, "_http._udp.kubernetes.default.svc.cluster.local", "SRV")[0] == RCODE.NXDOMAIN
    assert ask(z, "https.tcp.kubernetes.default.svc.cluster.local", "SRV")[0] == RCODE.NXDOMAIN


def test_headless_ready_endpoints_hostnames_and_srv() -> None:
    z = zone()
    assert ask(z, "hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.5", "10.244.1.6"])  # not the terminating
    assert ask(z, "web-0.hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.5"])
    assert ask(z, "10-244-1-6.hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.6"])
    assert ask(z, "10-244-1-7.hl.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "_http._tcp.hl.ns1.svc.cluster.local", "SRV")[1] == [
        "0 50 8080 web-0.hl.ns1.svc.cluster.local.",
        "0 50 8080 10-244-1-6.hl.ns1.svc.cluster.local.",
    ]
    assert ask(z, "web-0.hl.ns1.svc.cluster.local", "SRV")[1] == ["0 100 8080 web-0.hl.ns1.svc.cluster.local."]


def test_headless_without_ready_endpoints_is_nxdomain_unless_it_publishes_not_ready() -> None:
    z = Zone(D)
    z.set_service(service("ns1", "hl", "None"))
    assert ask(z, "hl.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    sl = endpoint_slice("ns1", "hl-1", "hl", [{"addresses": ["10.244.1.9"], "conditions": {"ready": False}}])
    z.set_slice(sl)
    assert ask(z, "hl.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    z.set_service(service("ns1", "hl", "None", publishNotReadyAddresses=True))
    assert ask(z, "hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.9"])
    assert ask(z, "9.1.244.10.in-addr.arpa", "PTR") == (RCODE.NOERROR, ["10-244-1-9.hl.ns1.svc.cluster.local."])
    tolerate = service("ns1", "hl", "None")
    tolerate["metadata"]["annotations"] = {"service.alpha.kubernetes.io/tolerate-unready-endpoints": "true"}
    z.set_service(tolerate)
    assert ask(z, "hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.9"])
    z.delete_slice(sl)
    assert ask(z, "hl.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN


def test_an_address_in_two_slices_is_answered_once() -> None:
    z = Zone(D)
    z.set_service(service("ns1", "hl", "None"))
    for name in ("hl-1", "hl-2"):
        z.set_slice(endpoint_slice("ns1", name, "hl", [{"addresses": ["10.244.1.9"]}]))
    assert ask(z, "hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.244.1.9"])


def test_external_name_is_a_cname_to_chase() -> None:
    z = zone()
    got = z.answer("ext.ns1.svc.cluster.local", QTYPE.CNAME)
    assert got is not None and [str(r.rdata) for r in got.answers] == ["example.com."] and got.chase is None
    got = z.answer("ext.ns1.svc.cluster.local", QTYPE.A)
    assert got is not None and got.chase == "example.com" and QTYPE[got.answers[0].rtype] == "CNAME"
    z.set_service(service("ns1", "alias", None, type="ExternalName", externalName="web.ns1.svc.cluster.local"))
    assert ask(z, "alias.ns1.svc.cluster.local") == (RCODE.NOERROR, ["web.ns1.svc.cluster.local.", "10.96.0.20"])


def test_external_name_loops_end() -> None:
    z = Zone(D)
    z.set_service(service("ns1", "a", None, type="ExternalName", externalName="b.ns1.svc.cluster.local"))
    z.set_service(service("ns1", "b", None, type="ExternalName", externalName="a.ns1.svc.cluster.local"))
    rcode, answers = ask(z, "a.ns1.svc.cluster.local")
    assert rcode == RCODE.NOERROR and 0 < len(answers) <= 10


def test_pod_records_insecure() -> None:
    z = zone()
    assert ask(z, "10-244-1-5.ns1.pod.cluster.local") == (RCODE.NOERROR, ["10.244.1.5"])
    assert ask(z, "10-244-1-5.ns1.pod.cluster.local", "AAAA") == (RCODE.NOERROR, [])
    assert ask(z, "fd00--5.ns1.pod.cluster.local", "AAAA") == (RCODE.NOERROR, ["fd00::5"])
    assert ask(z, "10-244-1-5.nons.pod.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "10-244-1-500.ns1.pod.cluster.local")[0] == RCODE.NXDOMAIN
    assert ask(z, "web.ns1.pod.cluster.local")[0] == RCODE.NXDOMAIN


def test_ptr_for_cluster_ips_and_endpoints_and_none_for_others() -> None:
    z = zone()
    assert ask(z, "1.0.96.10.in-addr.arpa", "PTR") == (RCODE.NOERROR, ["kubernetes.default.svc.cluster.local."])
    assert ask(z, "5.1.244.10.in-addr.arpa", "PTR") == (RCODE.NOERROR, ["web-0.hl.ns1.svc.cluster.local."])
    assert ask(z, "6.1.244.10.in-addr.arpa", "PTR") == (RCODE.NOERROR, ["10-244-1-6.hl.ns1.svc.cluster.local."])
    assert ask(z, "1.0.96.10.in-addr.arpa", "A") == (RCODE.NOERROR, [])
    assert z.answer("7.1.244.10.in-addr.arpa", QTYPE.PTR) is None  # terminating: not ready, not ours
    nibbles = ".".join(reversed("fd000000000000000000000000000021"))
    assert ask(z, f"{nibbles}.ip6.arpa", "PTR") == (RCODE.NOERROR, ["dual.ns1.svc.cluster.local."])
    assert z.answer("9.9.9.9.in-addr.arpa", QTYPE.PTR) is None  # forwarded
    assert z.answer("0.96.10.in-addr.arpa", QTYPE.PTR) is None
    assert z.answer("example.com", QTYPE.A) is None


def test_updates_and_deletes_show_at_once() -> None:
    z = zone()
    z.set_service(service("ns1", "web", "10.96.0.99"))
    assert ask(z, "web.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.96.0.99"])
    assert z.answer("20.0.96.10.in-addr.arpa", QTYPE.PTR) is None
    z.delete_service({"metadata": {"namespace": "ns1", "name": "web"}})
    assert ask(z, "web.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    assert z.answer("99.0.96.10.in-addr.arpa", QTYPE.PTR) is None


def test_malformed_objects_are_skipped() -> None:
    z = Zone(D)
    bad: list[Any] = [
        None,
        [],
        {"metadata": None},
        {"metadata": {"namespace": "ns1", "name": "Bad_Name"}, "spec": {"clusterIP": "10.96.0.1"}},
        {"metadata": {"namespace": "ns1", "name": "x"}, "spec": {"clusterIP": "not-an-ip"}},
        {"metadata": {"namespace": "ns1", "name": "y"}, "spec": {"type": "ExternalName", "externalName": "a..b"}},
        {"metadata": {"namespace": "ns1", "name": "z"}, "spec": "nope"},
    ]
    for obj in bad:
        z.set_service(obj)
        z.set_slice(obj)
        z.delete_service(obj)
    assert ask(z, "x.ns1.svc.cluster.local")[0] == RCODE.NXDOMAIN
    z.set_service(service("ns1", "hl", "None"))
    z.set_slice(endpoint_slice("ns1", "s", "hl", [{"addresses": ["fd00::1"]}, {"addresses": "10.0.0.1"}]))
    z.set_slice(endpoint_slice("ns1", "f", "hl", [{"addresses": ["a.example"]}], family="FQDN"))
    z.set_slice(endpoint_slice("ns1", "o", "hl", [{"addresses": ["10.0.0.2"], "hostname": "Not A Label"}]))
    assert ask(z, "hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.0.0.2"])
    assert ask(z, "10-0-0-2.hl.ns1.svc.cluster.local") == (RCODE.NOERROR, ["10.0.0.2"])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.sampled_from(["None", "10.96.0.1", "::1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
keys = st.sampled_from(["metadata", "spec", "endpoints", "ports", "addressType", "labels", "clusterIP", "type"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(keys, json_values, max_size=5), max_size=6), st.sampled_from(["A", "SRV", "PTR"]))
def test_random_objects_never_raise(objs: list[dict[str, Any]], qtype: str) -> None:
    z = zone()
    for obj in objs:
        obj.setdefault("metadata", {"namespace": "ns1", "name": "hl", "labels": {"kubernetes.io/service-name": "hl"}})
        z.set_service(obj)
        z.set_slice(obj)
    for name in ("hl.ns1.svc.cluster.local", "_http._tcp.hl.ns1.svc.cluster.local", "1.0.96.10.in-addr.arpa"):
        z.answer(name, getattr(QTYPE, qtype))
    for obj in objs:
        z.delete_slice(obj)
        z.delete_service(obj)


names = st.sampled_from(["a", "b", "c"])
ips = st.sampled_from(["10.96.0.1", "10.96.0.2", "10.244.0.1", "10.244.0.2", "fd00::1", "None", "bad"])
service_objs = st.builds(
    lambda ns, name, ip, external: (
        service(ns, name, ip)
        if not external
        else service(ns, name, None, type="ExternalName", externalName=f"{name}.example.com")
    ),
    names,
    names,
    ips,
    st.booleans(),
)
slice_objs = st.builds(
    lambda ns, name, svc, addrs, ready, host: endpoint_slice(
        ns,
        name,
        svc,
        [{"addresses": [a], "conditions": {"ready": ready}, **({"hostname": host} if host else {})} for a in addrs],
        "IPv6" if any(":" in a for a in addrs) else "IPv4",
    ),
    names,
    names,
    names,
    st.lists(ips, max_size=3),
    st.booleans(),
    st.sampled_from([None, "h0", "h1"]),
)
ops = st.lists(st.tuples(st.sampled_from(["set", "delete"]), service_objs | slice_objs), max_size=25)


def everything(z: Zone) -> list[Any]:
    out = []
    for ns in "abc":
        for name in "abc":
            for prefix in ("", "h0.", "h1.", "10-244-0-1.", "_http._tcp."):
                for qtype in ("A", "AAAA", "SRV"):
                    got = z.answer(f"{prefix}{name}.{ns}.svc.cluster.local", getattr(QTYPE, qtype))
                    assert got is not None
                    out.append((got.rcode, sorted(str(r) for r in got.answers), sorted(str(r) for r in got.additional)))
    for ip in ("1.0.96.10", "2.0.96.10", "1.0.244.10", "2.0.244.10"):
        got = z.answer(f"{ip}.in-addr.arpa", QTYPE.PTR)
        out.append(None if got is None else sorted(str(r) for r in got.answers))
    return out


@settings(max_examples=60, deadline=None)
@given(ops)
def test_the_index_kept_by_events_answers_as_one_built_from_the_end_state(steps: list[tuple[str, Any]]) -> None:
    z = Zone(D)
    state: dict[tuple[str, str, str], Any] = {}
    for op, obj in steps:
        kind = "slice" if "addressType" in obj else "service"
        key = (kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if op == "set":
            (z.set_slice if kind == "slice" else z.set_service)(obj)
            state[key] = obj
        else:
            (z.delete_slice if kind == "slice" else z.delete_service)(obj)
            state.pop(key, None)
    fresh = Zone(D)
    for (kind, _, _), obj in state.items():
        (fresh.set_slice if kind == "slice" else fresh.set_service)(obj)
    assert everything(z) == everything(fresh)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.fixed_dictionaries({}, optional={k: json_values for k in ("name", "protocol", "port")}), max_size=3),
    st.lists(st.dictionaries(st.sampled_from(["addresses", "hostname", "conditions"]), json_values), max_size=3),
    json_values,
    json_values,
)
def test_random_fields_in_well_formed_objects_never_raise(
    ports: list[dict[str, Any]], endpoints: list[dict[str, Any]], annotations: Any, cluster_ips: Any
) -> None:
    z = zone()
    obj = service("ns1", "hl", "None", ports=ports, clusterIPs=cluster_ips)
    obj["metadata"]["annotations"] = annotations
    z.set_service(obj)
    sl = endpoint_slice("ns1", "hl-abc", "hl", endpoints)
    sl["ports"] = ports
    z.set_slice(sl)
    for name in ("hl.ns1.svc.cluster.local", "_http._tcp.hl.ns1.svc.cluster.local", "5.1.244.10.in-addr.arpa"):
        for qtype in (QTYPE.A, QTYPE.SRV, QTYPE.PTR):
            z.answer(name, qtype)
