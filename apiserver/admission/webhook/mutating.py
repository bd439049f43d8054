"""MutatingAdmissionWebhook: matching mutating webhooks, one after another, each may patch.

As kube: hooks run in order, each seeing the object as the ones before left it (selectors
are judged on that object too); a JSONPatch answer is applied to the object (through
`apiserver.patch.json_patch`, under the same bounds as a client's patch).  Reinvocation: when
a hook changes the object, every earlier hook with reinvocationPolicy IfNeeded is marked, and
once the round is over the marked hooks run once more (only they, in order; a hook not called
in the first round is not called then).
raftkube reinvokes webhooks only, not the built-in mutating plugins before them.

A patch may not change apiVersion, kind, metadata.name or metadata.namespace: raftkube has
already chosen where the object is stored (kube's later checks refuse such changes too).
"""

from __future__ import annotations

import orjson

from apiserver import pruning
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.webhook.config import Hook
from apiserver.admission.webhook.dispatch import Dispatcher, convert, failure_status
from apiserver.admission.webhook.failures import CallFailure, internal_error, rejected
from apiserver.admission.webhook.review import Invocation
from apiserver.patch.errors import PatchError
from apiserver.patch.json_patch import apply_json_patch
from machinery.objects import Obj

_FIXED = (("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"))


def _at(obj: Obj, path: tuple[str, ...]) -> object:
    value: object = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


class MutatingWebhook:
    name = "MutatingAdmissionWebhook"

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def handles(self, request: AdmissionRequest) -> bool:
        return self.dispatcher.handles(request)

    async def close(self) -> None:
        await self.dispatcher.client.close()

    async def admit(self, request: AdmissionRequest) -> None:
        hooks = self.dispatcher.hooks.current()
        labels = self.dispatcher.namespace_labels(request)
        invoked_reinvocable: set[str] = set()  # IfNeeded hooks called since the last change
        reinvoke: set[str] = set()
        for round_ in (0, 1):
            if round_ == 1 and not reinvoke:
                return
            for hook in hooks:
                if round_ == 1 and hook.uid not in reinvoke:
                    continue
                invocation = await self.dispatcher.invocation(hook, request, labels)
                if invocation is None:
                    continue
                changed = await self._call(hook, invocation, request)
                if changed:
                    reinvoke |= invoked_reinvocable
                    invoked_reinvocable = set()
                if hook.reinvoke:
                    invoked_reinvocable.add(hook.uid)

    async def _call(self, hook: Hook, invocation: Invocation, request: AdmissionRequest) -> bool:
        """Call one hook and apply its patch; whether the object changed."""
        try:
            answer = await self.dispatcher.call(hook, request, invocation, mutating=True)
            if not answer.allowed:
                raise rejected(hook.name, answer.status)
            if answer.patch is None:
                return False
            operations = _decode_patch(hook, answer.patch)
        except CallFailure as failure:
            refusal = failure_status(hook, failure)
            if refusal is not None:
                raise refusal from failure
            return False
        if not operations:
            return False
        if invocation.object is None or request.object is None:
            raise internal_error(
                f'admission webhook "{hook.name}" attempted to modify the object, '
                "which is not supported for this operation"
            )
        try:
            # the apiserver's own JSON patch, with its bounds (kube applies webhook patches under
            # the same copy budget): a webhook's answer cannot grow the object without limit
            patched = apply_json_patch(invocation.object, operations)
        except PatchError as e:
            raise internal_error(f'admission webhook "{hook.name}" returned a patch that does not apply: {e}') from e
        if patched == invocation.object:
            return False
        result = convert(patched, invocation.resource, request.resource)
        assert result is not None
        for path in _FIXED:
            if _at(result, path) != _at(request.object, path):
                raise internal_error(
                    f'admission webhook "{hook.name}" changed {".".join(path)}, which a webhook may not change'
                )
        if not request.subresource and request.operation in ("CREATE", "UPDATE"):
            # kube decodes a patched object through its scheme, which drops the fields the kind
            # does not have (a custom resource's schema prunes them: conformance "should mutate
            # custom resource with pruning") and defaults what the patch added (an init
            # container gets its terminationMessagePolicy: "should mutate pod and apply
            # defaults after mutation")
            res = request.resource
            pruning.prune(res.group, res.version, res.kind, result)
            res.default(result)
        request.object = result
        return True


def _decode_patch(hook: Hook, raw: bytes) -> list[dict[str, object]]:
    try:
        operations = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise CallFailure(hook.name, f"received undecodable patch in webhook response: {e}") from e
    if not isinstance(operations, list) or not all(
        isinstance(op, dict) and isinstance(op.get("op"), str) and isinstance(op.get("path"), str) for op in operations
    ):
        raise CallFailure(
            hook.name, "received undecodable patch in webhook response: a JSON Patch is a list of operations"
        )
    return operations
