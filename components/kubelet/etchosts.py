"""The /etc/hosts file the kubelet gives a pod's containers, as kube's kubelet writes it
(pkg/kubelet/kubelet_pods.go: managedHostsFileContent, nodeHostsFileContent).

A pod on the pod network gets a file of its own: kube's header, the localhost lines, one line
per pod IP naming the pod's hostname (its FQDN first when it has a subdomain), then the pod's
`hostAliases`.  A hostNetwork pod gets the node's file under a header of its own, with the
aliases appended: its containers resolve as the node does.  A container that mounts something
at /etc/hosts itself keeps its own (`wanted`).  Pure: the caller reads the node's file and
writes the result (podvolumes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from machinery.objects import Obj

PATH = "/etc/hosts"
CLUSTER_DOMAIN = "cluster.local"  # kube's kubelet takes --cluster-domain; kubeadm's default
HEADER = "# Kubernetes-managed hosts file.\n"
HEADER_HOST_NETWORK = "# Kubernetes-managed hosts file (host network).\n"
_LOCAL = (
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
_HOSTNAME_MAX = 63


def host_network(pod: Obj) -> bool:
    return (pod.get("spec") or {}).get("hostNetwork") is True


def wanted(container: Obj, pod_ips: Sequence[str], pod: Obj) -> bool:
    """kube's shouldMountHostsFile and makeMounts: the pod has an IP (or the node's network)
    and the container does not mount anything at /etc/hosts itself."""
    if not pod_ips and not host_network(pod):
        return False
    mounts = container.get("volumeMounts") or ()
    return not any(isinstance(m, dict) and m.get("mountPath") == PATH for m in mounts)


def hostname_and_domain(pod: Obj, cluster_domain: str = CLUSTER_DOMAIN) -> tuple[str, str]:
    """kube's GeneratePodHostNameAndDomain: spec.hostname or the pod's name, cut to 63
    characters (no trailing '-' or '.'), and `<subdomain>.<namespace>.svc.<cluster domain>`
    when the pod has a subdomain.  The apiserver checked both are DNS labels."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    hostname = str(spec.get("hostname") or meta.get("name") or "")
    if len(hostname) > _HOSTNAME_MAX:
        hostname = hostname[:_HOSTNAME_MAX].rstrip("-.")
    subdomain = spec.get("subdomain")
    domain = f"{subdomain}.{meta.get('namespace') or 'default'}.svc.{cluster_domain}" if subdomain else ""
    return hostname, domain


def _aliases(pod: Obj) -> str:
    """The pod's hostAliases, one line per IP with all its names (nothing when it has none)."""
    aliases: Any = (pod.get("spec") or {}).get("hostAliases") or []
    lines = [
        f"{a.get('ip') or ''}\t" + "\t".join(str(h) for h in a.get("hostnames") or ()) + "\n"
        for a in aliases
        if isinstance(a, dict)
    ]
    return "\n# Entries added by HostAliases.\n" + "".join(lines) if lines else ""


def managed(pod: Obj, pod_ips: Sequence[str], cluster_domain: str = CLUSTER_DOMAIN) -> str:
    """The file of a pod on the pod network."""
    hostname, domain = hostname_and_domain(pod, cluster_domain)
    names = f"{hostname}.{domain}\t{hostname}" if domain else hostname
    return HEADER + _LOCAL + "".join(f"{ip}\t{names}\n" for ip in pod_ips) + _aliases(pod)


def of_host_network(pod: Obj, node_hosts: str) -> str:
    """The file of a hostNetwork pod: the node's, with the pod's aliases appended."""
    return HEADER_HOST_NETWORK + node_hosts + _aliases(pod)


def content(pod: Obj, pod_ips: Sequence[str], node_hosts: str, cluster_domain: str = CLUSTER_DOMAIN) -> str:
    """kube's ensureHostsFile: which of the two files the pod gets."""
    return of_host_network(pod, node_hosts) if host_network(pod) else managed(pod, pod_ips, cluster_domain)
