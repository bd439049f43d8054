"""components/kubelet/resolv.py: each dnsPolicy's resolv.conf as kube's kubelet writes it, the
dnsConfig merge, kube's limits, and hostile pod specs."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet import resolv
from components.kubelet.main import cluster_dns

HOST = (
    "# the node's\nnameserver 192.0.2.53\nnameserver 192.0.2.54\nsearch corp.example lab.example\n"
    "options edns0 ndots:2\n"
)
CLUSTER = resolv.ClusterDNS(("10.96.0.10",))


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "web"}, "spec": spec}


def test_cluster_first_is_the_cluster_server_the_search_path_and_ndots_5() -> None:
    assert resolv.content(pod(), CLUSTER, HOST) == (
        "search web.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\n"
        "nameserver 10.96.0.10\n"
        "options ndots:5\n"
    )


def test_default_host_network_and_no_cluster_dns_take_the_nodes_file() -> None:
    node = "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions edns0 ndots:2\n"
    assert resolv.content(pod(dnsPolicy="Default"), CLUSTER, HOST) == node
    assert resolv.content(pod(hostNetwork=True), CLUSTER, HOST) == node
    assert resolv.content(pod(), None, HOST) == node
    with_host_net = resolv.content(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), CLUSTER, HOST)
    assert with_host_net.startswith("search web.svc.cluster.local") and "nameserver 10.96.0.10\n" in with_host_net


def test_none_with_dns_config_and_the_merge() -> None:
    config = {
        "nameservers": ["1.1.1.1"],
        "searches": ["resolv.conf.local"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}],
    }
    assert resolv.content(pod(dnsPolicy="None", dnsConfig=config), CLUSTER, HOST) == (
        "search resolv.conf.local\nnameserver 1.1.1.1\noptions ndots:2 edns0\n"
    )
    merged = resolv.content(
        pod(dnsConfig={**config, "nameservers": ["10.96.0.10", "8.8.8.8", "9.9.9.9"]}), CLUSTER, HOST
    )
    assert "nameserver 10.96.0.10\nnameserver 8.8.8.8\nnameserver 9.9.9.9\n" in merged  # once each, at most 3
    assert merged.endswith("options ndots:2 edns0\n")  # the pod's value wins
    assert "lab.example resolv.conf.local\n" in merged


def test_kubes_limits_on_the_search_path() -> None:
    many = [f"d{i}.example" for i in range(40)]
    text = resolv.content(pod(dnsPolicy="None", dnsConfig={"searches": many}), None, "")
    assert text.split("\n")[0].split()[1:] == many[:32]
    long = ["x" * 250 + f".{i}" for i in range(20)]
    line = resolv.content(pod(dnsPolicy="None", dnsConfig={"searches": long}), None, "").split("\n")[0]
    assert len(line) - len("search ") <= 2048


def test_kubelet_flags_are_checked() -> None:
    assert cluster_dns("10.96.0.10", "cluster.local") == CLUSTER
    assert cluster_dns("", "cluster.local") is None
    for servers, domain, flag in (
        ("nonsense", "cluster.local", "--cluster-dns"),
        ("10.96.0.10", "Bad_Domain", "--cluster-domain"),
    ):
        try:
            cluster_dns(servers, domain)
        except ValueError as e:
            assert str(e).startswith(flag)
        else:
            raise AssertionError(f"{servers} {domain} accepted")


@settings(max_examples=200, deadline=None)
@given(
    spec=st.dictionaries(
        st.sampled_from(["dnsPolicy", "dnsConfig", "hostNetwork"]),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
            lambda inner: st.one_of(
                st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
            ),
            max_leaves=12,
        ),
    ),
    host=st.text(max_size=200),
)
def test_hostile_pods_and_host_files_never_raise(spec: dict[str, Any], host: str) -> None:
    text = resolv.content({"metadata": {"namespace": "x"}, "spec": spec}, CLUSTER, host)
    assert sum(line.startswith("nameserver ") for line in text.splitlines()) <= 3
