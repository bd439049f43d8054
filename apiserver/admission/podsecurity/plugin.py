"""The PodSecurity admission plugin: pods are held to their namespace's Pod Security policy.

As kube-apiserver's built-in plugin does it:
- a pod create (or an update that changes an image or adds an ephemeral container) that fails
  the `enforce` level is refused, 403 `pods "p" is forbidden: violates PodSecurity
  "restricted:latest": ...`; one that fails `warn` gets a `would violate PodSecurity` warning
  (not when it is refused anyway); `audit` is evaluated but raftkube has no audit log, so it
  is only logged at debug level;
- the pod templates of workloads (deployments, jobs, ...) are never refused, only warned about;
- a namespace whose labels name a bad level or version is refused (422); raising a namespace's
  enforce level warns about the existing pods that would violate it;
- exempt usernames, namespaces and runtime classes skip everything (kube exempts nothing by
  default, and neither do we).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from apiserver import errors
from apiserver.admission.by_version import ByVersion
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.podsecurity.evaluate import PRIVILEGED, LevelVersion, detail, evaluate, reasons
from apiserver.admission.podsecurity.policy import MODES, PREFIX, Parsed, Policy, policy_of, stricter
from apiserver.admission.refusal import forbidden
from apiserver.warnings import add_warning
from machinery.objects import Obj, as_dict, labels

log = logging.getLogger("raftkube.apiserver.podsecurity")

NamespaceGetter = Callable[[str], Awaitable[Obj | None]]
PodsIn = Callable[[str], Iterable[Obj]]

# the kinds whose objects hold a pod template, and where the template is
TEMPLATES: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "replicationcontrollers"): ("spec", "template"),
    ("", "podtemplates"): ("template",),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
# pod subresources that cannot change what the standards look at
IGNORED_POD_SUBRESOURCES = frozenset({"exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"})
MAX_PODS_TO_CHECK = 3000  # existing pods a namespace label change looks at, as kube's default


@dataclass(frozen=True)
class Exemptions:
    usernames: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()
    runtime_classes: frozenset[str] = frozenset()


def _images(spec: Obj, group: str) -> list[Any]:
    found = spec.get(group)
    return [c.get("image") if isinstance(c, dict) else c for c in (found if isinstance(found, list) else [])]


def significant_pod_update(new: Obj, old: Obj) -> bool:
    """Whether an update can change the verdict: a changed image, a container more or fewer, a new
    or changed ephemeral container (everything else a pod update may change is not checked)."""
    new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
    for group in ("containers", "initContainers"):
        if _images(new_spec, group) != _images(old_spec, group):
            return True
    old_ephemeral = {
        c.get("name"): c.get("image") for c in old_spec.get("ephemeralContainers") or [] if isinstance(c, dict)
    }
    for c in new_spec.get("ephemeralContainers") or []:
        if not isinstance(c, dict) or c.get("name") not in old_ephemeral:
            return True
        if c.get("image") != old_ephemeral[c.get("name")]:
            return True
    return False


def _template(obj: Obj, path: tuple[str, ...]) -> Obj | None:
    here: Any = obj
    for step in path:
        here = here.get(step) if isinstance(here, dict) else None
    return here if isinstance(here, dict) else None


class PodSecurity:
    name = "PodSecurity"

    def __init__(
        self,
        namespace: NamespaceGetter,
        pods_in: PodsIn,
        exemptions: Exemptions | None = None,
        defaults: Policy | None = None,
    ) -> None:
        self._namespace = namespace
        self._pods_in = pods_in
        self._exempt = exemptions or Exemptions()
        self._defaults = defaults or Policy()
        self._policies = ByVersion(lambda ns: policy_of(labels(dict(ns)), self._defaults))

    def handles(self, request: AdmissionRequest) -> bool:
        if request.operation not in ("CREATE", "UPDATE"):
            return False
        key = (request.resource.group, request.resource.plural)
        return key in (("", "pods"), ("", "namespaces")) or key in TEMPLATES

    async def validate(self, request: AdmissionRequest) -> None:
        key = (request.resource.group, request.resource.plural)
        if key == ("", "namespaces"):
            self._validate_namespace(request)
        elif key == ("", "pods"):
            await self._validate_pod(request)
        else:
            await self._validate_template(request, TEMPLATES[key])

    # -- namespaces ----------------------------------------------------------------------

    def _validate_namespace(self, request: AdmissionRequest) -> None:
        if request.subresource:
            return
        new = policy_of(labels(request.object), self._defaults)
        if request.operation == "CREATE":
            if new.errors:
                raise errors.invalid("Namespace", request.name, new.errors)
            if request.name in self._exempt.namespaces:
                self._warn_exempt(request.name, new, labels(request.object))
            return
        old = policy_of(labels(request.old_object), self._defaults)
        if new.errors and (not old.errors or new.errors != old.errors):
            raise errors.invalid("Namespace", request.name, new.errors)
        before, after = old.policy.enforce, new.policy.enforce
        if after == before or after.level == PRIVILEGED:
            return
        if after.minor == before.minor and not stricter(after, before):
            return
        if request.name in self._exempt.namespaces:
            self._warn_exempt(request.name, new, labels(request.object))
            return
        for text in self.existing_pod_warnings(request.name, after):
            add_warning(text)

    def _warn_exempt(self, namespace: str, parsed: Parsed, labels: dict[str, Any]) -> None:
        policy = parsed.policy
        if policy.fully_privileged() or policy == self._defaults:
            return
        shown = []
        for mode in MODES:
            lv: LevelVersion = getattr(policy, mode)
            if lv.level != PRIVILEGED and (PREFIX + mode in labels or f"{PREFIX}{mode}-version" in labels):
                shown.append(f"{mode}={lv}")
        add_warning(
            f'namespace "{namespace}" is exempt from Pod Security, and the policy ({", ".join(shown)}) will be ignored'
        )

    def existing_pod_warnings(self, namespace: str, enforce: LevelVersion) -> list[str]:
        """Kube's warnings when a namespace's enforce level rises: one line per distinct set of
        violations, naming the first pod (by name) and how many others share it."""
        first: list[Obj] = []
        seen_controllers: set[str] = set()
        duplicates: list[Obj] = []
        for pod in self._pods_in(namespace):
            spec = as_dict(pod.get("spec"))
            if spec.get("runtimeClassName") in self._exempt.runtime_classes:
                continue
            owner = _controller_uid(pod)
            if owner is None:
                first.append(pod)
            elif owner in seen_controllers:
                duplicates.append(pod)
            else:
                seen_controllers.add(owner)
                first.append(pod)
        pods = first + duplicates
        total = len(pods)
        pods = pods[:MAX_PODS_TO_CHECK]
        by_reason: dict[str, tuple[str, int]] = {}
        for pod in pods:
            meta = as_dict(pod.get("metadata"))
            failures = evaluate(enforce, meta, as_dict(pod.get("spec")))
            if failures:
                why = reasons(failures)
                name = str(meta.get("name", ""))
                shown, count = by_reason.get(why, (name, 0))
                by_reason[why] = (min(shown, name), count + 1)
        out: list[str] = []
        if len(pods) < total:
            out.append(
                f"new PodSecurity enforce level only checked against the first {len(pods)} of {total} existing pods"
            )
        if by_reason:
            out.append(
                f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level "{enforce}"'
            )
        lines = []
        for why, (name, count) in by_reason.items():
            if count == 1:
                lines.append(f"{name}: {why}")
            elif count == 2:
                lines.append(f"{name} (and 1 other pod): {why}")
            else:
                lines.append(f"{name} (and {count - 1} other pods): {why}")
        return out + sorted(lines)

    # -- pods and templates --------------------------------------------------------------

    async def _policy(self, namespace: str | None) -> Parsed | None:
        """The namespace's policy, or None when the request is exempt by namespace."""
        if not namespace or namespace in self._exempt.namespaces:
            return None
        ns = await self._namespace(namespace)
        if ns is None:
            raise errors.internal(f'failed to lookup namespace "{namespace}"')
        return self._policies(ns)  # parsed once per version of the namespace, not once per pod

    async def _validate_pod(self, request: AdmissionRequest) -> None:
        if request.subresource in IGNORED_POD_SUBRESOURCES or request.user.name in self._exempt.usernames:
            return
        parsed = await self._policy(request.namespace)
        if parsed is None or (not parsed.errors and parsed.policy.fully_privileged()):
            return
        pod = request.object or {}
        if request.operation == "UPDATE" and request.old_object is not None:
            if not significant_pod_update(pod, request.old_object):
                return
        self._evaluate(request, parsed, as_dict(pod.get("metadata")), as_dict(pod.get("spec")), enforce=True)

    async def _validate_template(self, request: AdmissionRequest, path: tuple[str, ...]) -> None:
        if request.subresource or request.user.name in self._exempt.usernames:
            return
        parsed = await self._policy(request.namespace)
        if parsed is None:
            return
        policy = parsed.policy
        if not parsed.errors and policy.warn.level == PRIVILEGED and policy.audit.level == PRIVILEGED:
            return
        template = _template(request.object or {}, path)
        if template is None:
            return
        self._evaluate(request, parsed, as_dict(template.get("metadata")), as_dict(template.get("spec")), enforce=False)

    def _evaluate(self, request: AdmissionRequest, parsed: Parsed, meta: Obj, spec: Obj, *, enforce: bool) -> None:
        if spec.get("runtimeClassName") in self._exempt.runtime_classes:
            return
        policy = parsed.policy
        if parsed.errors:
            log.debug("PodSecurity labels of namespace %s are invalid: %s", request.namespace, parsed.errors)
        results: dict[LevelVersion, str] = {}

        def verdict(lv: LevelVersion) -> str:
            if lv not in results:
                results[lv] = detail(evaluate(lv, meta, spec))
            return results[lv]

        if enforce:
            failed = verdict(policy.enforce)
            if failed:
                raise forbidden(request, f'violates PodSecurity "{policy.enforce}": {failed}')
        audit = verdict(policy.audit)
        if audit:
            log.debug("%s %s/%s would violate PodSecurity %s: %s", request.resource.plural,
                      request.namespace, request.name, policy.audit, audit)  # fmt: skip
        warn = verdict(policy.warn)
        if warn:
            add_warning(f'would violate PodSecurity "{policy.warn}": {warn}')


def _controller_uid(pod: Obj) -> str | None:
    refs = as_dict(pod.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("uid", ""))
    return None
