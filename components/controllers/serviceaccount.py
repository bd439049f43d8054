"""The serviceaccount controller: every active namespace has a `default` ServiceAccount.

Keys are namespace names.  A namespace added (or its `default` account deleted) is
reconciled: when the namespace is active and the account is missing, it is created.  A
terminating namespace gets nothing (its content is being deleted)."""

from __future__ import annotations

from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, ForbiddenError, NotFoundError
from components.controllers._infra_namespace import active
from components.controllers.base import Controller
from machinery.objects import Obj

NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", kind="ServiceAccount")
DEFAULT = "default"


class ServiceAccountController(Controller):
    name = "serviceaccount"

    def setup(self) -> None:
        self.namespaces = self.factory.informer(NAMESPACES)
        self.accounts = self.factory.informer(SERVICE_ACCOUNTS)
        self.namespaces.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))
        self.accounts.add_handler(EventHandler(on_delete=self._account_deleted))

    def _account_deleted(self, account: Obj) -> None:
        meta = account.get("metadata") or {}
        if meta.get("name") == DEFAULT and meta.get("namespace"):
            self.queue.add(str(meta["namespace"]))

    async def reconcile(self, key: str) -> None:
        if not active(self.namespaces.indexer.get(key)):
            return
        if self.accounts.indexer.get(f"{key}/{DEFAULT}") is not None:
            return
        try:
            await self.client.create(SERVICE_ACCOUNTS.path(key), {"metadata": {"name": DEFAULT}})
        except AlreadyExistsError:
            pass  # the informer had not seen it yet
        except (NotFoundError, ForbiddenError) as e:
            # the namespace went away or began terminating meanwhile: nothing to do
            if "being terminated" in e.message or isinstance(e, NotFoundError):
                return
            raise
