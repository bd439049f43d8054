"""The authenticated user a request runs as (what authorization and audit will see)."""

from __future__ import annotations

from dataclasses import dataclass

ANONYMOUS = "system:anonymous"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
AUTHENTICATED_GROUP = "system:authenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class User:
    """A user as Kubernetes names one: a name, its groups, an optional unique id, and extra
    attributes (a service-account token's pod name, impersonation's `Impersonate-Extra-*`)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def extra_dict(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.extra}


def service_account_user(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:<ns>:<name>` user name, else None."""
    if not username.startswith(SERVICE_ACCOUNT_PREFIX):
        return None
    namespace, sep, name = username[len(SERVICE_ACCOUNT_PREFIX) :].partition(":")
    if not sep or not namespace or not name or ":" in name:
        return None
    return namespace, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
