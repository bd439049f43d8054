"""A container's environment, as kube's kubelet builds it from the pod spec.

`envFrom` first (each ConfigMap or Secret's keys, with the source's prefix; later sources win),
then `env` in order, each entry overriding what came before.  An `env` value may refer to a
variable defined before it as `$(NAME)`; `$$` is a literal `$`; a reference to an unknown name
is left as written.  `valueFrom` reads the pod's own fields (`fieldRef`), a ConfigMap or Secret
key, or a resource limit or request (`resourceFieldRef`, with its divisor).  A source that is
missing fails the container start (kube's CreateContainerConfigError) unless it is optional;
keys that are not valid variable names are skipped and reported.
The same `$(NAME)` syntax names a volumeMount's `subPathExpr` (`expand_sub_path`), where a
variable that is not defined or empty is an error rather than text kept as written.

Every container also gets service link variables (`service_env`, kube's pkg/kubelet/envvars):
those of the `kubernetes` Service always (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT,
KUBERNETES_PORT, KUBERNETES_PORT_443_TCP*, KUBERNETES_SERVICE_PORT_HTTPS) and, unless the pod
sets `enableServiceLinks: false`, those of every Service of its namespace that has a ClusterIP
(`service_links`), below anything the pod defines and usable in its `$(VAR)` references.  Other
Services' values are their ClusterIP and ports, as kube's.  The `kubernetes` Service's are too
when pods are on the pod network, where the node's service proxy forwards ClusterIPs; when pods
share the host's network no proxy runs, so its values are the address and port of its endpoints
(the apiserver itself) and in-cluster clients work there as well.  The variable names stay the
Service's (`KUBERNETES_PORT_443_TCP` even when the apiserver listens on 6443), as clients look
them up by those names.  Without endpoints the values fall back to the ClusterIP, as kube's.

The ConfigMaps, Secrets, the Service and its Endpoints come through `Sources` (read by the
kubelet's client); nothing here does I/O.

A `resourceFieldRef` to `limits.cpu`, `limits.memory` or `limits.ephemeral-storage` of a container
that sets no such limit reads the node's allocatable amount (`Sources.allocatable`), as kube's
kubelet defaults it (kubelet_resources.go): the container may use up to what the node has.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from machinery.objects import Obj, as_dict
from machinery.quantity import QuantityError, parse_quantity

API_SERVICE = ("default", "kubernetes")  # the Service every container's environment points at
Lookup = Callable[[str, str], Obj | None]  # (namespace, name) -> the object, or None
_VALID_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


class EnvError(Exception):
    """The environment cannot be built: the container does not start (CreateContainerConfigError)."""


def _no_token(audience: str, seconds: int) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class Sources:
    config_map: Lookup
    secret: Lookup
    token: Callable[[str, int], str | None] = _no_token  # (audience, seconds) -> the pod's token
    service_env: Mapping[str, str] = field(default_factory=dict)  # service_links() of the pod
    allocatable: Mapping[str, Any] = field(default_factory=dict)  # the node's status.allocatable
    # claim name -> the host directory of the volume bound to it (None: not bound yet)
    claims: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(slots=True)
class Env:
    values: dict[str, str] = field(default_factory=dict)  # in definition order
    invalid_keys: list[str] = field(default_factory=list)  # skipped envFrom keys, for an event


def expand(text: str, defined: Mapping[str, str]) -> str:
    """kube's $(VAR) expansion: defined references replaced, `$$` -> `$`, the rest as written."""
    return _expand(text, defined.get)


def expand_sub_path(expression: str, defined: Mapping[str, str]) -> str:
    """A volumeMount's `subPathExpr` expanded as kube's kubelet does it (ExpandContainerVolumeMounts):
    the same syntax as `expand`, but a reference to a variable that is not defined, or is
    empty, is an error naming every such variable; a path made of what is there would mount
    another directory than the pod meant."""
    missing: set[str] = set()

    def value(name: str) -> str:
        found = defined.get(name, "")
        if not found:
            missing.add(name)
        return found

    expanded = _expand(expression, value)
    if missing:
        raise EnvError(f"missing value for {', '.join(sorted(missing))}")
    return expanded


def _expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """`$(NAME)` replaced by `lookup(NAME)` (kept as written when that is None), `$$` -> `$`."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            end = text.find(")", i + 2)
            if end < 0:
                out.append(text[i:])  # no closing paren: kept as written
                break
            found = lookup(text[i + 2 : end])
            out.append(text[i : end + 1] if found is None else found)
            i = end + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _endpoint_of(endpoints: Obj | None, port_name: str) -> tuple[str, int] | None:
    """The first ready address of `endpoints` with the port named `port_name` (the only port when
    the Service names none)."""
    for subset in (endpoints or {}).get("subsets") or ():
        if not isinstance(subset, dict):
            continue
        ports = [p for p in subset.get("ports") or () if isinstance(p, dict)]
        port = next((p.get("port") for p in ports if str(p.get("name") or "") == port_name), None)
        if port is None and len(ports) == 1 and not port_name:
            port = ports[0].get("port")
        ips = [a.get("ip") for a in subset.get("addresses") or () if isinstance(a, dict)]
        if isinstance(port, int) and ips and isinstance(ips[0], str) and ips[0]:
            return ips[0], port
    return None


def _join(host: str, port: int) -> str:
    """Go's net.JoinHostPort: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def service_env(service: Obj, endpoints: Obj | None = None) -> dict[str, str]:
    """kube's service link variables of one Service; with `endpoints` (the `kubernetes` Service
    only), their address and port are the values while no service proxy runs (see the module's
    docstring).  A Service without a ClusterIP (headless, ExternalName) or ports has none."""
    spec = as_dict(service.get("spec"))
    cluster_ip = str(spec.get("clusterIP") or "")
    ports = [p for p in spec.get("ports") or () if isinstance(p, dict) and isinstance(p.get("port"), int)]
    if not cluster_ip or cluster_ip == "None" or not ports:
        return {}
    prefix = str(as_dict(service.get("metadata")).get("name") or "").upper().replace("-", "_")
    out: dict[str, str] = {}
    for i, port in enumerate(ports):
        name = str(port.get("name") or "")
        proto = str(port.get("protocol") or "TCP")
        host, number = _endpoint_of(endpoints, name) or (cluster_ip, int(port["port"]))
        url = f"{proto.lower()}://{_join(host, number)}"
        if i == 0:
            out[f"{prefix}_SERVICE_HOST"] = host
            out[f"{prefix}_SERVICE_PORT"] = str(number)
            out[f"{prefix}_PORT"] = url
        if name:
            out[f"{prefix}_SERVICE_PORT_{name.upper().replace('-', '_')}"] = str(number)
        link = f"{prefix}_PORT_{port['port']}_{proto.upper()}"
        out |= {link: url, f"{link}_PROTO": proto.lower(), f"{link}_PORT": str(number), f"{link}_ADDR": host}
    return out


def service_links(
    pod: Obj, services: Iterable[Obj], api_service: Obj | None, api_endpoints: Obj | None
) -> dict[str, str]:
    """The service variables of `pod` (kube's getServiceEnvVarMap): the API's Service's
    (`api_service`, API_SERVICE, with its endpoints) always, then, unless the pod sets
    `enableServiceLinks: false`, those of each of `services` in the pod's namespace with a
    ClusterIP; one there named `kubernetes` replaces the API's, as in kube.  Services come in
    name order (kube's is its map's, unordered), so the result does not vary between syncs."""
    namespace = str(as_dict(pod.get("metadata")).get("namespace") or "default")
    chosen: dict[str, tuple[Obj, Obj | None]] = {}
    if api_service is not None:
        chosen[str(as_dict(api_service.get("metadata")).get("name") or "")] = (api_service, api_endpoints)
    if as_dict(pod.get("spec")).get("enableServiceLinks") is not False:
        for service in services:
            meta = as_dict(service.get("metadata"))
            ip = str(as_dict(service.get("spec")).get("clusterIP") or "")
            if meta.get("namespace") != namespace or ip in ("", "None"):
                continue
            name = str(meta.get("name") or "")
            if (namespace, name) == API_SERVICE:
                continue  # the API's own Service, chosen above with its endpoints
            chosen[name] = (service, None)
    out: dict[str, str] = {}
    for name in sorted(chosen):
        service, endpoints = chosen[name]
        out |= service_env(service, endpoints)
    return out


def _data(obj: Obj, secret: bool) -> dict[str, str]:
    """A ConfigMap's data (and binaryData), or a Secret's data decoded (and stringData)."""
    out: dict[str, str] = {}
    if secret:
        for k, v in (obj.get("data") or {}).items():
            try:
                out[str(k)] = base64.b64decode(str(v), validate=True).decode("utf-8", "replace")
            except (binascii.Error, ValueError):
                continue
        out.update({str(k): str(v) for k, v in (obj.get("stringData") or {}).items()})
    else:
        out.update({str(k): str(v) for k, v in (obj.get("data") or {}).items()})
    return out


def field_ref(pod: Obj, path: str, where: str) -> str:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    if path == "status.podIPs":
        return ",".join(str(ip.get("ip")) for ip in status.get("podIPs") or () if isinstance(ip, dict))
    if path == "status.hostIPs":
        return ",".join(str(ip.get("ip")) for ip in status.get("hostIPs") or () if isinstance(ip, dict))
    m = _LABEL_FIELD.match(path)
    if m is not None:
        return str((meta.get(m[1]) or {}).get(m[2], ""))
    raise EnvError(f"{where}.valueFrom.fieldRef.fieldPath: unsupported field {path!r}")


def resource_ref(container: Obj, ref: Mapping[str, Any], where: str, allocatable: Mapping[str, Any]) -> str:
    """The container's limit or request in units of the divisor, rounded up; an unset limit is
    the node's `allocatable` amount (kube's defaulting), an unset request 0."""
    resource = str(ref.get("resource") or "")
    which, _, name = resource.partition(".")
    if which not in ("limits", "requests") or name not in ("cpu", "memory", "ephemeral-storage"):
        raise EnvError(f"{where}.valueFrom.resourceFieldRef.resource: unsupported resource {resource!r}")
    value = as_dict(as_dict(container.get("resources")).get(which)).get(name)
    if value is None and which == "limits":
        value = allocatable.get(name)
    if value is None:
        return "0"
    try:
        amount = parse_quantity(value)
        divisor = parse_quantity(ref.get("divisor") or "1")
    except QuantityError as e:
        raise EnvError(f"{where}.valueFrom.resourceFieldRef: {e}") from None
    if divisor.is_zero():
        divisor = parse_quantity("1")  # kube: a zero divisor (Go's zero Quantity, sent as "0") is 1
    if divisor.value < 0:
        raise EnvError(f"{where}.valueFrom.resourceFieldRef.divisor: must be positive")
    ratio = amount.value / divisor.value
    return str(-(-ratio.numerator // ratio.denominator))  # rounded up, as kube does


def _key_ref(pod: Obj, ref: Any, kind: str, sources: Sources, where: str) -> str | None:
    """The key's value, None for an optional one that is missing."""
    if not isinstance(ref, Mapping):
        raise EnvError(f"{where}: must be an object")
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    name, key, optional = str(ref.get("name") or ""), str(ref.get("key") or ""), ref.get("optional") is True
    secret = kind == "Secret"
    obj = (sources.secret if secret else sources.config_map)(namespace, name)
    if obj is None:
        if optional:
            return None
        raise EnvError(f'{kind.lower()} "{name}" not found')
    data = _data(obj, secret)
    if key not in data:
        if optional:
            return None
        raise EnvError(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return data[key]


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise EnvError(f"{where}: must be a list, got {type(value).__name__}")
    return value


def build(pod: Obj, container: Obj, sources: Sources, where: str = "container") -> Env:
    """The environment of `container` (an entry of the pod's containers or initContainers)."""
    env = Env()
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    for i, src in enumerate(_list(container.get("envFrom"), f"{where}.envFrom")):
        if not isinstance(src, Mapping):
            raise EnvError(f"{where}.envFrom[{i}]: must be an object")
        prefix = str(src.get("prefix") or "")
        for kind, ref_field, lookup in (
            ("ConfigMap", "configMapRef", sources.config_map),
            ("Secret", "secretRef", sources.secret),
        ):
            ref = src.get(ref_field)
            if not isinstance(ref, Mapping):
                continue
            name = str(ref.get("name") or "")
            obj = lookup(namespace, name)
            if obj is None:
                if ref.get("optional") is True:
                    continue
                raise EnvError(f'{kind.lower()} "{name}" not found')
            for key, value in _data(obj, kind == "Secret").items():
                full = prefix + key
                if _VALID_NAME.match(full):
                    env.values[full] = value
                else:
                    env.invalid_keys.append(full)
    for i, entry in enumerate(_list(container.get("env"), f"{where}.env")):
        here = f"{where}.env[{i}]"
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise EnvError(f"{here}: must be an object with a name")
        name = entry["name"]
        source = entry.get("valueFrom")
        if source is None:
            env.values[name] = expand(str(entry.get("value") or ""), ChainMap(env.values, dict(sources.service_env)))
            continue
        if not isinstance(source, Mapping):
            raise EnvError(f"{here}.valueFrom: must be an object")
        if isinstance(source.get("fieldRef"), Mapping):
            env.values[name] = field_ref(pod, str(source["fieldRef"].get("fieldPath") or ""), here)
        elif isinstance(source.get("resourceFieldRef"), Mapping):
            env.values[name] = resource_ref(container, source["resourceFieldRef"], here, sources.allocatable)
        elif source.get("configMapKeyRef") is not None or source.get("secretKeyRef") is not None:
            ref = "configMapKeyRef" if source.get("configMapKeyRef") is not None else "secretKeyRef"
            kind = "ConfigMap" if ref == "configMapKeyRef" else "Secret"
            found = _key_ref(pod, source[ref], kind, sources, f"{here}.valueFrom.{ref}")
            if found is not None:
                env.values[name] = found
        else:
            raise EnvError(f"{here}.valueFrom: names no source")
    for name, value in sources.service_env.items():  # what the pod defines wins, as kube's
        env.values.setdefault(name, value)
    return env
