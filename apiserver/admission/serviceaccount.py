"""ServiceAccount admission: every pod runs as a service account, and gets its API token.

As kube's plugin: a pod that names no account runs as `default`; a named account must exist
(403 otherwise); unless the pod or its account turns `automountServiceAccountToken` off, the
pod gets the projected `kube-api-access-xxxxx` volume (a bound token, the cluster CA and the
namespace) mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount in every
container.  A missing `default` account is tolerated: the service-account controller, which
creates it in each namespace, comes with the controller-manager.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest, is_pod_create
from machinery.objects import Obj

MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3607  # kube's bound-token lifetime for pods (an hour, plus a little to spread refreshes)
_SUFFIX_LETTERS = "bcdfghjklmnpqrstvwxz2456789"

# (namespace, name) -> the ServiceAccount, or None when it does not exist
AccountLookup = Callable[[str, str], Obj | None]
# the same, read from storage: for an account the cache has not seen yet (just created)
AccountFetch = Callable[[str, str], Awaitable[Obj | None]]


_suffixes = random.Random()


def random_suffix() -> str:
    """Five letters, as kube's utilrand.String(5): a name that needs to differ, not a secret
    (one urandom read per letter cost every pod create 20 us)."""
    return "".join(_suffixes.choices(_SUFFIX_LETTERS, k=5))


def api_access_volume(name: str) -> Obj:
    return {
        "name": name,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
        },
    }


class ServiceAccountAdmission:
    name = "ServiceAccount"

    def __init__(
        self, lookup: AccountLookup, fetch: AccountFetch | None = None, suffix: Callable[[], str] = random_suffix
    ) -> None:
        self._lookup = lookup
        self._fetch = fetch
        self._suffix = suffix

    def handles(self, request: AdmissionRequest) -> bool:
        return is_pod_create(request)

    async def admit(self, request: AdmissionRequest) -> None:
        pod = request.object
        assert pod is not None and request.namespace
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return  # validation refuses it
        account_name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        if not isinstance(account_name, str):
            return
        spec["serviceAccountName"] = account_name
        spec["serviceAccount"] = account_name  # the deprecated alias kube keeps in step
        account = self._lookup(request.namespace, account_name)
        if account is None and self._fetch is not None and account_name != "default":
            # kube's live lookup on a cache miss (an account created a moment ago); a missing
            # `default` is tolerated anyway, and looking it up would cost every pod a read
            account = await self._fetch(request.namespace, account_name)
        if account is None and account_name != "default":
            raise errors.forbidden(
                f'pods "{request.name}" is forbidden: error looking up service account '
                f'{request.namespace}/{account_name}: serviceaccount "{account_name}" not found'
            )
        if not _automount(spec, account):
            return
        self._mount_token(spec)

    def _mount_token(self, spec: Obj) -> None:
        groups = [c for f in ("initContainers", "containers") for c in (spec.get(f) or []) if isinstance(c, dict)]
        if any(_mounts(c, MOUNT_PATH) for c in groups):
            return  # the pod mounts something there itself: leave it
        volumes = spec.setdefault("volumes", [])
        if not isinstance(volumes, list):
            return
        volume = f"kube-api-access-{self._suffix()}"
        volumes.append(api_access_volume(volume))
        for container in groups:
            mounts = container.setdefault("volumeMounts", [])
            if isinstance(mounts, list):
                mounts.append({"name": volume, "readOnly": True, "mountPath": MOUNT_PATH})


def _automount(spec: Obj, account: Obj | None) -> bool:
    own = spec.get("automountServiceAccountToken")
    if isinstance(own, bool):
        return own
    return not (account is not None and account.get("automountServiceAccountToken") is False)


def _mounts(container: Obj, path: str) -> bool:
    mounts = container.get("volumeMounts")
    return isinstance(mounts, list) and any(isinstance(m, dict) and m.get("mountPath") == path for m in mounts)
