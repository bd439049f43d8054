"""The policies and bindings in force: read from two live sources (the watch caches of
validatingadmissionpolicies and validatingadmissionpolicybindings), rebuilt only when one
of them changed, and each policy compiled once per generation of its object."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Protocol

from apiserver.admission.policy.binding import CompiledBinding, compile_binding
from apiserver.admission.policy.compiled import CompiledPolicy, compile_policy
from machinery.objects import Obj, metadata


class Source(Protocol):
    """What a watch cache (`Cacher`) offers: its objects, and a number that moves when they change."""

    @property
    def generation(self) -> int: ...

    def objects(self) -> Iterator[Obj]: ...


class NoObjects:
    """The source of a resource this server does not serve: never any policy."""

    generation = 0

    def objects(self) -> Iterator[Obj]:
        return iter(())


@dataclass(frozen=True)
class PolicySet:
    """Every policy that has a binding, by name, with its bindings (both in name order)."""

    pairs: tuple[tuple[CompiledPolicy, tuple[CompiledBinding, ...]], ...] = ()


def _compile_key(obj: Obj) -> Hashable:
    meta = metadata(obj)
    return (meta.get("name"), meta.get("uid"), meta.get("generation"), meta.get("resourceVersion"))


class LivePolicies:
    def __init__(self, policies: Source, bindings: Source) -> None:
        self._policies = policies
        self._bindings = bindings
        self._version: tuple[int, int] | None = None
        self._set = PolicySet()
        self._compiled: dict[Hashable, CompiledPolicy] = {}

    def current(self) -> PolicySet:
        version = (self._policies.generation, self._bindings.generation)
        if version != self._version:
            self._set = self._build()
            self._version = version
        return self._set

    def _build(self) -> PolicySet:
        by_policy: dict[str, list[CompiledBinding]] = {}
        for obj in self._bindings.objects():
            binding = compile_binding(obj)
            by_policy.setdefault(binding.policy_name, []).append(binding)
        compiled: dict[Hashable, CompiledPolicy] = {}
        pairs = []
        for obj in self._policies.objects():
            key = _compile_key(obj)
            policy = self._compiled.get(key) or compile_policy(obj)
            compiled[key] = policy
            bindings = by_policy.get(policy.name)
            if bindings:
                pairs.append((policy, tuple(sorted(bindings, key=lambda b: b.name))))
        self._compiled = compiled
        pairs.sort(key=lambda p: p[0].name)
        return PolicySet(tuple(pairs))
