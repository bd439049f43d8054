"""What a pod's environment and volumes read from the apiserver, read again at each sync: the
`default/kubernetes` Service and its Endpoints (every container's KUBERNETES_* variables), the
Services of its namespace (from the kubelet's Services informer, `services`: the pod's service
link variables need them all, and a GET per Service cannot find them), the
ConfigMaps and Secrets it names (the Node authorizer lets a kubelet get those of its own pods,
never list them all) and its service account tokens (tokens.py).  A missing object reads as
None; the pod's env or volume code decides whether that stops a container.

What was read is kept for `CACHE_TTL_S` (kube's kubelet caches them too): every pod is synced
every second and every pod names `kube-root-ca.crt` (its service account volume), so reading
afresh each time would be a GET per pod per second, which a thousand pods turn into the
apiserver's whole load.  A ConfigMap update reaches a running pod's volume within the TTL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from components.client.rest import ApiError, RestClient, path_of
from components.kubelet.envvars import API_SERVICE, Sources, service_links
from components.kubelet.tokens import TokenCache
from machinery.objects import Obj

log = logging.getLogger("raftkube.kubelet")
CACHE_TTL_S = 10.0
CACHE_MAX = 10_000  # entries; past it the expired ones are dropped
ServiceLister = Callable[[str], list[Obj]]  # namespace -> its Services


def _no_services(namespace: str) -> list[Obj]:
    return []


def claims_of(pod: Obj) -> list[str]:
    """The PersistentVolumeClaims the pod's volumes name."""
    out = []
    for v in (pod.get("spec") or {}).get("volumes") or ():
        claim = v.get("persistentVolumeClaim") if isinstance(v, dict) else None
        if isinstance(claim, dict) and isinstance(claim.get("claimName"), str) and claim["claimName"]:
            out.append(claim["claimName"])
    return out


def references(pod: Obj) -> tuple[set[str], set[str]]:
    """The names of the ConfigMaps and Secrets the pod's containers and volumes refer to."""
    maps: set[str] = set()
    secrets: set[str] = set()
    spec = pod.get("spec") or {}
    for c in list(spec.get("containers") or ()) + list(spec.get("initContainers") or ()):
        if not isinstance(c, dict):
            continue
        for src in c.get("envFrom") or ():
            if isinstance(src, dict):
                if isinstance(src.get("configMapRef"), dict):
                    maps.add(str(src["configMapRef"].get("name") or ""))
                if isinstance(src.get("secretRef"), dict):
                    secrets.add(str(src["secretRef"].get("name") or ""))
        for e in c.get("env") or ():
            source = e.get("valueFrom") if isinstance(e, dict) else None
            if isinstance(source, dict):
                if isinstance(source.get("configMapKeyRef"), dict):
                    maps.add(str(source["configMapKeyRef"].get("name") or ""))
                if isinstance(source.get("secretKeyRef"), dict):
                    secrets.add(str(source["secretKeyRef"].get("name") or ""))
    for v in spec.get("volumes") or ():
        if not isinstance(v, dict):
            continue
        projected = (v.get("projected") or {}).get("sources") if isinstance(v.get("projected"), dict) else None
        for src in [v, *(s for s in projected or () if isinstance(s, dict))]:
            if isinstance(src.get("configMap"), dict):
                maps.add(str(src["configMap"].get("name") or ""))
            if isinstance(src.get("secret"), dict):
                secret = src["secret"]
                secrets.add(str(secret.get("secretName") or secret.get("name") or ""))
    return maps - {""}, secrets - {""}


class PodSources:
    def __init__(
        self, client: RestClient, clock: Callable[[], float] = time.monotonic, services: ServiceLister = _no_services
    ) -> None:
        self.client = client
        self.services = services  # set by the kubelet once its Services informer runs
        # pods reach ClusterIPs through a service proxy (the pod network): the `kubernetes`
        # Service's variables are then its ClusterIP and port, as kube's; else its endpoints
        self.proxied = False
        self.clock = clock
        self.tokens = TokenCache(self._post)
        self._cache: dict[tuple[str, str, str], tuple[float, Obj | None]] = {}  # -> (read at, object)

    async def _post(self, path: str, body: Obj) -> Obj:
        return await self.client.create(path, body)

    async def read(self, pod: Obj, *, tokens: bool, allocatable: Mapping[str, Any] | None = None) -> Sources:
        """The pod's sources as they are now; `tokens`: ask for its service account tokens too
        (not for fake containers, which have no files); `allocatable`: the node's, which unset
        limits read as."""
        ns = str((pod.get("metadata") or {}).get("namespace") or "default")
        maps, secrets = references(pod)
        found: dict[tuple[str, str], Obj | None] = {}
        for kind, names in (("configmaps", maps), ("secrets", secrets)):
            for name in names:
                found[(kind, name)] = await self._get(kind, ns, name)
        held: dict[tuple[str, int], str] = {}
        if tokens:
            try:
                held = await self.tokens.refresh(pod)
            except ApiError as e:  # the pod waits for its volume; asked again at the next sync
                log.warning("pod %s/%s: no service account token: %s", ns, (pod.get("metadata") or {}).get("name"), e)
        return Sources(
            lambda _ns, name: found.get(("configmaps", name)),
            lambda _ns, name: found.get(("secrets", name)),
            lambda audience, seconds: held.get((audience, seconds)),
            await self._service_env(pod, ns),
            dict(allocatable or {}),
            {name: await self._claim_path(ns, name) for name in claims_of(pod)},
        )

    async def _claim_path(self, ns: str, name: str) -> str | None:
        """The host directory of the volume bound to the claim (its hostPath or local path);
        None while it is unbound.  An unbound claim is read afresh at each sync (the pod waits
        for it), a bound one and its volume are cached as the ConfigMaps are."""
        claim = await self._get("persistentvolumeclaims", ns, name)
        volume_name = ((claim or {}).get("spec") or {}).get("volumeName")
        if claim is None or not volume_name or ((claim.get("status") or {}).get("phase")) != "Bound":
            self._cache.pop(("persistentvolumeclaims", ns, name), None)
            return None
        volume = await self._get("persistentvolumes", "", str(volume_name))
        source = (volume or {}).get("spec") or {}
        for kind in ("hostPath", "local"):
            path = (source.get(kind) or {}).get("path") if isinstance(source.get(kind), dict) else None
            if isinstance(path, str) and path.startswith("/"):
                return path
        self._cache.pop(("persistentvolumes", "", str(volume_name)), None)
        return None

    async def _service_env(self, pod: Obj, ns: str) -> dict[str, str]:
        """The pod's service variables: the `default/kubernetes` Service and its Endpoints (read as
        the ConfigMaps are, so cached for CACHE_TTL_S), and the namespace's Services."""
        service = await self._get("services", API_SERVICE[0], API_SERVICE[1])
        endpoints = None
        if service is not None and not self.proxied:
            endpoints = await self._get("endpoints", API_SERVICE[0], API_SERVICE[1])
        return service_links(pod, self.services(ns), service, endpoints)

    async def _get(self, kind: str, ns: str, name: str) -> Obj | None:
        key, now = (kind, ns, name), self.clock()
        held = self._cache.get(key)
        if held is not None and now - held[0] < CACHE_TTL_S:
            return held[1]
        try:
            obj: Obj | None = await self.client.get(path_of("", "v1", kind, ns or None, name))
        except ApiError:  # NotFoundError among them: the object is missing
            obj = None
        if len(self._cache) >= CACHE_MAX:
            self._cache = {k: v for k, v in self._cache.items() if now - v[0] < CACHE_TTL_S}
        self._cache[key] = (now, obj)
        return obj

    def forget(self, uid: str) -> None:
        """The pod is gone: its tokens go too."""
        self.tokens.forget(uid)
