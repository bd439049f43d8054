"""What both webhook plugins share: deciding whether a hook is called for a write, and calling it.

A hook is called when one of its rules matches the request (or, under matchPolicy
Equivalent, the same objects served under another group/version, such as core/v1 and
events.k8s.io/v1 events: the hook then sees that resource and the object converted to it),
and its objectSelector and namespaceSelector match, and then every one of its matchConditions
(`conditions_allow`).  Webhook configurations themselves are
never sent to webhooks (kube's exemption, so a bad webhook cannot lock out its own fix).
A dry run reaches only hooks that declare sideEffects None or NoneOnDryRun.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence

import orjson

from apiserver import errors
from apiserver.admission.cel import WEBHOOK, EvalError
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.matchconditions import MatchResult, match
from apiserver.admission.requestvars import request_variable
from apiserver.admission.rules import Target
from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.config import CompiledHooks, Hook
from apiserver.admission.webhook.failures import CallFailure, call_failed, dry_run_unsupported, internal_error
from apiserver.admission.webhook.review import (
    Answer,
    Invocation,
    build_request,
    parse_answer,
    review_namespace,
    review_version,
)
from apiserver.admission.webhook.selection import NamespaceLabels, NamespaceLookup, namespace_matches, object_matches
from apiserver.resources.base import ResourceDef
from apiserver.warnings import add_warning
from machinery.objects import Obj

log = logging.getLogger("raftkube.admission.webhook")

REGISTRATION = "admissionregistration.k8s.io"
EXEMPT = {
    "mutatingwebhookconfigurations",
    "validatingwebhookconfigurations",
    "validatingadmissionpolicies",
    "validatingadmissionpolicybindings",
    "mutatingadmissionpolicies",
    "mutatingadmissionpolicybindings",
}
SAFE_ON_DRY_RUN = ("None", "NoneOnDryRun")
# the resource -> the others serving the same stored objects
Equivalents = Callable[[ResourceDef], Sequence[ResourceDef]]


def no_equivalents(res: ResourceDef) -> Sequence[ResourceDef]:
    return ()


def equivalents_among(resources: Callable[[], Iterable[ResourceDef]]) -> Equivalents:
    """Resources that are one stored resource under several groups/versions (same store name),
    among those served when asked (a CRD's versions come and go while the server runs)."""

    def find(res: ResourceDef) -> Sequence[ResourceDef]:
        return [r for r in resources() if r is not res and r.store_name == res.store_name and r.plural == res.plural]

    return find


def convert(obj: Obj | None, source: ResourceDef, target: ResourceDef) -> Obj | None:
    """`obj` as `source` serves it -> as `target` serves it, through the stored shape."""
    if obj is None or source is target:
        return obj
    to_storage = source.to_storage
    stored = to_storage(obj) if to_storage is not None else dict(obj)
    out: Obj = target.read_view(stored)
    out["apiVersion"], out["kind"] = target.group_version, target.kind
    return out


def target_of(request: AdmissionRequest, res: ResourceDef) -> Target:
    return Target(request.operation, res.group, res.version, res.plural, request.subresource, review_namespace(request))


class Dispatcher:
    def __init__(
        self,
        hooks: CompiledHooks,
        client: WebhookClient,
        namespaces: NamespaceLookup,
        equivalents: Equivalents = no_equivalents,
    ) -> None:
        self.hooks = hooks
        self.client = client
        self._namespaces = namespaces
        self._equivalents = equivalents

    def handles(self, request: AdmissionRequest) -> bool:
        if request.resource.group == REGISTRATION and request.resource.plural in EXEMPT:
            return False
        return bool(self.hooks.current())

    def namespace_labels(self, request: AdmissionRequest) -> NamespaceLabels:
        return NamespaceLabels(request, self._namespaces)

    def _resource_for(self, hook: Hook, request: AdmissionRequest) -> ResourceDef | None:
        res = request.resource
        if any(rule.matches(target_of(request, res)) for rule in hook.rules):
            return res
        if hook.match_policy == "Equivalent":
            for rule in hook.rules:  # earlier rules first, as kube
                for other in self._equivalents(res):
                    if rule.matches(target_of(request, other)):
                        return other
        return None

    async def invocation(self, hook: Hook, request: AdmissionRequest, labels: NamespaceLabels) -> Invocation | None:
        """How `hook` sees this write, or None when the hook is not to be called for it."""
        res = self._resource_for(hook, request)
        if res is None:
            return None
        if hook.selector_problem is not None:
            raise internal_error(f'webhook "{hook.name}": {hook.selector_problem}')
        if not object_matches(hook, request) or not await namespace_matches(hook, request, labels):
            return None
        invocation = Invocation(
            res,
            request.subresource,
            convert(request.object, request.resource, res),
            convert(request.old_object, request.resource, res),
        )
        return invocation if conditions_allow(hook, request, invocation) else None

    async def call(self, hook: Hook, request: AdmissionRequest, invocation: Invocation, *, mutating: bool) -> Answer:
        """Send the review; the webhook's answer, or CallFailure (failurePolicy decides) or
        StatusError (a dry run the hook cannot take)."""
        if request.dry_run:
            if hook.side_effects is None:
                raise CallFailure(hook.name, "Webhook SideEffects is nil")
            if hook.side_effects not in SAFE_ON_DRY_RUN:
                raise dry_run_unsupported(hook.name)
        version = review_version(hook.name, hook.review_versions)
        uid = str(uuid.uuid4())
        body = orjson.dumps(build_request(uid, version, request, invocation))
        answer = parse_answer(hook.name, await self.client.post(hook, body), uid, version, mutating)
        for text in answer.warnings:
            add_warning(text)
        return answer


def conditions_allow(hook: Hook, request: AdmissionRequest, invocation: Invocation) -> bool:
    """Whether the hook's matchConditions let it be called, as kube's webhook matcher decides:
    any false -> not called; errors (and no false) -> failurePolicy Ignore skips the hook,
    Fail refuses the write with kube's 403 `<resource> "<name>" is forbidden: <errors>`.
    The conditions see the object as the hook would (converted to its resource)."""
    if not hook.match_conditions:
        return True
    values = {"object": invocation.object, "oldObject": invocation.old_object, "request": request_variable(request)}
    try:
        result = match(hook.match_conditions, WEBHOOK.activation(values))
    except EvalError as e:
        result = MatchResult(False, f"the request cannot be evaluated: {e}")
    if not result.error:
        return result.matches
    if hook.ignores_failures:
        log.warning("Failed evaluating match conditions, failing open %s: %s", hook.name, result.error)
        return False
    log.warning("Failed evaluating match conditions, failing closed %s: %s", hook.name, result.error)
    res = request.resource
    resource = f"{res.plural}.{res.group}" if res.group else res.plural
    subject = f'{resource} "{request.name}"' if request.name else resource
    raise errors.forbidden(f"{subject} is forbidden: {result.error}")


def failed_open(hook: Hook, failure: CallFailure) -> None:
    log.warning("Failed calling webhook, failing open %s: %s", hook.name, failure)


def failure_status(hook: Hook, failure: CallFailure) -> errors.StatusError | None:
    """None when the hook's failurePolicy is Ignore (logged), else kube's 500."""
    if hook.ignores_failures:
        failed_open(hook, failure)
        return None
    log.warning("Failed calling webhook, failing closed %s: %s", hook.name, failure)
    return call_failed(failure)
