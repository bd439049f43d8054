"""Which checks a level and version run, and the one-line verdict kube words from them.

Per policy version 1.x each check contributes the newest of its functions that applies by
then; restricted runs its own checks plus the baseline ones its checks do not override.
Checks run baseline first, then restricted, each group sorted by id, so messages are stable:
`allowPrivilegeEscalation != false (container "c" must ...), unrestricted capabilities (...)`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from apiserver.admission.podsecurity.checks import BASELINE, CHECKS, RESTRICTED, Check, CheckFn, Result
from apiserver.version import KUBE_MINOR
from machinery.objects import Obj

LATEST_MINOR = int(KUBE_MINOR)  # `latest`, and any newer v1.x, evaluate as the version we serve
PRIVILEGED = "privileged"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)


@dataclass(frozen=True, slots=True)
class LevelVersion:
    level: str
    minor: int | None = None  # None: latest

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.minor is None else f'v1.{self.minor}'}"


def _applicable(check: Check, minor: int) -> tuple[CheckFn, tuple[str, ...]] | None:
    chosen = None
    for v in check.versions:
        if v.minimum <= minor:
            chosen = (v.fn, v.overrides)
    return chosen


@functools.cache
def checks_for(level: str, minor: int) -> tuple[CheckFn, ...]:
    """The check functions `level` at version 1.`minor` runs, in message order."""
    if level == PRIVILEGED:
        return ()
    found: dict[str, tuple[CheckFn, tuple[str, ...]]] = {}
    for check in CHECKS:
        if check.level == BASELINE or (level == RESTRICTED and check.level == RESTRICTED):
            chosen = _applicable(check, minor)
            if chosen is not None:
                found[check.id] = chosen
    overridden = {o for _, overrides in found.values() for o in overrides}
    level_of = {c.id: c.level for c in CHECKS}
    order = sorted(i for i in found if level_of[i] == BASELINE) + sorted(i for i in found if level_of[i] == RESTRICTED)
    return tuple(found[i][0] for i in order if i not in overridden)


def evaluate(lv: LevelVersion, meta: Obj, spec: Obj) -> list[Result]:
    """The failed checks of a pod (metadata, spec) at `lv`; empty when it passes."""
    minor = LATEST_MINOR if lv.minor is None else min(lv.minor, LATEST_MINOR)
    failures = []
    for check in checks_for(lv.level, minor):
        result = check(meta, spec)
        if result is not None:
            failures.append(result)
    return failures


def detail(failures: list[Result]) -> str:
    """`reason (detail), reason (detail)`: the part after `violates PodSecurity "...": `."""
    return ", ".join(f"{f.reason} ({f.detail})" if f.detail else f.reason for f in failures)


def reasons(failures: list[Result]) -> str:
    return ", ".join(f.reason for f in failures)
