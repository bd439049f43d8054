"""What the endpointslicemirroring controller writes for a Service, its Endpoints and the slices
already mirrored, computed without I/O."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.controllers._slice_mirroring import MANAGED_BY, Plan, parse_ip, plan, repack
from machinery.objects import Obj

SVC: Obj = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}
P80 = {"name": "", "port": 80, "protocol": "TCP"}


def eps(*subsets: Obj, **meta: Any) -> Obj:
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u1", **meta}, "subsets": list(subsets)}


def held(p: Plan, n: int = 0) -> list[Obj]:
    """The plan's creates as the apiserver would hold them (named, versioned)."""
    out = []
    for i, body in enumerate(p.create):
        b = copy.deepcopy(body)
        b["metadata"].pop("generateName")
        b["metadata"] |= {"name": f"web-{n + i}", "resourceVersion": "7"}
        if not b["metadata"]["annotations"]:
            b["metadata"].pop("annotations")  # the apiserver leaves an empty map out
        out.append(b)
    return out


def addrs(slice_: Obj) -> dict[str, bool]:
    return {e["addresses"][0]: e["conditions"]["ready"] for e in slice_["endpoints"]}


def test_one_address_mirrors_to_one_slice_with_labels_owner_and_annotations() -> None:
    e = eps(
        {"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.1.2.3"}]},
        labels={"team": "a"},
        annotations={"keep": "me", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
    )
    p = plan(SVC, e, [])
    (s,) = p.create
    assert (p.update, p.delete, p.invalid, p.skipped) == ([], [], 0, 0)
    assert s["addressType"] == "IPv4" and s["ports"] == [P80]
    assert s["endpoints"] == [{"addresses": ["10.1.2.3"], "conditions": {"ready": True}}]
    assert s["metadata"]["generateName"] == "web-"
    assert s["metadata"]["labels"] == {
        "team": "a",
        "kubernetes.io/service-name": "web",
        "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
    }
    assert s["metadata"]["annotations"] == {"keep": "me"}
    (owner,) = s["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == ("Endpoints", "web", "u1", True)


def test_a_held_slice_as_wanted_is_not_written_and_a_change_updates_it_in_place() -> None:
    e = eps({"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.1.2.3"}]})
    have = held(plan(SVC, e, []))
    assert plan(SVC, e, have) == Plan()
    moved = eps({"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.2.3.4"}]})
    p = plan(SVC, moved, have)
    (s,) = p.update
    assert (p.create, p.delete) == ([], [])
    assert (s["metadata"]["name"], s["metadata"]["resourceVersion"]) == ("web-0", "7")
    assert addrs(s) == {"10.2.3.4": True}
    # a new port set is another key: the old slice's name is reused for it (an update, no delete)
    ported = eps({"ports": [{"port": 8080, "protocol": "TCP"}], "addresses": [{"ip": "10.2.3.4"}]})
    p = plan(SVC, ported, have)
    assert (p.create, p.delete, [s["metadata"]["name"] for s in p.update]) == ([], [], ["web-0"])
    assert p.update[0]["ports"] == [{**P80, "port": 8080}]
    # a label change alone is written too
    assert len(plan(SVC, eps(*e["subsets"], labels={"x": "y"}), have).update) == 1


def test_families_readiness_hostname_node_and_target_ref_carry_over() -> None:
    ref = {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "pa"}
    e = eps(
        {
            "ports": [{"port": 80, "protocol": "TCP"}],
            "addresses": [{"ip": "10.0.0.1", "hostname": "h", "nodeName": "n1", "targetRef": ref}],
            "notReadyAddresses": [{"ip": "fd00::1"}, {"ip": "::ffff:10.0.0.9"}],
        }
    )
    by_family = {s["addressType"]: s for s in plan(SVC, e, []).create}
    assert addrs(by_family["IPv4"]) == {"10.0.0.1": True, "10.0.0.9": False}
    assert addrs(by_family["IPv6"]) == {"fd00::1": False}
    first = by_family["IPv4"]["endpoints"][0]
    assert (first["hostname"], first["nodeName"], first["targetRef"]) == ("h", "n1", ref)


def test_invalid_addresses_are_counted_and_the_limit_applies_per_subset() -> None:
    e = eps(
        {
            "ports": [{"port": 80, "protocol": "TCP"}],
            "addresses": [{"ip": "0.0.0"}, {"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::1"}],
            "notReadyAddresses": [{"ip": "10.0.0.3"}],
        }
    )
    p = plan(SVC, e, [], max_per_subset=2)  # addresses are taken in IP order, as repacked
    assert (p.invalid, p.skipped, p.over_limit) == (1, 3, 2)
    (s,) = p.create
    assert addrs(s) == {"10.0.0.1": True, "10.0.0.2": True}


def test_one_slice_per_port_set_after_repacking() -> None:
    # subsets sharing a port merge, a not-ready sighting wins, ports with the same addresses
    # share a slice and ports with other addresses get their own
    a = {"name": "a", "port": 80, "protocol": "TCP"}
    b = {"name": "b", "port": 81, "protocol": "UDP"}
    c = {"name": "c", "port": 82, "protocol": "TCP"}
    e = eps(
        {"ports": [a], "addresses": [{"ip": "10.0.0.1"}]},
        {"ports": [a, b, c], "notReadyAddresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]},
        {"ports": [c], "addresses": [{"ip": "10.0.0.3"}]},
    )
    got = {tuple(p["name"] for p in s["ports"]): addrs(s) for s in plan(SVC, e, []).create}
    assert got == {
        ("a", "b"): {"10.0.0.1": False, "10.0.0.2": False},
        ("c",): {"10.0.0.1": False, "10.0.0.2": False, "10.0.0.3": True},
    }
    assert len(repack(e["subsets"])) == 2


def test_no_mirroring_deletes_every_held_slice() -> None:
    e = eps({"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.1.2.3"}]})
    have = held(plan(SVC, e, []))
    selected = {**SVC, "spec": {**SVC["spec"], "selector": {"app": "web"}}}
    skipped = eps(*e["subsets"], labels={"endpointslice.kubernetes.io/skip-mirror": "true"})
    leader = eps(*e["subsets"], annotations={"control-plane.alpha.kubernetes.io/leader": "{}"})
    for service, endpoints in ((None, e), (SVC, None), (selected, e), (SVC, skipped), (SVC, leader)):
        assert plan(service, endpoints, have) == Plan(delete=have)
    # an empty selector is no selector
    assert plan({**SVC, "spec": {"selector": {}}}, e, have) == Plan()
    # no addresses left: the slice goes
    assert plan(SVC, eps({"ports": [{"port": 80, "protocol": "TCP"}]}), have) == Plan(delete=have)


def test_a_recreated_endpoints_takes_its_slices_over() -> None:
    e = eps({"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.1.2.3"}]})
    have = held(plan(SVC, e, []))
    reborn = {**e, "metadata": {**e["metadata"], "uid": "u2"}}
    (s,) = plan(SVC, reborn, have).update
    assert s["metadata"]["ownerReferences"][0]["uid"] == "u2"


def test_duplicate_slices_of_one_key_collapse_to_one() -> None:
    e = eps({"ports": [{"port": 80, "protocol": "TCP"}], "addresses": [{"ip": "10.1.2.3"}]})
    have = held(plan(SVC, e, [])) + held(plan(SVC, e, []), n=1)
    p = plan(SVC, e, have)
    assert (p.create, p.update, [s["metadata"]["name"] for s in p.delete]) == ([], [], ["web-1"])


def test_parse_ip_reads_as_kube_does() -> None:
    assert parse_ip("010.001.2.3") == ("10.1.2.3", "IPv4")
    assert parse_ip("::FFFF:1.2.3.4") == ("1.2.3.4", "IPv4")
    assert parse_ip("FD00:0:0::1") == ("fd00::1", "IPv6")
    for bad in ("", "1.2.3", "256.0.0.1", "fe80::1%eth0", "\u0661.2.3.4", None, 7, ["1.2.3.4"]):
        assert parse_ip(bad) is None


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 70000), st.sampled_from(["", "a", "TCP", "10.0.0.1"]))
ips = st.one_of(
    st.ip_addresses().map(str),
    st.sampled_from(["010.0.0.1", "::ffff:1.2.3.4", "x", ""]),
    json_leaf,
    st.text(max_size=8),
)
address = st.fixed_dictionaries(
    {"ip": ips},
    optional={
        "hostname": st.one_of(json_leaf, st.text(max_size=5)),
        "nodeName": json_leaf,
        "targetRef": st.one_of(json_leaf, st.fixed_dictionaries({"uid": json_leaf, "name": json_leaf})),
    },
)
port = st.fixed_dictionaries(
    {}, optional={"name": json_leaf, "port": json_leaf, "protocol": json_leaf, "appProtocol": json_leaf}
)
subset = st.one_of(
    json_leaf,
    st.fixed_dictionaries(
        {},
        optional={
            "ports": st.one_of(json_leaf, st.lists(st.one_of(port, json_leaf), max_size=3)),
            "addresses": st.one_of(json_leaf, st.lists(st.one_of(address, json_leaf), max_size=4)),
            "notReadyAddresses": st.lists(address, max_size=3),
        },
    ),
)
meta = st.fixed_dictionaries(
    {"name": st.sampled_from(["web", ""])},
    optional={
        "labels": st.one_of(
            json_leaf, st.dictionaries(st.sampled_from(["a", "endpointslice.kubernetes.io/skip-mirror"]), json_leaf)
        ),
        "annotations": st.one_of(json_leaf, st.dictionaries(st.text(max_size=3), json_leaf)),
        "uid": json_leaf,
    },
)
endpoints_st = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"metadata": st.one_of(meta, json_leaf)},
        optional={"subsets": st.one_of(json_leaf, st.lists(subset, max_size=3))},
    ),
)
service_st = st.one_of(
    st.none(),
    json_leaf,
    st.fixed_dictionaries(
        {}, optional={"spec": st.one_of(json_leaf, st.fixed_dictionaries({}, optional={"selector": json_leaf}))}
    ),
)


@settings(max_examples=300, deadline=None)
@given(service_st, endpoints_st, st.integers(0, 3))
def test_hostile_endpoints_never_raise_and_stay_within_bounds(service: Any, endpoints: Any, limit: int) -> None:
    first = plan(service, endpoints, [], max_per_subset=limit)
    for s in first.create + first.update:
        assert len(s["endpoints"]) <= limit
        assert s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == MANAGED_BY
        for ep in s["endpoints"]:
            (ip,) = ep["addresses"]
            assert parse_ip(ip) == (ip, s["addressType"])
    # what it asked for, once held, is what it wants: a second pass writes nothing
    again = plan(service, endpoints, held(first), max_per_subset=limit)
    assert (again.create, again.update, again.delete) == ([], [], [])
