"""`kubectl --as`: a request that asks to run as someone else (the `Impersonate-*` headers).

Each thing asked for is authorized as its own `impersonate` request, as kube does: the user
name (`users`, or `serviceaccounts` in its namespace for a service account), each group
(`groups`), the uid (`uids.authentication.k8s.io`) and each extra value
(`userextras/<key>.authentication.k8s.io`).  Only when every one is allowed does the request
go on as the impersonated user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import unquote

from apiserver import errors
from apiserver.auth.user import (
    ANONYMOUS,
    AUTHENTICATED_GROUP,
    UNAUTHENTICATED_GROUP,
    User,
    service_account_groups,
    split_service_account,
)
from apiserver.authz.attributes import Attributes
from apiserver.authz.forbidden import forbidden

USER_HEADER = b"impersonate-user"
GROUP_HEADER = b"impersonate-group"
UID_HEADER = b"impersonate-uid"
EXTRA_PREFIX = b"impersonate-extra-"
_MAX_VALUES = 64
_MAX_VALUE_BYTES = 1024


def _text(value: bytes, header: str) -> str:
    if len(value) > _MAX_VALUE_BYTES:
        raise errors.bad_request(f"header {header}: longer than {_MAX_VALUE_BYTES} bytes")
    try:
        text = value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise errors.bad_request(f"header {header}: not UTF-8") from None
    if not text:
        raise errors.bad_request(f"header {header}: empty")
    return text


def _unescape_key(raw: bytes) -> str:
    """Extra keys travel percent-encoded in header names (`Impersonate-Extra-acme.com%2Fteam`)."""
    return unquote(raw.decode("latin-1")).lower()


def requested(headers: Iterable[tuple[bytes, bytes]]) -> User | None:
    """The user the headers ask for, or None when they ask for nothing."""
    name: str | None = None
    groups: list[str] = []
    uid = ""
    extra: dict[str, list[str]] = {}
    count = 0
    for key, value in headers:
        if not key.startswith(b"impersonate-"):
            continue
        count += 1
        if count > _MAX_VALUES:
            raise errors.bad_request(f"more than {_MAX_VALUES} Impersonate-* headers")
        if key == USER_HEADER:
            if name is not None:
                raise errors.bad_request("header Impersonate-User: given more than once")
            name = _text(value, "Impersonate-User")
        elif key == GROUP_HEADER:
            groups.append(_text(value, "Impersonate-Group"))
        elif key == UID_HEADER:
            uid = _text(value, "Impersonate-Uid")
        elif key.startswith(EXTRA_PREFIX) and len(key) > len(EXTRA_PREFIX):
            extra_key = _unescape_key(key[len(EXTRA_PREFIX) :])
            extra.setdefault(extra_key, []).append(_text(value, "Impersonate-Extra-" + extra_key))
        else:
            raise errors.bad_request(f"unknown impersonation header {key.decode('latin-1')!r}")
    if name is None:
        if groups or uid or extra:
            raise errors.bad_request("Impersonate-Group, -Uid and -Extra need Impersonate-User as well")
        return None
    return User(name, tuple(groups), uid, tuple((k, tuple(v)) for k, v in sorted(extra.items())))


def _check(
    actor: User, authorize: Callable[[Attributes], bool], resource: str, name: str, *, group: str = "", ns: str = ""
) -> None:
    attrs = Attributes(
        user=actor,
        verb="impersonate",
        resource_request=True,
        namespace=ns,
        api_group=group,
        resource=resource.split("/", 1)[0],
        subresource=resource.split("/", 1)[1] if "/" in resource else "",
        name=name,
    )
    if not authorize(attrs):
        raise forbidden(attrs)


def impersonate(actor: User, wanted: User, authorize: Callable[[Attributes], bool]) -> User:
    """The user to run as, once `actor` was allowed every part of `wanted` (else 403)."""
    sa = split_service_account(wanted.name)
    if sa is not None:
        _check(actor, authorize, "serviceaccounts", sa[1], ns=sa[0])
    else:
        _check(actor, authorize, "users", wanted.name)
    for group in wanted.groups:
        _check(actor, authorize, "groups", group)
    if wanted.uid:
        _check(actor, authorize, "uids", wanted.uid, group="authentication.k8s.io")
    for key, values in wanted.extra:
        for value in values:
            _check(actor, authorize, f"userextras/{key}", value, group="authentication.k8s.io")
    groups = list(wanted.groups)
    if sa is not None and not groups:
        groups.extend(service_account_groups(sa[0]))
    extra_group = UNAUTHENTICATED_GROUP if wanted.name == ANONYMOUS else AUTHENTICATED_GROUP
    if extra_group not in groups:
        groups.append(extra_group)
    return User(wanted.name, tuple(groups), wanted.uid, wanted.extra)
