"""A namespace's Pod Security policy, from its labels, as kube reads them:
`pod-security.kubernetes.io/<mode>` (privileged, baseline, restricted) and `<mode>-version`
(`latest` or `v1.x`) for the modes enforce, audit and warn.

A bad value is reported (a namespace write with one is refused) but still yields a policy:
enforce falls back to restricted (fail closed), audit and warn to privileged (fail open).
warn follows enforce when only enforce is set and is stricter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apiserver import validation as v
from apiserver.admission.podsecurity.evaluate import LEVELS, PRIVILEGED, LevelVersion
from apiserver.errors import Cause

PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")
_STRICTNESS = {PRIVILEGED: 0, "baseline": 1, "restricted": 2}
PRIVILEGED_LATEST = LevelVersion(PRIVILEGED)


@dataclass(frozen=True, slots=True)
class Policy:
    enforce: LevelVersion = PRIVILEGED_LATEST
    audit: LevelVersion = PRIVILEGED_LATEST
    warn: LevelVersion = PRIVILEGED_LATEST

    def fully_privileged(self) -> bool:
        return all(m.level == PRIVILEGED for m in (self.enforce, self.audit, self.warn))


@dataclass(frozen=True, slots=True)
class Parsed:
    policy: Policy
    errors: list[Cause] = field(default_factory=list)


def parse_level(value: str) -> str | None:
    return value if value in LEVELS else None


def parse_version(value: str) -> tuple[int | None, bool]:
    """(minor or None for latest, valid)."""
    if value == "latest":
        return None, True
    m = _VERSION.match(value)
    if m is None or len(m.group(1)) > 9:
        return None, False
    return int(m.group(1)), True


def _field(label: str) -> str:
    return v.key("metadata.labels", label)


def policy_of(labels: Mapping[str, Any] | None, defaults: Policy | None = None) -> Parsed:
    """The policy the labels ask for, over `defaults` (all privileged) for what they leave out."""
    defaults = defaults or Policy()
    if not labels:
        return Parsed(defaults)
    modes = {"enforce": defaults.enforce, "audit": defaults.audit, "warn": defaults.warn}
    errors: list[Cause] = []
    enforce_level_set = False
    for mode in MODES:
        current = modes[mode]
        level_label, version_label = PREFIX + mode, f"{PREFIX}{mode}-version"
        level, minor = current.level, current.minor
        if level_label in labels:
            raw = str(labels[level_label])
            parsed = parse_level(raw)
            if parsed is None:
                errors.append(v.invalid(_field(level_label), raw, "must be one of privileged, baseline, restricted"))
                level = "restricted" if mode == "enforce" else PRIVILEGED
            else:
                level = parsed
                enforce_level_set = enforce_level_set or mode == "enforce"
        if version_label in labels:
            raw = str(labels[version_label])
            minor, ok = parse_version(raw)
            if not ok:
                errors.append(v.invalid(_field(version_label), raw, 'must be "latest" or "v1.x"'))
        modes[mode] = LevelVersion(level, minor)
    warn, enforce = modes["warn"], modes["enforce"]
    if PREFIX + "warn" not in labels and enforce_level_set and _STRICTNESS[enforce.level] > _STRICTNESS[warn.level]:
        minor = warn.minor if f"{PREFIX}warn-version" in labels else enforce.minor
        modes["warn"] = LevelVersion(enforce.level, minor)
    return Parsed(Policy(modes["enforce"], modes["audit"], modes["warn"]), errors)


def stricter(a: LevelVersion, b: LevelVersion) -> bool:
    """Whether `a` asks strictly more than `b` at the same version."""
    return _STRICTNESS[a.level] > _STRICTNESS[b.level]
