"""The `services/proxy` subresource: `/api/v1/namespaces/NS/services/[SCHEME:]NAME[:PORT]/proxy/PATH`
relays each HTTP method to one ready endpoint of the Service, as kube-apiserver's service
REST ResourceLocation does.

PORT is a service port's name or number (none: the port without a name); the endpoint is a
random ready address of the EndpointSlices of the Service whose port has that port's name,
dialled at the slice's port (the targetPort resolved by the endpointslice controller).
ExternalName Services and Services without a ready endpoint answer 503 ServiceUnavailable in
kube's words.  The relay (and its limits) is the pod proxy's (apiserver.http.pod_proxy,
subresources.relay).
"""

from __future__ import annotations

import random
from typing import ClassVar
from urllib.parse import quote

from starlette.requests import Request

from apiserver import errors
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.pod_proxy import parse_target
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.subresources.relay import RelayHandler
from apiserver.service_routing import host_port, slices_of
from machinery.objects import Obj, as_dict

_rng = random.Random()


def _service_port(service: Obj, port: str) -> Obj:
    for candidate in as_dict(service.get("spec")).get("ports") or []:
        candidate = as_dict(candidate)
        if (port.isdigit() and candidate.get("port") == int(port)) or (
            not port.isdigit() and (candidate.get("name") or "") == port
        ):
            return candidate
    name = as_dict(service.get("metadata")).get("name")
    raise errors.unavailable(f'no service port "{port}" found for service "{name}"')


def endpoint_of(service: Obj, slices: list[Obj], port: str, rng: random.Random = _rng) -> str:
    """`host:port` of a random ready endpoint of the service's `port` (name or number)."""
    name = as_dict(service.get("metadata")).get("name")
    if as_dict(service.get("spec")).get("type") == "ExternalName":
        raise errors.unavailable(f'no endpoints available for service "{name}"')
    port_name = _service_port(service, port).get("name") or ""
    found: list[str] = []
    for slice_ in slices:
        for p in slice_.get("ports") or []:
            p = as_dict(p)
            number = p.get("port")
            if (p.get("name") or "") != port_name or not isinstance(number, int) or isinstance(number, bool):
                continue
            for endpoint in slice_.get("endpoints") or []:
                endpoint = as_dict(endpoint)
                addresses = endpoint.get("addresses") or []
                if as_dict(endpoint.get("conditions")).get("ready") is not False and addresses:
                    found.append(host_port(str(addresses[0]), number))
    if not found:
        raise errors.unavailable(f'no endpoints available for service "{name}"')
    return rng.choice(found)


class ServiceProxyHandler(RelayHandler):
    resource: ClassVar[str] = "services"

    async def upstream_url(self, scope: ResourceScope, request: Request, target: ResourcePath) -> str:
        assert target.name is not None and target.namespace is not None
        where = parse_target(target.name)
        services = scope.by_path.get(("", "v1", "services"))
        slice_res = scope.by_path.get(("discovery.k8s.io", "v1", "endpointslices"))
        if services is None or slice_res is None or slice_res not in scope.caches:
            raise errors.unavailable("this apiserver does not proxy to services")
        service = await scope.registries[services].get(target.namespace, where.name)
        slices = slices_of(where.name, scope.caches[slice_res].objects(target.namespace))
        address = endpoint_of(service, slices, where.port)
        path = "/" + quote(target.subpath.lstrip("/"), safe="/:@!$&'()*+,;=-._~%")
        query = request.url.query
        return f"{where.scheme or 'http'}://{address}{path}" + (f"?{query}" if query else "")
