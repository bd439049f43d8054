"""networking.k8s.io/v1 Ingress: HTTP routes from hosts and paths to service backends, served by
whichever controller its IngressClass names; the controller reports its addresses in `status`."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, dicts, get, text

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_WILDCARD_FMT = r"\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_WILDCARD_RE = re.compile(f"^{_WILDCARD_FMT}$")
_WILDCARD_MSG = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
    "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character"
)
# what an Exact or Prefix path may not contain, as kube words it
_BAD_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_BAD_ENDINGS = ("/..", "/.")


def _host_problems(host: str) -> list[str]:
    if "*" in host:
        problems = (
            []
            if len(host) <= v.DNS1123_SUBDOMAIN_MAX
            else [f"must be no more than {v.DNS1123_SUBDOMAIN_MAX} characters"]
        )
        if not _WILDCARD_RE.match(host):
            problems.append(f"{_WILDCARD_MSG} (e.g. '*.example.com', regex used for validation is '{_WILDCARD_FMT}')")
        return problems
    return v.is_dns1123_subdomain(host)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _validate_hosts(host: Any, field: str, causes: list[Cause]) -> None:
    if not host:
        return
    if not isinstance(host, str):
        causes.append(v.invalid(field, host, "must be a string"))
        return
    if _is_ip(host):
        causes.append(v.invalid(field, host, "must be a DNS name, not an IP address"))
    causes += [v.invalid(field, host, m) for m in _host_problems(host)]


def validate_backend(backend: Obj, field: str, causes: list[Cause]) -> None:
    """validateIngressBackend: exactly one of a service (name and port) or a typed resource."""
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        causes.append(v.invalid(field, "", "cannot set both resource and service backends"))
    elif resource is not None:
        ref = v.as_dict(resource, v.child(field, "resource"), causes)
        for part in ("kind", "name"):
            if not ref.get(part):
                causes.append(v.required(v.child(field, f"resource.{part}")))
    elif service is not None:
        svc = v.as_dict(service, v.child(field, "service"), causes)
        name = svc.get("name")
        if not name:
            causes.append(v.required(v.child(field, "service.name")))
        elif isinstance(name, str):
            causes += [v.invalid(v.child(field, "service.name"), name, m) for m in v.is_dns1035_label(name)]
        port = v.as_dict(svc.get("port"), v.child(field, "service.port"), causes)
        port_name, number = port.get("name"), port.get("number")
        if port_name and number:
            causes.append(v.invalid(field, "", "cannot set both port name & port number"))
        elif port_name:
            causes += [
                v.invalid(v.child(field, "service.port.name"), port_name, m)
                for m in (v.is_port_name(port_name) if isinstance(port_name, str) else ["must be a string"])
            ]
        elif number:
            causes += v.validate_port(number, v.child(field, "service.port.number"))
        else:
            causes.append(v.required(field, "port name or number is required"))
    else:
        causes.append(v.invalid(field, "", "resource or service backend is required"))


def _path_problem(path: Any, path_type: Any) -> str:
    if not isinstance(path, str):
        return "must be a string"
    if path_type in ("Exact", "Prefix") or path:
        if not path.startswith("/"):
            return "must be an absolute path"
    if path_type in ("Exact", "Prefix"):
        for bad in _BAD_SEQUENCES:
            if bad in path:
                return f"must not contain '{bad}'"
        for bad in _BAD_ENDINGS:
            if path.endswith(bad):
                return f"cannot end with '{bad}'"
    return ""


def _validate_rule(rule: Obj, here: str, causes: list[Cause]) -> None:
    _validate_hosts(rule.get("host"), v.child(here, "host"), causes)
    if rule.get("http") is None:
        return
    http = v.as_dict(rule.get("http"), v.child(here, "http"), causes)
    paths_field = v.child(here, "http.paths")
    paths = v.as_list(http.get("paths"), paths_field, causes)
    if not paths:
        causes.append(v.required(paths_field))
    for j, entry in enumerate(paths):
        at = v.index(paths_field, j)
        entry = v.as_dict(entry, at, causes)
        path_type = entry.get("pathType")
        if path_type in (None, ""):
            causes.append(v.required(v.child(at, "pathType"), "pathType must be specified"))
            continue
        if path_type not in PATH_TYPES:
            causes.append(v.not_supported(v.child(at, "pathType"), path_type, PATH_TYPES))
            continue
        problem = _path_problem(entry.get("path", ""), path_type)
        if problem:
            causes.append(v.invalid(v.child(at, "path"), entry.get("path"), problem))
        validate_backend(
            v.as_dict(entry.get("backend"), v.child(at, "backend"), causes), v.child(at, "backend"), causes
        )


def validate(ing: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(ing, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(ing.get("spec"), "spec", causes)
    rules = v.as_list(spec.get("rules"), "spec.rules", causes)
    backend = spec.get("defaultBackend")
    if not rules and backend is None:
        causes.append(v.invalid("spec", rules, "either `defaultBackend` or `rules` must be specified"))
    if backend is not None:
        validate_backend(v.as_dict(backend, "spec.defaultBackend", causes), "spec.defaultBackend", causes)
    for i, rule in enumerate(rules):
        here = v.index("spec.rules", i)
        _validate_rule(v.as_dict(rule, here, causes), here, causes)
    for i, tls in enumerate(v.as_list(spec.get("tls"), "spec.tls", causes)):
        here = v.index("spec.tls", i)
        tls = v.as_dict(tls, here, causes)
        for j, host in enumerate(v.as_list(tls.get("hosts"), v.child(here, "hosts"), causes)):
            _validate_hosts(host, v.index(v.child(here, "hosts"), j), causes)
        secret = tls.get("secretName")
        if isinstance(secret, str) and secret:
            causes += [v.invalid(v.child(here, "secretName"), secret, m) for m in v.is_dns1123_subdomain(secret)]
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        shown = class_name if isinstance(class_name, str) else ""
        causes += [v.invalid("spec.ingressClassName", class_name, m) for m in v.is_dns1123_subdomain(shown)]
    return causes


def hosts_text(ing: Obj) -> str:
    """formatHosts: the first three rule hosts, `+ N more...`, or `*`."""
    rules = dicts(ing, "spec.rules")
    shown: list[str] = []
    more = False
    for rule in rules:
        if len(shown) == 3:
            more = True
            break
        if text(rule, "host"):
            shown.append(text(rule, "host"))
    if not shown:
        return "*"
    return ",".join(shown) + (f" + {len(rules) - 3} more..." if more else "")


def address_text(ing: Obj) -> str:
    """The load balancer's IPs or hostnames (kube's server-side table is always the wide one)."""
    found = [text(lb, "ip") or text(lb, "hostname") for lb in dicts(ing, "status.loadBalancer.ingress")]
    return ",".join(a for a in found if a)


def row(ing: Obj, now: float) -> list[Any]:
    class_name = get(ing, "spec.ingressClassName")
    return [
        class_name if isinstance(class_name, str) else "<none>",
        hosts_text(ing),
        address_text(ing),
        "80, 443" if dicts(ing, "spec.tls") else "80",
    ]


RESOURCE = ResourceDef(
    group="networking.k8s.io",
    version="v1",
    kind="Ingress",
    plural="ingresses",
    singular="ingress",
    namespaced=True,
    empty_status={"loadBalancer": {}},
    short_names=("ing",),
    subresources=(Subresource("status", "Ingress", handler=STATUS_VIEW),),
    validate=validate,
    columns=(
        Column(
            "Class",
            description="The name of the IngressClass resource that should be used for additional configuration",
        ),
        Column("Hosts", description="Hosts that incoming requests are matched against before the ingress rule"),
        Column("Address", description="Address is a list containing ingress points for the load-balancer"),
        Column("Ports", description="Ports of TLS configurations that open"),
    ),
    row=row,
)
