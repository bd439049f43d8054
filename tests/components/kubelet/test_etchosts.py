"""The kubelet-managed /etc/hosts, line for line as kube's kubelet writes it: the pod's own file
(localhost lines, the pod IP with its hostname, the FQDN first under a subdomain, then the
hostAliases), the node's file for a hostNetwork pod, and no managed file for a container that
mounts its own /etc/hosts."""

from __future__ import annotations

from components.kubelet import etchosts
from machinery.objects import Obj

LOCAL = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES = [{"ip": "123.45.67.89", "hostnames": ["foo.local", "bar.local"]}, {"ip": "::2", "hostnames": ["v6"]}]


def pod(**spec: object) -> Obj:
    return {"metadata": {"name": "web-0", "namespace": "shop"}, "spec": {"containers": [], **spec}}


def test_a_pod_on_the_pod_network_gets_its_ip_and_hostname_then_its_aliases() -> None:
    got = etchosts.content(pod(hostAliases=ALIASES), ["10.88.0.7"], "the node's file")
    assert got == (
        "# Kubernetes-managed hosts file.\n" + LOCAL + "10.88.0.7\tweb-0\n"
        "\n# Entries added by HostAliases.\n123.45.67.89\tfoo.local\tbar.local\n::2\tv6\n"
    )


def test_a_subdomain_puts_the_fqdn_first_and_spec_hostname_wins_over_the_name() -> None:
    got = etchosts.managed(pod(hostname="db", subdomain="backends"), ["10.88.0.7", "fd00::7"])
    assert got == (
        "# Kubernetes-managed hosts file.\n" + LOCAL + "10.88.0.7\tdb.backends.shop.svc.cluster.local\tdb\n"
        "fd00::7\tdb.backends.shop.svc.cluster.local\tdb\n"
    )


def test_a_long_name_is_cut_to_a_dns_label() -> None:
    name = "a" * 62 + "-b"
    assert etchosts.hostname_and_domain({"metadata": {"name": name}, "spec": {}}) == ("a" * 62, "")


def test_a_host_network_pod_gets_the_nodes_file_with_its_aliases_under_another_header() -> None:
    node = "127.0.0.1 localhost\n127.0.0.1 vm\n"
    got = etchosts.content(pod(hostNetwork=True, hostAliases=ALIASES[:1]), ["192.168.1.5"], node)
    assert got == (
        "# Kubernetes-managed hosts file (host network).\n" + node + "\n# Entries added by HostAliases.\n"
        "123.45.67.89\tfoo.local\tbar.local\n"
    )
    # conformance tells the two apart by the first header: this one is not "managed"
    assert not got.startswith("# Kubernetes-managed hosts file.")
    assert etchosts.of_host_network(pod(hostNetwork=True), node) == etchosts.HEADER_HOST_NETWORK + node


def test_a_container_that_mounts_its_own_etc_hosts_keeps_it() -> None:
    own = {"name": "c", "volumeMounts": [{"name": "h", "mountPath": "/etc/hosts-original"}]}
    assert etchosts.wanted(own, ["10.0.0.1"], pod())
    own["volumeMounts"].append({"name": "h", "mountPath": "/etc/hosts"})  # type: ignore[attr-defined]
    assert not etchosts.wanted(own, ["10.0.0.1"], pod())
    assert not etchosts.wanted({"name": "c"}, [], pod())  # no IP yet (kube waits for the sandbox's)
    assert etchosts.wanted({"name": "c"}, [], pod(hostNetwork=True))
