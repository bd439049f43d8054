"""Services and EndpointSlices in, one nftables table out: kube-proxy's nftables mode, pure.

`render(services, slices, node)` returns a `Ruleset`: the text of `table ip rk-proxy-<hash>`
and the names of what it declares (so `nft.py` can update a live table in place).  Same input,
same text: everything is sorted, and every name in the table is generated (`svc-<hash>`,
`ep-<hash>`, `aff-<hash>`), never an object's name.  Objects are hostile input: one that does
not parse (a bad IP, a port out of range, a list that is not a list) is left out with a log
line; only `ipaddress`-parsed addresses and ints 1-65535 reach the text.

The table, as kube's (pkg/proxy/nftables/proxier.go), with its own names:

* `nat-prerouting` (dstnat, from pods) and `nat-output` (dstnat, from the host) jump to
  `services`: `ip daddr . meta l4proto . th dport vmap @service-ips` (ClusterIPs, externalIPs
  and LoadBalancer ingress IPs),
  then `ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`.  NodePorts
  match this node's own IPs only: the nodes of one machine share a kernel, and each node's proxy
  owns one table, so node A's table must not answer node B's address.
* `svc-H` (a ClusterIP) marks traffic from outside the cluster CIDR for masquerade, then picks
  an endpoint; `ext-H` (NodePort, externalIP) masquerades with externalTrafficPolicy Cluster;
  with Local it sends pods' and the host's own traffic to every endpoint (masquerading the
  host's) and everyone else to this node's endpoints only, keeping the client's address.
* A pick chain holds `ip saddr @aff-E goto ep-E` per endpoint when sessionAffinity is ClientIP,
  then `numgen random mod N vmap { i : goto ep-E }`.  `ep-E` masquerades hairpin traffic (the
  endpoint reaching itself), refreshes `aff-E` (a set of client addresses with the affinity
  timeout, so the next connection from that client within it lands here again), and DNATs.
* No endpoints: the filter chains at input/forward/output (priority -110, new connections
  only) reject through `no-endpoint-services` / `no-endpoint-nodeports` (ICMP port
  unreachable: a refused connection at once); a Local policy with endpoints only elsewhere
  drops, as kube does.
* A ClusterIP on a port none of its Services has is refused too (`cluster-ips`, checked in
  forward and, for the host's own connections, in output after the DNAT).
* `nat-postrouting` masquerades what was marked (mark bit 0x4000, cleared on the way out).

The nodes of one machine share a kernel, so every node's table sees every pod's packets, and
the first table to DNAT a connection wins.  Policies about "this node" hold through that:
NodePorts match the node's own addresses, and with the node's pod CIDR known (`--pod-cidr`)
an internalTrafficPolicy Local ClusterIP is DNATed by a node's table only for that node's pods
and the host, so each pod reaches its own node's endpoints (or is dropped where there are none).
Without it, whichever node's table comes first serves.

Replies from a pod on the same bridge as its client: the server answers the client directly,
over the bridge, so the reply would skip the host's conntrack and reach the client from the
pod's own address, not the ClusterIP.  We rely on br_netfilter as kube-proxy does
(net.bridge.bridge-nf-call-iptables = 1, the kernel's default when br_netfilter is loaded and
per network namespace on recent kernels): bridged frames then pass the IP hooks, conntrack
un-DNATs the reply, and the server sees the client's real address.  Masquerading all pod
traffic instead would work without it but would hide every client's address; we masquerade
only where a reply could not otherwise come back (hairpin, off-cluster sources, NodePorts with
policy Cluster).  The proxy sets the sysctl (and net.ipv4.ip_forward, which a DNAT from a pod
to another node's pod needs) at start.

Hairpin (a pod reaching itself through its Service) needs one more thing of the node: with
br_netfilter the DNAT back to the sender is bridged out of the very port it came in by, which a
bridge does only for a port in hairpin mode (`ip link set VETH type bridge_slave hairpin on`,
as kubelet's --hairpin-mode=hairpin-veth does).  Then the masquerade in `ep-E` makes the pod
answer the gateway, and the reply comes back through conntrack.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("raftkube.proxy")

TABLE_PREFIX = "rk-proxy-"
MASQ_MARK = 0x4000
PROTOCOLS = {"TCP": "tcp", "UDP": "udp", "SCTP": "sctp"}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
DEFAULT_AFFINITY_TIMEOUT = 10800  # kube's default for ClientIP affinity
MAX_AFFINITY_TIMEOUT = 86400  # kube's validation maximum


class Malformed(ValueError):
    """An object, or a part of it, that cannot become a rule; the message says what."""


# what reading a hostile object may raise besides Malformed (an unhashable protocol, say): the
# object is left out, whatever it was
HOSTILE = (Malformed, KeyError, TypeError, ValueError, AttributeError, IndexError)


@dataclass(frozen=True, slots=True)
class Node:
    """Who renders: the node's name, its addresses (NodePorts answer on these), the cluster's
    pod CIDR (ClusterIP traffic from outside it is masqueraded) and, when known, the node's own
    pod CIDR (see `internalTrafficPolicy` in the module docstring)."""

    name: str
    ips: tuple[ipaddress.IPv4Address, ...]
    cluster_cidr: ipaddress.IPv4Network
    pod_cidr: ipaddress.IPv4Network | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    ip: ipaddress.IPv4Address
    port: int
    ready: bool
    serving: bool
    terminating: bool
    node: str | None  # None: on no node (fine for policy Cluster, never local)


@dataclass(frozen=True, slots=True)
class ServicePort:
    """One port of one Service, with everything the rules need."""

    key: str  # namespace/name:portname/protocol, only ever hashed
    protocol: str  # tcp, udp or sctp
    port_name: str
    port: int
    cluster_ips: tuple[ipaddress.IPv4Address, ...]
    external_ips: tuple[ipaddress.IPv4Address, ...]
    node_port: int | None
    affinity_timeout: int | None  # seconds, with sessionAffinity ClientIP
    external_local: bool
    internal_local: bool


@dataclass(frozen=True)
class Ruleset:
    """A rendered table: `text` is the whole `table ip NAME { ... }`; the other fields are its
    parts that change with the objects (the base chains and helpers never do), so that
    `nft.update_script` can take a live table from one Ruleset to the next by difference."""

    table: str
    text: str
    chains: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # name -> rules
    sets: Mapping[str, int] = field(default_factory=dict)  # affinity set -> timeout (s)
    maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # map -> key -> verdict
    nodeport_ips: tuple[str, ...] = ()
    cluster_ips: tuple[str, ...] = ()  # every ClusterIP with rules: other ports are rejected


def _hash(text: str, n: int = 16) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def table_name(node_name: str) -> str:
    """The node's table: the prefix and 10 hex digits of the sha256 of its name."""
    return TABLE_PREFIX + _hash(node_name, 10)


# -- parsing (hostile input) ---------------------------------------------------------------------


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise Malformed(f"{what}: not a string")
    return value


def _port(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        raise Malformed(f"{what}: {value!r} is not a port")
    return value


def _ipv4(value: Any, what: str) -> ipaddress.IPv4Address:
    if not isinstance(value, str):
        raise Malformed(f"{what}: not a string")
    try:
        ip = ipaddress.ip_address(value)
    except ValueError as e:
        raise Malformed(f"{what}: {e}") from None
    if not isinstance(ip, ipaddress.IPv4Address):
        raise Malformed(f"{what}: {value} is not IPv4")
    return ip


def _dict(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{what}: not an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise Malformed(f"{what}: not a list")
    return value


def _cond(value: Any, default: bool, what: str) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise Malformed(f"{what}: not a boolean")
    return value


def _ident(obj: Any) -> tuple[str, str]:
    meta = _dict(obj.get("metadata") if isinstance(obj, Mapping) else None, "metadata")
    return _str(meta.get("namespace", ""), "metadata.namespace"), _str(meta.get("name"), "metadata.name")


def service_ports(svc: Mapping[str, Any]) -> list[ServicePort]:
    """The ports of a Service that get rules ([] for headless, ExternalName, no ClusterIP);
    Malformed when any part of it does not parse (the whole Service is left out then)."""
    if not isinstance(svc, Mapping):
        raise Malformed("not an object")
    ns, name = _ident(svc)
    spec = _dict(svc.get("spec"), "spec")
    kind = spec.get("type", "ClusterIP")
    if kind == "ExternalName":
        return []
    primary = spec.get("clusterIP")
    if primary in (None, "", "None"):
        return []
    cluster_ips = [_ipv4(primary, "spec.clusterIP")]
    for i, ip in enumerate(_list(spec.get("clusterIPs"), "spec.clusterIPs")):
        if isinstance(ip, str) and ":" in ip:
            continue  # the IPv6 family of a dual-stack Service: not ours
        cluster_ips.append(_ipv4(ip, f"spec.clusterIPs[{i}]"))
    external_set = {_ipv4(ip, f"spec.externalIPs[{i}]") for i, ip in enumerate(_list(spec.get("externalIPs"), "x"))}
    if kind == "LoadBalancer":  # its load balancer's addresses are external destinations too, as kube's
        status = _dict(_dict(svc.get("status"), "status").get("loadBalancer"), "status.loadBalancer")
        for i, ingress in enumerate(_list(status.get("ingress"), "status.loadBalancer.ingress")):
            ip = _dict(ingress, f"status.loadBalancer.ingress[{i}]").get("ip")
            if ip and not (isinstance(ip, str) and ":" in ip):
                external_set.add(_ipv4(ip, f"status.loadBalancer.ingress[{i}].ip"))
    external = tuple(sorted(external_set))
    affinity: int | None = None
    if spec.get("sessionAffinity") == "ClientIP":
        config = _dict(_dict(spec.get("sessionAffinityConfig"), "sessionAffinityConfig").get("clientIP"), "clientIP")
        timeout = config.get("timeoutSeconds", DEFAULT_AFFINITY_TIMEOUT)
        if timeout is None:
            timeout = DEFAULT_AFFINITY_TIMEOUT
        if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= MAX_AFFINITY_TIMEOUT:
            raise Malformed(f"sessionAffinityConfig.clientIP.timeoutSeconds: {timeout!r}")
        affinity = timeout
    node_ports = kind in ("NodePort", "LoadBalancer")
    out = []
    for i, p in enumerate(_list(spec.get("ports"), "spec.ports")):
        p = _dict(p, f"spec.ports[{i}]")
        proto_name = p.get("protocol") or "TCP"
        if proto_name not in PROTOCOLS:
            raise Malformed(f"spec.ports[{i}].protocol: {proto_name!r}")
        port_name = _str(p.get("name") or "", f"spec.ports[{i}].name")
        node_port = _port(p["nodePort"], f"spec.ports[{i}].nodePort") if node_ports and p.get("nodePort") else None
        out.append(
            ServicePort(
                key=f"{ns}/{name}:{port_name}/{proto_name}",
                protocol=PROTOCOLS[proto_name],
                port_name=port_name,
                port=_port(p.get("port"), f"spec.ports[{i}].port"),
                cluster_ips=tuple(sorted(set(cluster_ips))),
                external_ips=external,
                node_port=node_port,
                affinity_timeout=affinity,
                external_local=spec.get("externalTrafficPolicy") == "Local",
                internal_local=spec.get("internalTrafficPolicy") == "Local",
            )
        )
    return out


PortKey = tuple[str, str]  # (port name, protocol as the API spells it)


def slice_endpoints(eps: Mapping[str, Any]) -> tuple[str, dict[PortKey, list[Endpoint]]]:
    """`namespace/service` of an EndpointSlice and its endpoints per port; Malformed when the
    slice as a whole is unusable (one bad endpoint is only left out)."""
    if not isinstance(eps, Mapping):
        raise Malformed("not an object")
    ns, name = _ident(eps)
    labels = _dict(_dict(eps.get("metadata"), "metadata").get("labels"), "metadata.labels")
    service = labels.get(SERVICE_NAME_LABEL)
    if not isinstance(service, str) or not service:
        raise Malformed(f"no {SERVICE_NAME_LABEL} label")
    if eps.get("addressType") != "IPv4":
        raise Malformed(f"addressType {eps.get('addressType')!r} is not IPv4")
    ports: dict[PortKey, int] = {}
    for i, p in enumerate(_list(eps.get("ports"), "ports")):
        p = _dict(p, f"ports[{i}]")
        if p.get("port") is None:
            continue
        proto = p.get("protocol") or "TCP"
        if proto not in PROTOCOLS:
            raise Malformed(f"ports[{i}].protocol: {proto!r}")
        ports[(_str(p.get("name") or "", f"ports[{i}].name"), proto)] = _port(p.get("port"), f"ports[{i}].port")
    endpoints: dict[PortKey, list[Endpoint]] = {k: [] for k in ports}
    for i, e in enumerate(_list(eps.get("endpoints"), "endpoints")):
        try:
            e = _dict(e, f"endpoints[{i}]")
            addresses = _list(e.get("addresses"), f"endpoints[{i}].addresses")
            if not addresses:
                raise Malformed(f"endpoints[{i}]: no address")
            ip = _ipv4(addresses[0], f"endpoints[{i}].addresses[0]")  # kube uses the first
            cond = _dict(e.get("conditions"), f"endpoints[{i}].conditions")
            ready = _cond(cond.get("ready"), True, "ready")
            serving = _cond(cond.get("serving"), ready, "serving")
            terminating = _cond(cond.get("terminating"), False, "terminating")
            node = e.get("nodeName")
            if node is not None and not isinstance(node, str):
                raise Malformed(f"endpoints[{i}].nodeName: not a string")
        except Malformed as err:
            log.warning("endpointslice %s/%s: endpoint left out: %s", ns, name, err)
            continue
        for key, port in ports.items():
            endpoints[key].append(Endpoint(ip, port, ready, serving, terminating, node or None))
    return f"{ns}/{service}", endpoints


def categorize(endpoints: Iterable[Endpoint], node: str | None = None) -> list[Endpoint]:
    """kube's CategorizeEndpoints for one policy: the ready endpoints (on `node`, for a Local
    policy); when none is ready, the serving ones that are terminating, so a rollout's last
    pods still answer."""
    candidates = [e for e in endpoints if node is None or e.node == node]
    ready = [e for e in candidates if e.ready]
    return ready or [e for e in candidates if e.serving and e.terminating]


# -- rendering ----------------------------------------------------------------------------------


def _element_port(sp: ServicePort, ip: ipaddress.IPv4Address) -> str:
    return f"{ip} . {sp.protocol} . {sp.port}"


class _Builder:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.chains: dict[str, list[str]] = {}
        self.sets: dict[str, int] = {}  # affinity set -> timeout
        self.service_ips: dict[str, str] = {}  # map element key -> verdict
        self.service_nodeports: dict[str, str] = {}
        self.no_endpoint_services: dict[str, str] = {}
        self.no_endpoint_nodeports: dict[str, str] = {}
        self.cluster_ips: set[ipaddress.IPv4Address] = set()

    def endpoint_chain(self, sp: ServicePort, ep: Endpoint) -> str:
        h = _hash(f"{sp.key}|{ep.ip}:{ep.port}|{sp.affinity_timeout}")
        chain = f"ep-{h}"
        if chain in self.chains:
            return chain
        rules = [f"ip saddr {ep.ip} jump mark-for-masquerade"]  # hairpin: the reply must come back through us
        if sp.affinity_timeout is not None:
            self.sets[f"aff-{h}"] = sp.affinity_timeout
            rules.append(f"update @aff-{h} {{ ip saddr }}")
        rules.append(f"meta l4proto {sp.protocol} dnat to {ep.ip}:{ep.port}")
        self.chains[chain] = rules
        return chain

    def pick_chain(self, sp: ServicePort, endpoints: list[Endpoint], which: str) -> str:
        chain = f"{which}-{_hash(sp.key)}"
        targets = [self.endpoint_chain(sp, e) for e in sorted(endpoints, key=lambda e: (e.ip, e.port))]
        rules = []
        if sp.affinity_timeout is not None:
            rules += [f"ip saddr @aff-{t[3:]} goto {t}" for t in targets]
        vmap = ", ".join(f"{i} : goto {t}" for i, t in enumerate(targets))
        rules.append(f"numgen random mod {len(targets)} vmap {{ {vmap} }}")
        self.chains[chain] = rules
        return chain

    def add(self, sp: ServicePort, endpoints: list[Endpoint]) -> None:
        h = _hash(sp.key)
        self.cluster_ips.update(sp.cluster_ips)
        cluster = categorize(endpoints)
        local = categorize(endpoints, self.node.name)
        reject = "goto reject-chain"
        # internal traffic: the ClusterIPs
        internal = local if sp.internal_local else cluster
        if internal:
            pick = self.pick_chain(sp, internal, "loc" if sp.internal_local else "all")
            chain = f"svc-{h}"
            cidr = self.node.cluster_cidr
            mine = []
            if sp.internal_local and self.node.pod_cidr is not None:
                # "this node's endpoints" is for this node's clients: other nodes' pods, on a
                # kernel the nodes share, are left to their own node's table
                mine = [f"ip saddr != {self.node.pod_cidr} fib saddr type != local return"]
            self.chains[chain] = [
                *mine,
                *(
                    f"ip daddr {ip} {sp.protocol} dport {sp.port} ip saddr != {cidr} jump mark-for-masquerade"
                    for ip in sp.cluster_ips
                ),
                f"goto {pick}",
            ]
            for ip in sp.cluster_ips:
                self.service_ips.setdefault(_element_port(sp, ip), f"goto {chain}")
        else:
            verdict = "drop" if cluster else reject  # Local with endpoints elsewhere only: drop, as kube
            for ip in sp.cluster_ips:
                self.no_endpoint_services.setdefault(_element_port(sp, ip), verdict)
        # external traffic: NodePorts and externalIPs
        if sp.node_port is None and not sp.external_ips:
            return
        key_np = f"{sp.protocol} . {sp.node_port}"
        if not cluster:
            if sp.node_port is not None:
                self.no_endpoint_nodeports.setdefault(key_np, reject)
            for ip in sp.external_ips:
                self.no_endpoint_services.setdefault(_element_port(sp, ip), reject)
            return
        ext = f"ext-{h}"
        all_chain = self.pick_chain(sp, cluster, "all")
        if not sp.external_local:
            self.chains[ext] = ["jump mark-for-masquerade", f"goto {all_chain}"]
        else:
            last = f"goto {self.pick_chain(sp, local, 'loc')}" if local else "drop"
            self.chains[ext] = [
                f"ip saddr {self.node.cluster_cidr} goto {all_chain}",  # pods: short-circuit to any endpoint
                "fib saddr type local jump mark-for-masquerade",  # the host itself
                f"fib saddr type local goto {all_chain}",
                last,
            ]
        if sp.node_port is not None:
            self.service_nodeports.setdefault(key_np, f"goto {ext}")
        for ip in sp.external_ips:
            self.service_ips.setdefault(_element_port(sp, ip), f"goto {ext}")


def _fixed_chains() -> dict[str, tuple[str | None, list[str]]]:
    """The base chains and helpers every table has: name -> (hook line, rules)."""
    nodeports = "ip daddr @nodeport-ips meta l4proto . th dport"
    services = "ip daddr . meta l4proto . th dport"
    check = [f"ct state new {services} vmap @no-endpoint-services"]
    check_np = [f"ct state new {nodeports} vmap @no-endpoint-nodeports"]
    # a ClusterIP on a port no Service has was not DNATed: refused, as kube's cluster-ips-check
    unknown_port = ["ct state new ip daddr @cluster-ips goto reject-chain"]
    return {
        "filter-input": ("type filter hook input priority -110; policy accept;", check + check_np),
        "filter-forward": ("type filter hook forward priority -110; policy accept;", check + check_np + unknown_port),
        "filter-output": ("type filter hook output priority -110; policy accept;", check + check_np),
        # the host's own connections are DNATed at output priority -100: look after that
        "filter-output-post-dnat": ("type filter hook output priority -90; policy accept;", unknown_port),
        "nat-prerouting": ("type nat hook prerouting priority dstnat; policy accept;", ["jump services"]),
        "nat-output": ("type nat hook output priority -100; policy accept;", ["jump services"]),
        "nat-postrouting": ("type nat hook postrouting priority srcnat; policy accept;", ["jump masquerading"]),
        "services": (None, [f"{services} vmap @service-ips", f"{nodeports} vmap @service-nodeports"]),
        "mark-for-masquerade": (None, [f"meta mark set meta mark or {MASQ_MARK:#x}"]),
        "masquerading": (
            None,
            [
                f"meta mark & {MASQ_MARK:#x} == 0 return",
                f"meta mark set meta mark xor {MASQ_MARK:#x}",
                "masquerade fully-random",
            ],
        ),
        "reject-chain": (None, ["reject"]),
    }


MAPS = {
    "service-ips": "ipv4_addr . inet_proto . inet_service : verdict",
    "no-endpoint-services": "ipv4_addr . inet_proto . inet_service : verdict",
    "service-nodeports": "inet_proto . inet_service : verdict",
    "no-endpoint-nodeports": "inet_proto . inet_service : verdict",
}


def gather(
    services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]]
) -> list[tuple[ServicePort, list[Endpoint]]]:
    """Every usable Service port with its endpoints (merged over the Service's slices, one per
    address and port, as kube's EndpointSliceCache), in a stable order; the unusable logged."""
    by_service: dict[str, dict[PortKey, dict[tuple[ipaddress.IPv4Address, int], Endpoint]]] = {}
    ordered = sorted(slices, key=lambda s: repr(_ident_or_none(s)))
    for s in ordered:
        try:
            service, endpoints = slice_endpoints(s)
        except HOSTILE as e:
            log.warning("endpointslice %s left out: %s", _ident_or_none(s), e)
            continue
        ports = by_service.setdefault(service, {})
        for key, eps in endpoints.items():
            held = ports.setdefault(key, {})
            for ep in eps:
                held.setdefault((ep.ip, ep.port), ep)
    out = []
    for svc in sorted(services, key=lambda s: repr(_ident_or_none(s))):
        try:
            ports_of = service_ports(svc)
            ns, name = _ident(svc)
        except HOSTILE as e:
            log.warning("service %s left out: %s", _ident_or_none(svc), e)
            continue
        endpoints_of = by_service.get(f"{ns}/{name}", {})
        for sp in ports_of:
            api_proto = next(k for k, v in PROTOCOLS.items() if v == sp.protocol)
            held = endpoints_of.get((sp.port_name, api_proto), {})
            out.append((sp, sorted(held.values(), key=lambda e: (e.ip, e.port))))
    return out


def _ident_or_none(obj: Any) -> tuple[str, str] | None:
    try:
        return _ident(obj)
    except HOSTILE:
        return None


def render(services: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]], node: Node) -> Ruleset:
    """The node's whole table for these objects (see the module docstring)."""
    b = _Builder(node)
    for sp, endpoints in gather(services, slices):
        b.add(sp, endpoints)
    name = table_name(node.name)
    nodeport_ips = tuple(str(ip) for ip in sorted(set(node.ips)))
    cluster_ips = tuple(str(ip) for ip in sorted(b.cluster_ips))
    maps = {
        "service-ips": dict(sorted(b.service_ips.items())),
        "no-endpoint-services": dict(sorted(b.no_endpoint_services.items())),
        "service-nodeports": dict(sorted(b.service_nodeports.items())),
        "no-endpoint-nodeports": dict(sorted(b.no_endpoint_nodeports.items())),
    }
    sets = dict(sorted(b.sets.items()))
    chains = {c: tuple(rules) for c, rules in sorted(b.chains.items())}
    lines = [f"table ip {name} {{", "\tset nodeport-ips {", "\t\ttype ipv4_addr"]
    if nodeport_ips:
        lines.append(f"\t\telements = {{ {', '.join(nodeport_ips)} }}")
    lines += ["\t}", "\tset cluster-ips {", "\t\ttype ipv4_addr"]
    if cluster_ips:
        lines.append(f"\t\telements = {{ {', '.join(cluster_ips)} }}")
    lines.append("\t}")
    for m, typ in MAPS.items():
        lines += [f"\tmap {m} {{", f"\t\ttype {typ}"]
        if maps[m]:
            lines.append("\t\telements = {")
            lines += [f"\t\t\t{k} : {v}," for k, v in maps[m].items()]
            lines.append("\t\t}")
        lines.append("\t}")
    for s, timeout in sets.items():
        lines += [f"\tset {s} {{", f"\t\t{affinity_set_spec(timeout)}", "\t}"]
    for chain, (hook, fixed) in _fixed_chains().items():
        lines.append(f"\tchain {chain} {{")
        if hook:
            lines.append(f"\t\t{hook}")
        lines += [f"\t\t{r}" for r in fixed]
        lines.append("\t}")
    for chain, rules in chains.items():
        lines += [f"\tchain {chain} {{", *(f"\t\t{r}" for r in rules), "\t}"]
    lines.append("}")
    return Ruleset(name, "\n".join(lines) + "\n", chains, sets, maps, nodeport_ips, cluster_ips)


def affinity_set_spec(timeout: int) -> str:
    return f"type ipv4_addr; flags dynamic,timeout; timeout {timeout}s;"
