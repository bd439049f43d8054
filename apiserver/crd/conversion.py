"""A CRD's `Webhook` conversion: objects sent to the CRD's webhook in a ConversionReview (v1)
and taken back in the version asked for, as kube's webhookConverter does.

The call goes through the admission webhooks' HTTPS client (the same service routing, CA
bundles and deadline; kube's conversion timeout is 30 s).  What comes back is checked as kube
checks it: the review's uid, `result.status: Success`, as many objects as were sent, each in
the desired apiVersion and the same kind, with name, namespace and uid unchanged; from the
webhook's metadata only labels and annotations are kept.  Any failure is a 500 whose message
names the webhook, as kube's `conversion webhook for <gvk> failed: ...`.

Objects already in the desired version are not sent (kube skips them too), so a list of
objects stored in one version costs one call.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from apiserver import errors
from apiserver.admission.webhook.client import WebhookClient
from apiserver.admission.webhook.config import Hook, TLSContexts, _endpoint
from apiserver.admission.webhook.failures import CallFailure
from machinery.objects import Obj

TIMEOUT_S = 30
_KEPT_METADATA = ("labels", "annotations")


class WebhookConverter:
    """Converts one CRD's objects through its conversion webhook."""

    def __init__(
        self,
        crd_name: str,
        conversion: Mapping[str, Any],
        client: WebhookClient,
        tls: TLSContexts,
        timeout: int = TIMEOUT_S,
    ) -> None:
        webhook = conversion.get("webhook") or {}
        self.crd_name = crd_name
        self.client = client
        self.hook = Hook(
            uid=f"conversion/{crd_name}",
            name=f"conversion webhook for {crd_name}",
            configuration=crd_name,
            rules=(),
            match_policy="Exact",
            namespace_selector=None,  # type: ignore[arg-type]  # a conversion has no selectors
            object_selector=None,  # type: ignore[arg-type]
            failure_policy="Fail",
            side_effects="None",
            timeout=timeout,
            reinvoke=False,
            review_versions=tuple(webhook.get("conversionReviewVersions") or ("v1",)),
            endpoint=_endpoint(webhook.get("clientConfig"), tls),
        )

    async def convert(self, objects: Sequence[Obj], desired: str) -> list[Obj]:
        """`objects` (any versions of the CRD) in `desired` (`group/version`); 500 on failure."""
        todo = [i for i, o in enumerate(objects) if o.get("apiVersion") != desired]
        if not todo:
            return list(objects)
        if "v1" not in self.hook.review_versions:
            raise self._failed(desired, "the webhook accepts no ConversionReview version this server sends (v1)")
        uid = str(uuid.uuid4())
        review = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [objects[i] for i in todo]},
        }
        try:
            answer = await self.client.post(self.hook, orjson.dumps(review))
        except CallFailure as e:
            raise self._failed(desired, e.reason) from e
        converted = self._read(answer, uid, desired, len(todo))
        out = list(objects)
        for at, new in zip(todo, converted, strict=True):
            out[at] = self._checked(objects[at], new, desired)
        return out

    def _failed(self, desired: str, why: str) -> errors.StatusError:
        return errors.internal(f"conversion webhook for {self.crd_name} ({desired}) failed: {why}")

    def _read(self, answer: bytes, uid: str, desired: str, count: int) -> list[Any]:
        try:
            review = orjson.loads(answer)
        except orjson.JSONDecodeError as e:
            raise self._failed(desired, f"the response is not JSON: {e}") from e
        response = review.get("response") if isinstance(review, dict) else None
        if not isinstance(response, dict):
            raise self._failed(desired, "no response in the ConversionReview")
        if response.get("uid") != uid:
            raise self._failed(desired, f"expected response uid {uid}, got {response.get('uid')!r}")
        found = response.get("result")
        result: dict[str, Any] = found if isinstance(found, dict) else {}
        if result.get("status") != "Success":
            raise self._failed(desired, str(result.get("message") or "the webhook did not succeed"))
        converted = response.get("convertedObjects")
        if not isinstance(converted, list) or len(converted) != count:
            got = len(converted) if isinstance(converted, list) else 0
            raise self._failed(desired, f"expected {count} converted objects, got {got}")
        return converted

    def _checked(self, original: Obj, new: Any, desired: str) -> Obj:
        if not isinstance(new, dict):
            raise self._failed(desired, "a converted object is not an object")
        if new.get("apiVersion") != desired:
            raise self._failed(desired, f"invalid converted object: apiVersion {new.get('apiVersion')!r}")
        if new.get("kind") != original.get("kind"):
            raise self._failed(desired, f"invalid converted object: kind {new.get('kind')!r}")
        before: dict[str, Any] = original.get("metadata") or {}
        found = new.get("metadata")
        after: dict[str, Any] = found if isinstance(found, dict) else {}
        for member in ("name", "namespace", "uid"):
            if after.get(member) != before.get(member):
                raise self._failed(desired, f"invalid converted object: metadata.{member} changed")
        meta = copy.deepcopy(before)
        for member in _KEPT_METADATA:
            if member in after:
                meta[member] = after[member]
            else:
                meta.pop(member, None)
        return {**new, "metadata": meta}
