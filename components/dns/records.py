"""The cluster zone: what `raftkube dns` answers for `<domain>` (default `cluster.local`) and for
the reverse names of the addresses it knows, from Services, EndpointSlices and Namespaces.

Pure: no I/O and no clock.  The informers feed it objects (`set_*`/`delete_*`), each change
updating the indexes it touches; `answer(qname, qtype)` looks names up in them, so a query costs
the size of its answer, not the size of the cluster.

The names, after the Kubernetes DNS specification (kubernetes/dns docs/specification.md, 1.1.0)
and what CoreDNS's kubernetes plugin answers (`pods insecure`, Corefile as kubeadm writes it):

* `<svc>.<ns>.svc.<domain>`: A/AAAA of a ClusterIP Service's ClusterIPs; of a headless one's ready
  endpoints (an endpoint whose `ready` is unset counts as ready, as in CoreDNS; with
  `publishNotReadyAddresses` or the tolerate-unready-endpoints annotation every endpoint counts;
  a terminating endpoint is not ready, even while still serving, as the endpointslice
  controller marks it and CoreDNS reads it); a CNAME to an ExternalName Service's name.
  SRV at this name lists every port (CoreDNS's port-less form).
* `_<port>._<proto>.<svc>.<ns>.svc.<domain>`: SRV `0 <100/n> <port> <target>`, the target being
  the Service's name (ClusterIP) or each ready endpoint's name (headless), with the targets'
  addresses in the additional section.
* `<hostname>.<svc>.<ns>.svc.<domain>`: a ready endpoint of the Service, by its `hostname` or,
  without one, its address with `.`/`:` turned into `-` (CoreDNS's endpoint names).
* `<a-b-c-d>.<ns>.pod.<domain>`: `pods insecure`, the address written in the name, for any
  namespace that exists (`fd00--1` for IPv6).
* `<reversed ip>.in-addr.arpa` / `ip6.arpa`: PTR to the Service of a ClusterIP and to the endpoint
  names of a ready endpoint's address.  A reverse name we know nothing of is not ours: `answer` gives
  None and the server forwards it (kubeadm's `fallthrough in-addr.arpa ip6.arpa`).
* `dns-version.<domain>` TXT "1.1.0"; the apex has SOA and NS.

A name that does not exist is NXDOMAIN; a name that exists without records of the type asked
(an AAAA of an IPv4-only Service, `svc.<domain>`, `<ns>.svc.<domain>` of an existing namespace)
is NODATA: NOERROR and no answers.  Both carry the zone's SOA in the authority section, whose
minimum is the TTL, so resolvers cache the negative answer as long as a positive one (RFC 2308).
As in CoreDNS, a headless Service without ready endpoints, an SRV name of a port the Service does
not have, and an endpoint name no endpoint has are NXDOMAIN.

Objects are hostile: a Service or slice whose fields are not what the API would hold is skipped
(or the offending endpoint or port is), never half-answered.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dnslib import AAAA, CNAME, NS, PTR, QTYPE, RCODE, RR, SOA, SRV, TXT, A, DNSLabel

DEFAULT_DOMAIN = "cluster.local"
# kubeadm's Corefile says `ttl 30` (the kubernetes plugin's own default is 5 s): what pods see
# in every kubeadm cluster, and what the conformance tests were run against
DEFAULT_TTL = 30
SCHEMA_VERSION = "1.1.0"
MAX_CHASE = 8  # CNAMEs followed inside the zone (ExternalName to ExternalName ...)

# the spec's other way to count unready endpoints as ready (before publishNotReadyAddresses)
TOLERATE_UNREADY = "service.alpha.kubernetes.io/tolerate-unready-endpoints"
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Key = tuple[str, str]  # (namespace, name)


def is_label(s: object) -> bool:
    """An RFC 1123 label, as namespace, Service and endpoint host names are."""
    return isinstance(s, str) and len(s) <= 63 and _LABEL.match(s) is not None


def is_dns_name(s: object) -> bool:
    """An absolute-or-relative DNS name fit to be a CNAME target (ExternalName)."""
    if not isinstance(s, str) or not s or len(s.rstrip(".")) > 253:
        return False
    labels = s.lower().rstrip(".").split(".")
    return all(0 < len(x) <= 63 and re.fullmatch(r"[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?", x) for x in labels)


def _ip(s: object) -> Address | None:
    if not isinstance(s, str):
        return None
    try:
        return ipaddress.ip_address(s)
    except ValueError:
        return None


def dashed(ip: Address) -> str:
    """An address as a DNS label: 10-0-0-1, fd00--1 (CoreDNS's endpoint and pod names)."""
    return str(ip).replace(".", "-").replace(":", "-")


# -- the objects, as much of them as DNS needs -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Port:
    name: str  # lowercase; "" for an unnamed port
    protocol: str  # lowercase: tcp, udp, sctp
    port: int


@dataclass(frozen=True, slots=True)
class Service:
    namespace: str
    name: str
    cluster_ips: tuple[Address, ...]  # () for a headless one, or one without an IP yet
    headless: bool
    external_name: str | None  # the CNAME target (no trailing dot) of an ExternalName Service
    ports: tuple[Port, ...]
    publish_not_ready: bool


@dataclass(frozen=True, slots=True)
class Endpoint:
    addresses: tuple[Address, ...]
    hostname: str | None
    ready: bool


@dataclass(frozen=True, slots=True)
class Slice:
    namespace: str
    name: str
    service: str
    endpoints: tuple[Endpoint, ...]
    ports: tuple[Port, ...]


def _meta(obj: object) -> Key | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    ns, name = meta.get("namespace"), meta.get("name")
    if not isinstance(ns, str) or not isinstance(name, str) or not ns or not name:
        return None
    return ns, name


def _ports(raw: object) -> tuple[Port, ...]:
    """The well-formed ports; a malformed one is left out."""
    if not isinstance(raw, list):
        return ()
    out = []
    for p in raw:
        if not isinstance(p, Mapping):
            continue
        name, proto, number = p.get("name") or "", p.get("protocol") or "TCP", p.get("port")
        if not isinstance(name, str) or (name and not is_label(name.lower())) or not isinstance(proto, str):
            continue
        if proto not in _PROTOCOLS:
            continue
        if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
            continue
        out.append(Port(name.lower(), proto.lower(), number))
    return tuple(out)


def parse_service(obj: object) -> Service | None:
    """The Service as DNS sees it, or None when it cannot be named or answered for."""
    key = _meta(obj)
    if key is None or not is_label(key[0]) or not is_label(key[1]):
        return None
    assert isinstance(obj, Mapping)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    kind = spec.get("type") or "ClusterIP"
    ports = _ports(spec.get("ports"))
    annotations = (obj.get("metadata") or {}).get("annotations")
    tolerate = isinstance(annotations, Mapping) and annotations.get(TOLERATE_UNREADY) == "true"
    pna = spec.get("publishNotReadyAddresses") is True or tolerate
    if kind == "ExternalName":
        target = spec.get("externalName")
        if not is_dns_name(target) or _ip(target) is not None:
            return None
        assert isinstance(target, str)
        return Service(key[0], key[1], (), False, target.lower().rstrip("."), ports, pna)
    if kind not in ("ClusterIP", "NodePort", "LoadBalancer"):
        return None
    raw_ips = spec.get("clusterIPs")
    if not isinstance(raw_ips, list) or not raw_ips:
        raw_ips = [spec.get("clusterIP")] if spec.get("clusterIP") else []
    if raw_ips and raw_ips[0] == "None":
        return Service(key[0], key[1], (), True, None, ports, pna)
    ips = []
    for raw in raw_ips:
        ip = _ip(raw)
        if ip is None:  # an IP field that is not one: the object is not trustworthy
            return None
        ips.append(ip)
    return Service(key[0], key[1], tuple(dict.fromkeys(ips)), False, None, ports, pna)


def parse_slice(obj: object) -> Slice | None:
    """The slice's endpoints and ports, or None when it belongs to no Service or holds no
    address family we answer (FQDN slices)."""
    key = _meta(obj)
    if key is None or not is_label(key[0]):
        return None
    assert isinstance(obj, Mapping)
    labels = (obj.get("metadata") or {}).get("labels")
    service = labels.get("kubernetes.io/service-name") if isinstance(labels, Mapping) else None
    if not is_label(service):
        return None
    assert isinstance(service, str)
    address_type = obj.get("addressType")
    family = {"IPv4": 4, "IPv6": 6}.get(address_type) if isinstance(address_type, str) else None
    if family is None:
        return None
    raw_endpoints = obj.get("endpoints")
    endpoints = []
    for ep in raw_endpoints if isinstance(raw_endpoints, list) else ():
        if not isinstance(ep, Mapping) or not isinstance(ep.get("addresses"), list):
            continue
        addrs = [_ip(a) for a in ep["addresses"]]
        good = tuple(a for a in addrs if a is not None and a.version == family)
        if not good or len(good) != len(addrs):
            continue
        conditions = ep.get("conditions")
        ready = conditions.get("ready") if isinstance(conditions, Mapping) else None
        hostname = ep.get("hostname")
        endpoints.append(Endpoint(good, hostname if is_label(hostname) else None, ready is not False))
    return Slice(key[0], key[1], service, tuple(endpoints), _ports(obj.get("ports")))


# -- answers -------------------------------------------------------------------------------------


@dataclass
class Answer:
    """What to say: `rcode`, the records of each section, and `chase` when the answer ends in a
    CNAME out of the zone that the server should resolve for the same type (ExternalName)."""

    rcode: int = RCODE.NOERROR
    answers: list[Any] = field(default_factory=list)  # dnslib RRs
    authority: list[Any] = field(default_factory=list)
    additional: list[Any] = field(default_factory=list)
    chase: str | None = None


class Zone:
    """The cluster domain's records, kept from the objects the informers deliver."""

    def __init__(self, domain: str = DEFAULT_DOMAIN, ttl: int = DEFAULT_TTL, dns_ip: str | None = None) -> None:
        if not is_dns_name(domain) or not 0 <= ttl < 2**31:
            raise ValueError(f"bad zone {domain!r} or ttl {ttl}")
        self.domain = domain.lower().rstrip(".")
        self.ttl = ttl
        self._dns_ip = _ip(dns_ip) if dns_ip else None
        self._suffix = tuple(x.encode() for x in self.domain.split("."))
        self._serial = 1  # bumped on each change, so a secondary (none yet) could tell
        self._services: dict[Key, Service] = {}
        self._slices: dict[Key, Slice] = {}
        self._slices_of: dict[Key, set[Key]] = {}  # (ns, service) -> its slices' keys
        self._namespaces: set[str] = set()
        self._ns_services: dict[str, int] = {}  # a namespace with Services exists, told or not
        self._rev_services: dict[Address, set[Key]] = {}
        self._rev_slices: dict[Address, set[Key]] = {}

    # -- updates (from informer events) -------------------------------------------------------

    def set_service(self, obj: object) -> None:
        self.delete_service(obj)
        svc = parse_service(obj)
        if svc is None:
            return
        key = (svc.namespace, svc.name)
        self._serial += 1
        self._services[key] = svc
        self._ns_services[svc.namespace] = self._ns_services.get(svc.namespace, 0) + 1
        for ip in svc.cluster_ips:
            self._rev_services.setdefault(ip, set()).add(key)

    def delete_service(self, obj: object) -> None:
        key = _meta(obj)
        svc = self._services.pop(key, None) if key is not None else None
        if svc is None or key is None:
            return
        self._serial += 1
        left = self._ns_services.get(svc.namespace, 1) - 1
        if left:
            self._ns_services[svc.namespace] = left
        else:
            self._ns_services.pop(svc.namespace, None)
        for ip in svc.cluster_ips:
            _discard(self._rev_services, ip, key)

    def set_slice(self, obj: object) -> None:
        self.delete_slice(obj)
        sl = parse_slice(obj)
        if sl is None:
            return
        key = (sl.namespace, sl.name)
        self._serial += 1
        self._slices[key] = sl
        self._slices_of.setdefault((sl.namespace, sl.service), set()).add(key)
        for ep in sl.endpoints:
            for ip in ep.addresses:
                self._rev_slices.setdefault(ip, set()).add(key)

    def delete_slice(self, obj: object) -> None:
        key = _meta(obj)
        sl = self._slices.pop(key, None) if key is not None else None
        if sl is None or key is None:
            return
        self._serial += 1
        _discard(self._slices_of, (sl.namespace, sl.service), key)
        for ep in sl.endpoints:
            for ip in ep.addresses:
                _discard(self._rev_slices, ip, key)

    def set_namespace(self, obj: object) -> None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if is_label(name):
            assert isinstance(name, str)
            self._namespaces.add(name)

    def delete_namespace(self, obj: object) -> None:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str):
            self._namespaces.discard(name)

    # -- questions ------------------------------------------------------------------------------

    def owns(self, qname: DNSLabel | str) -> bool:
        """Whether the name is in the cluster domain (reverse names are decided by `answer`)."""
        labels = _labels(qname)
        n = len(self._suffix)
        return len(labels) >= n and labels[-n:] == self._suffix

    def answer(self, qname: DNSLabel | str, qtype: int) -> Answer | None:
        """The answer for one IN-class question, or None when the name is not this zone's
        (outside the domain, or a reverse name of an address it does not know)."""
        owner = qname if isinstance(qname, DNSLabel) else DNSLabel(qname)
        labels = _labels(owner)
        if labels[-2:] in ((b"in-addr", b"arpa"), (b"ip6", b"arpa")):
            return self._reverse(owner, labels, qtype)
        if not self.owns(owner):
            return None
        out = Answer()
        self._lookup(owner, labels[: len(labels) - len(self._suffix)], qtype, out, MAX_CHASE)
        if not out.answers:
            out.authority.append(self._soa())
        return out

    def _lookup(self, owner: DNSLabel, rel: tuple[bytes, ...], qtype: int, out: Answer, depth: int) -> None:
        """Fill `out` for `owner`, whose labels below the domain are `rel`."""
        try:
            names = tuple(x.decode("ascii") for x in rel)
        except UnicodeDecodeError:
            out.rcode = RCODE.NXDOMAIN
            return
        n = len(names)
        kind = names[-1] if names else ""
        if n == 0:
            if qtype == QTYPE.SOA:
                out.answers.append(self._soa())
            elif qtype == QTYPE.NS:
                out.answers.append(self._rr(owner, QTYPE.NS, NS(self._ns_name())))
        elif n == 1 and names[0] == "dns-version":
            if qtype == QTYPE.TXT:
                out.answers.append(self._rr(owner, QTYPE.TXT, TXT(SCHEMA_VERSION)))
        elif n == 2 and names == ("ns", "dns") and self._dns_ip is not None:
            self._addresses(owner, [self._dns_ip], qtype, out)
        elif n == 1 and kind in ("svc", "pod"):
            pass  # NODATA: an empty non-terminal
        elif n == 2 and kind in ("svc", "pod") and self._namespace_exists(names[0]):
            pass
        elif n == 3 and kind == "pod" and self._namespace_exists(names[1]):
            ip = _pod_ip(names[0])
            if ip is None:
                out.rcode = RCODE.NXDOMAIN
            else:
                self._addresses(owner, [ip], qtype, out)
        elif 3 <= n <= 5 and kind == "svc" and (svc := self._services.get((names[-2], names[-3]))) is not None:
            if n == 3:
                self._service(owner, svc, qtype, out, depth)
            elif n == 4:
                self._endpoint(owner, svc, names[0], qtype, out)
            else:
                self._srv(owner, svc, names[0], names[1], qtype, out)
        else:
            out.rcode = RCODE.NXDOMAIN

    def _service(self, owner: DNSLabel, svc: Service, qtype: int, out: Answer, depth: int) -> None:
        if svc.external_name is not None:
            target = DNSLabel(svc.external_name)
            out.answers.append(self._rr(owner, QTYPE.CNAME, CNAME(target)))
            if qtype in (QTYPE.CNAME, QTYPE.ANY):
                return
            if self.owns(target) and depth > 0:
                labels = _labels(target)
                # the rcode is the last name's in the chain (RFC 6604)
                self._lookup(target, labels[: len(labels) - len(self._suffix)], qtype, out, depth - 1)
            elif not self.owns(target):
                out.chase = svc.external_name
            return
        if svc.headless:
            pairs = self._ready(svc)
            if not pairs:
                out.rcode = RCODE.NXDOMAIN  # CoreDNS: a headless Service without endpoints
                return
            if qtype == QTYPE.SRV:
                self._srv_endpoints(owner, svc, pairs, None, None, out)
            else:
                self._addresses(owner, [ip for ep, _ in pairs for ip in ep.addresses], qtype, out)
            return
        if qtype == QTYPE.SRV:
            self._srv_service(owner, svc, svc.ports, out)
        else:
            self._addresses(owner, list(svc.cluster_ips), qtype, out)

    def _endpoint(self, owner: DNSLabel, svc: Service, host: str, qtype: int, out: Answer) -> None:
        if svc.external_name is None and host.startswith("_") and any(p.protocol == host[1:] for p in svc.ports):
            return  # `_tcp.<svc>...`: an empty non-terminal above the SRV names
        pairs = [(ep, ports) for ep, ports in self._ready(svc) if _endpoint_name(ep) == host]
        if svc.external_name is not None or not pairs:
            out.rcode = RCODE.NXDOMAIN
        elif qtype == QTYPE.SRV:
            self._srv_endpoints(owner, svc, pairs, None, None, out)
        else:
            self._addresses(owner, [ip for ep, _ in pairs for ip in ep.addresses], qtype, out)

    def _srv(self, owner: DNSLabel, svc: Service, port: str, proto: str, qtype: int, out: Answer) -> None:
        if not (port.startswith("_") and proto.startswith("_")) or svc.external_name is not None:
            out.rcode = RCODE.NXDOMAIN
            return
        port, proto = port[1:], proto[1:]
        if svc.headless:
            pairs = self._ready(svc)
            if not any(_match(p, port, proto) for _, ports in pairs for p in ports):
                out.rcode = RCODE.NXDOMAIN
            elif qtype == QTYPE.SRV:
                self._srv_endpoints(owner, svc, pairs, port, proto, out)
            return
        ports = tuple(p for p in svc.ports if _match(p, port, proto))
        if not ports:
            out.rcode = RCODE.NXDOMAIN
        elif qtype == QTYPE.SRV:
            self._srv_service(owner, svc, ports, out)

    def _srv_service(self, owner: DNSLabel, svc: Service, ports: Iterable[Port], out: Answer) -> None:
        target = DNSLabel(f"{svc.name}.{svc.namespace}.svc.{self.domain}")
        ports = list(ports)
        for p in ports:
            out.answers.append(self._rr(owner, QTYPE.SRV, SRV(0, _weight(len(ports)), p.port, target)))
        if ports:
            for ip in svc.cluster_ips:
                out.additional.append(self._address_rr(target, ip))

    def _srv_endpoints(
        self,
        owner: DNSLabel,
        svc: Service,
        pairs: list[tuple[Endpoint, tuple[Port, ...]]],
        port: str | None,
        proto: str | None,
        out: Answer,
    ) -> None:
        records = []
        for ep, ports in pairs:
            target = DNSLabel(f"{_endpoint_name(ep)}.{svc.name}.{svc.namespace}.svc.{self.domain}")
            matched = [p for p in ports if port is None or _match(p, port, proto or "")]
            for p in matched:
                records.append((p.port, target))
            if matched:
                out.additional.extend(self._address_rr(target, ip) for ip in ep.addresses)
        records = list(dict.fromkeys(records))  # one endpoint name in two families' slices: once
        for number, target in records:
            out.answers.append(self._rr(owner, QTYPE.SRV, SRV(0, _weight(len(records)), number, target)))

    def _ready(self, svc: Service) -> list[tuple[Endpoint, tuple[Port, ...]]]:
        """The Service's endpoints that DNS lists, each with its slice's ports; an address in two
        slices (a slice being replaced) once."""
        seen: set[Address] = set()
        out = []
        for key in sorted(self._slices_of.get((svc.namespace, svc.name), ())):
            sl = self._slices[key]
            for ep in sl.endpoints:
                if not (ep.ready or svc.publish_not_ready) or seen.issuperset(ep.addresses):
                    continue
                seen.update(ep.addresses)
                out.append((ep, sl.ports))
        return out

    def _addresses(self, owner: DNSLabel, ips: Iterable[Address], qtype: int, out: Answer) -> None:
        version = {QTYPE.A: 4, QTYPE.AAAA: 6}.get(qtype)
        if qtype == QTYPE.ANY:
            version = 0
        for ip in dict.fromkeys(ips):
            if version in (0, ip.version):
                out.answers.append(self._address_rr(owner, ip))

    def _reverse(self, owner: DNSLabel, labels: tuple[bytes, ...], qtype: int) -> Answer | None:
        ip = _reverse_ip(labels)
        if ip is None:
            return None
        names = [f"{n}.{ns}.svc.{self.domain}" for ns, n in sorted(self._rev_services.get(ip, ()))]
        for key in sorted(self._rev_slices.get(ip, ())):
            sl = self._slices[key]
            svc = self._services.get((sl.namespace, sl.service))
            names += [
                f"{_endpoint_name(ep)}.{sl.service}.{sl.namespace}.svc.{self.domain}"
                for ep in sl.endpoints
                if ip in ep.addresses and (ep.ready or (svc is not None and svc.publish_not_ready))
            ]
        if not names:
            return None
        out = Answer()
        if qtype in (QTYPE.PTR, QTYPE.ANY):
            out.answers = [self._rr(owner, QTYPE.PTR, PTR(DNSLabel(n))) for n in dict.fromkeys(names)]
        else:
            out.authority.append(self._soa())
        return out

    # -- helpers ------------------------------------------------------------------------------------

    def _namespace_exists(self, name: str) -> bool:
        return name in self._namespaces or name in self._ns_services

    def _ns_name(self) -> DNSLabel:
        return DNSLabel(f"ns.dns.{self.domain}")

    def _soa(self) -> Any:
        # CoreDNS's: ns.dns.<zone> hostmaster.<zone>, refresh 7200, retry 1800, expire 86400, minimum = TTL
        soa = SOA(self._ns_name(), DNSLabel(f"hostmaster.{self.domain}"), (self._serial, 7200, 1800, 86400, self.ttl))
        return RR(DNSLabel(self.domain), QTYPE.SOA, rdata=soa, ttl=self.ttl)

    def _rr(self, owner: DNSLabel, rtype: int, rdata: Any) -> Any:
        return RR(owner, rtype, rdata=rdata, ttl=self.ttl)

    def _address_rr(self, owner: DNSLabel, ip: Address) -> Any:
        if ip.version == 4:
            return self._rr(owner, QTYPE.A, A(str(ip)))
        return self._rr(owner, QTYPE.AAAA, AAAA(str(ip)))


def _labels(name: DNSLabel | str) -> tuple[bytes, ...]:
    label = name if isinstance(name, DNSLabel) else DNSLabel(name)
    return tuple(x.lower() for x in label.label)


def _discard(index: dict[Any, set[Key]], at: Any, key: Key) -> None:
    keys = index.get(at)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[at]


def _endpoint_name(ep: Endpoint) -> str:
    return ep.hostname or dashed(ep.addresses[0])


def _match(p: Port, name: str, proto: str) -> bool:
    return p.name == name and p.protocol == proto


def _weight(n: int) -> int:
    """CoreDNS's: the records of one priority share a weight of 100."""
    return max(1, 100 // max(n, 1))


def _pod_ip(label: str) -> Address | None:
    """The address a pod name spells: a-b-c-d for IPv4, '-' for ':' in IPv6 (CoreDNS's rule)."""
    text = label.replace("-", ".") if label.count("-") == 3 and "--" not in label else label.replace("-", ":")
    return _ip(text)


def _reverse_ip(labels: tuple[bytes, ...]) -> Address | None:
    """The address a full reverse name stands for (None for a partial or malformed one)."""
    try:
        parts = [x.decode("ascii") for x in labels[:-2]]
    except UnicodeDecodeError:
        return None
    if labels[-2] == b"in-addr":
        if len(parts) != 4 or not all(p.isdigit() and len(p) <= 3 for p in parts):
            return None
        return _ip(".".join(reversed(parts)))
    if len(parts) != 32 or not all(len(p) == 1 and p in "0123456789abcdef" for p in parts):
        return None
    nibbles = "".join(reversed(parts))
    return _ip(":".join(nibbles[i : i + 4] for i in range(0, 32, 4)))
