"""ValidatingAdmissionWebhook: every matching validating webhook judges the write, concurrently.

As kube: all matching hooks are called at once; the write goes on when none refused.  A
refusal is the webhook's status (`admission webhook "name" denied the request: ...`); a call
failure refuses with 500 unless the hook's failurePolicy is Ignore.  When several refuse,
the first in hook order is answered (kube answers the first to arrive).
"""

from __future__ import annotations

import asyncio

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.webhook.config import Hook
from apiserver.admission.webhook.dispatch import Dispatcher, failure_status
from apiserver.admission.webhook.failures import CallFailure, rejected
from apiserver.admission.webhook.review import Invocation


class ValidatingWebhook:
    name = "ValidatingAdmissionWebhook"

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def handles(self, request: AdmissionRequest) -> bool:
        return self.dispatcher.handles(request)

    async def close(self) -> None:
        await self.dispatcher.client.close()

    async def validate(self, request: AdmissionRequest) -> None:
        labels = self.dispatcher.namespace_labels(request)
        calls: list[tuple[Hook, Invocation]] = []
        for hook in self.dispatcher.hooks.current():
            invocation = await self.dispatcher.invocation(hook, request, labels)
            if invocation is not None:
                calls.append((hook, invocation))
        if not calls:
            return
        if len(calls) == 1:
            outcomes = [await self._one(*calls[0], request)]
        else:
            outcomes = await asyncio.gather(*(self._one(hook, inv, request) for hook, inv in calls))
        for outcome in outcomes:
            if outcome is not None:
                raise outcome

    async def _one(self, hook: Hook, invocation: Invocation, request: AdmissionRequest) -> errors.StatusError | None:
        try:
            answer = await self.dispatcher.call(hook, request, invocation, mutating=False)
        except CallFailure as failure:
            return failure_status(hook, failure)
        except errors.StatusError as e:
            return e
        return None if answer.allowed else rejected(hook.name, answer.status)
