"""The /etc/resolv.conf the kubelet gives a pod's containers, as kube's kubelet writes it
(pkg/kubelet/network/dns/dns.go: GetPodDNS).

`dnsPolicy`:
* ClusterFirst (the default): the cluster's DNS server (--cluster-dns), the search path
  `<ns>.svc.<domain> svc.<domain> <domain>` before the node's, and `ndots:5`; a hostNetwork pod
  gets the node's file instead, and so does every pod while the kubelet has no cluster DNS (kube
  says so in an event; we in the log);
* ClusterFirstWithHostNet: ClusterFirst, hostNetwork or not;
* Default: the node's resolv.conf (nameservers, search, options);
* None: only what `dnsConfig` says.
`dnsConfig` is then merged in: its nameservers and searches appended (each once), its options
by name (the pod's value wins).  At most 3 nameservers and 32 search domains of at most 2048
characters in all are written, as kube's kubelet trims (it warns; validation already refuses a
pod that asks for more).  Pure: the caller reads the node's file and writes the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from machinery.objects import Obj

PATH = "/etc/resolv.conf"
HOST_RESOLV_CONF = "/etc/resolv.conf"
MAX_NAMESERVERS = 3
MAX_SEARCHES = 32
MAX_SEARCH_CHARS = 2048
CLUSTER_NDOTS = "5"


@dataclass(frozen=True)
class ClusterDNS:
    """The kubelet's --cluster-dns and --cluster-domain."""

    servers: tuple[str, ...]
    domain: str = "cluster.local"


@dataclass
class ResolvConf:
    nameservers: list[str] = field(default_factory=list)
    searches: list[str] = field(default_factory=list)
    options: list[tuple[str, str | None]] = field(default_factory=list)  # (name, value or None)

    def text(self) -> str:
        lines = []
        if self.searches:
            lines.append("search " + " ".join(self.searches))
        lines += [f"nameserver {ns}" for ns in self.nameservers]
        if self.options:
            lines.append("options " + " ".join(n if v is None else f"{n}:{v}" for n, v in self.options))
        return "".join(line + "\n" for line in lines)


def parse(text: str) -> ResolvConf:
    """A resolv.conf's nameservers, search domains and options (the last search/domain line wins,
    as the resolver reads it)."""
    out = ResolvConf()
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        key, rest = words[0], words[1:]
        if key == "nameserver" and rest:
            out.nameservers.append(rest[0])
        elif key in ("search", "domain"):
            out.searches = [d.rstrip(".") for d in rest if d != "."]
        elif key == "options":
            for opt in rest:
                name, sep, value = opt.partition(":")
                out.options = _merge_options(out.options, [(name, value if sep else None)])
    return out


def _merge_options(
    base: list[tuple[str, str | None]], more: Sequence[tuple[str, str | None]]
) -> list[tuple[str, str | None]]:
    out = list(base)
    for name, value in more:
        out = [(n, v) for n, v in out if n != name] + [(name, value)]
    return out


def _once(items: Sequence[str]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.append(item)
    return seen


def _trim_searches(searches: list[str]) -> list[str]:
    out: list[str] = []
    total = 0
    for domain in searches[:MAX_SEARCHES]:
        total += len(domain) + (1 if out else 0)
        if total > MAX_SEARCH_CHARS:
            break
        out.append(domain)
    return out


def _dns_config(pod: Obj) -> dict[str, Any]:
    config = (pod.get("spec") or {}).get("dnsConfig")
    return config if isinstance(config, dict) else {}


def effective_policy(pod: Obj, cluster: ClusterDNS | None) -> str:
    """What the pod's dnsPolicy comes to on this kubelet: ClusterFirst, Default or None."""
    spec = pod.get("spec") or {}
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    if policy == "None":
        return "None"
    if policy == "Default":
        return "Default"
    host_network = spec.get("hostNetwork") is True
    if policy == "ClusterFirst" and host_network:
        return "Default"
    if not cluster or not cluster.servers:
        return "Default"
    return "ClusterFirst"


def content(pod: Obj, cluster: ClusterDNS | None, host_text: str) -> str:
    """The pod's resolv.conf."""
    policy = effective_policy(pod, cluster)
    host = parse(host_text)
    if policy == "None":
        conf = ResolvConf()
    elif policy == "Default":
        conf = host
    else:
        assert cluster is not None
        namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
        domain = cluster.domain
        conf = ResolvConf(
            list(cluster.servers),
            [f"{namespace}.svc.{domain}", f"svc.{domain}", domain, *host.searches],
            [("ndots", CLUSTER_NDOTS)],
        )
    config = _dns_config(pod)
    nameservers = config.get("nameservers")
    searches = config.get("searches")
    options = config.get("options")
    conf.nameservers = (
        _once([*conf.nameservers, *(str(n) for n in nameservers if isinstance(n, str))])[:MAX_NAMESERVERS]
        if isinstance(nameservers, list)
        else _once(conf.nameservers)[:MAX_NAMESERVERS]
    )
    if isinstance(searches, list):
        conf.searches = _once([*conf.searches, *(str(s) for s in searches if isinstance(s, str))])
    conf.searches = _trim_searches(_once(conf.searches))
    if isinstance(options, list):
        extra = [
            (str(o["name"]), None if o.get("value") is None else str(o["value"]))
            for o in options
            if isinstance(o, dict) and isinstance(o.get("name"), str) and o["name"]
        ]
        conf.options = _merge_options(conf.options, extra)
    return conf.text()
