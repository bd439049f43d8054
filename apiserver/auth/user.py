"""The authenticated user a request runs as (what authorization and audit will see)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class User:
    """A user as Kubernetes names one: a name, its groups, and an optional unique id."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
