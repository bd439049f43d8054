"""The authorizer contract, and the chain that asks each authorizer in turn.

An authorizer answers ALLOW, DENY or NO_OPINION (kube's three decisions): the first answer
that is not NO_OPINION decides, and a request nobody allowed is refused.  Order as kube's
default: system:masters, then the Node authorizer, then RBAC.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from apiserver.authz.attributes import Attributes

MASTERS_GROUP = "system:masters"


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no-opinion"


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision is Decision.ALLOW


class Authorizer(Protocol):
    def authorize(self, attrs: Attributes) -> Verdict: ...


NO_OPINION = Verdict(Decision.NO_OPINION)


class PrivilegedGroups:
    """Members of system:masters may do anything, whatever RBAC holds (kube's superuser group)."""

    def __init__(self, groups: Sequence[str] = (MASTERS_GROUP,)) -> None:
        self._groups = frozenset(groups)

    def authorize(self, attrs: Attributes) -> Verdict:
        if self._groups.intersection(attrs.user.groups):
            return Verdict(Decision.ALLOW, "the user is in a privileged group")
        return NO_OPINION


class AllowAll:
    """Every request allowed: the `--authorization-mode AlwaysAllow` of a test or a bench baseline."""

    def authorize(self, attrs: Attributes) -> Verdict:
        return Verdict(Decision.ALLOW)


class Chain:
    """Asks each authorizer in order; the first decision wins, no decision is a refusal."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)

    def authorize(self, attrs: Attributes) -> Verdict:
        reasons: list[str] = []
        for authorizer in self.authorizers:
            verdict = authorizer.authorize(attrs)
            if verdict.decision is not Decision.NO_OPINION:
                return verdict
            if verdict.reason:
                reasons.append(verdict.reason)
        return Verdict(Decision.DENY, ", ".join(reasons))
