"""What kind of resource a name is (core/v1/helper's IsNativeResource, IsExtendedResourceName,
IsHugePageResourceName, IsAttachableVolumeResourceName; the scheduler's IsScalarResourceName).

A name without a domain, or in the `kubernetes.io/` domain, is native: kube defines it.  Any
other `domain/name` is extended: a device plugin or an operator advertises it on a node's status
and pods request it in whole units, never overcommitted.  The scheduler adds up every "scalar"
resource beyond cpu, memory and ephemeral storage by name: extended ones, `hugepages-<size>`,
`attachable-volumes-*`, and native ones written with the `kubernetes.io/` prefix.  The answers
depend on the name alone, and a cluster has few names, so they are cached (bounded: a hostile
name only churns the cache).
"""

from __future__ import annotations

import functools

from machinery.selectors import key_problem

NATIVE_DOMAIN = "kubernetes.io/"
QUOTA_REQUESTS_PREFIX = "requests."
HUGEPAGES_PREFIX = "hugepages-"
ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"


def is_prefixed_native(name: str) -> bool:
    """In the kubernetes.io/ domain, written with it (kube checks for the domain anywhere in it)."""
    return NATIVE_DOMAIN in name


def is_native(name: str) -> bool:
    """Defined by kube: no domain at all, or the kubernetes.io/ domain."""
    return "/" not in name or is_prefixed_native(name)


def is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_attachable_volumes(name: str) -> bool:
    return name.startswith(ATTACHABLE_VOLUMES_PREFIX)


@functools.lru_cache(maxsize=4096)
def is_extended(name: str) -> bool:
    """Outside kube's domain, and still a qualified name once quota prefixes it with `requests.`
    (its quota is `requests.<name>`, so a name that cannot be one is no extended resource)."""
    if is_native(name) or name.startswith(QUOTA_REQUESTS_PREFIX):
        return False
    return key_problem(QUOTA_REQUESTS_PREFIX + name) is None


@functools.lru_cache(maxsize=4096)
def is_scalar(name: str) -> bool:
    """Counted by name by the scheduler, besides cpu, memory and ephemeral-storage."""
    return is_extended(name) or is_hugepages(name) or is_prefixed_native(name) or is_attachable_volumes(name)
