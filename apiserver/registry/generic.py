"""The one registry store: every verb for every resource, configured by its ResourceDef.

Writes go to storage with optimistic concurrency (create only if absent, update only at the
revision read) so two writers can never both win; reads of one object go to storage (fresh),
lists and watches to the resource's watch cache.  The order of a write is fixed, as in
kube-apiserver: system metadata, the resource's defaulting, mutating admission, validation,
validating admission, then storage.  Admission plugins see the user the request runs as
(`request_context`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from apiserver import errors, objects
from apiserver.admission.interface import NO_ADMISSION, AdmissionChain, AdmissionRequest, Operation
from apiserver.patch.errors import PatchError
from apiserver.patch.jsonvalue import deep_copy
from apiserver.registry import deletion, meta
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.storage_errors import as_status
from apiserver.registry.strategy import UpdateStrategy
from apiserver.request_context import current_user
from apiserver.resources.base import ResourceDef
from apiserver.storage.interface import KeyExistsError, KeyNotFoundError, RevisionConflictError, Storage
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")
# Given the current object (None when absent and creating is allowed), the object to write.
Mutation = Callable[[Obj | None], Awaitable[Obj] | Obj]
# Hooks around a write: validation beyond the resource's own, managedFields bookkeeping
# (old or None, new, manager, subresource or "": kube keys an updater by its subresource too).
FieldTracker = Callable[[Obj | None, Obj, str, str], Obj]

MAX_UPDATE_ATTEMPTS = 16


class Reservation(Protocol):
    """What a write took before it was stored (a Service's cluster IPs and node ports): kept
    when the write landed, given back when it did not."""

    async def commit(self) -> None:
        """The write is stored: also give back what the old object held and the new one does not."""

    async def revert(self) -> None:
        """The write failed or was a dry run: give back what was taken for it."""


class WriteHooks(Protocol):
    """A kind's allocations around its writes (kube's BeginCreate/BeginUpdate)."""

    async def reserve(self, new: Obj, old: Obj | None, dry_run: bool) -> Reservation:
        """Take what `new` needs (filling in what was left to allocate), or raise a StatusError."""
        ...


class _NothingReserved:
    async def commit(self) -> None:
        return None

    async def revert(self) -> None:
        return None


NOTHING_RESERVED: Reservation = _NothingReserved()


def _no_tracking(old: Obj | None, new: Obj, manager: str, subresource: str) -> Obj:
    return new


class Registry:
    def __init__(
        self,
        resource: ResourceDef,
        storage: Storage,
        *,
        clock: Callable[[], float] = time.time,
        track_fields: FieldTracker = _no_tracking,
        validate_meta: Callable[[ResourceDef, Obj, Obj | None], list[errors.Cause]] | None = None,
        admission: AdmissionChain = NO_ADMISSION,
    ) -> None:
        self.resource = resource
        self.admission = admission
        # called with each object this registry removed from storage (quota gives back its charge)
        self.after_delete: list[Callable[[ResourceDef, Obj], Awaitable[None]]] = []
        # allocations taken after validation and before validating admission, as kube's
        # BeginCreate/BeginUpdate (not for subresource writes, which change no spec)
        self.write_hooks: WriteHooks | None = None
        self.storage = storage
        self.clock = clock
        self.track_fields = track_fields
        self.validate_meta = validate_meta

    # -- encoding: a resource stored in another group's shape converts on the way -----------

    def decode(self, value: bytes, revision: int) -> Obj:
        return self.resource.read_view(objects.from_storage(value, revision))

    def _encode(self, obj: Obj) -> bytes:
        convert = self.resource.to_storage
        return objects.for_storage(convert(obj) if convert is not None else obj)

    # -- reads ------------------------------------------------------------------------------

    def _what(self, verb: str, namespace: str | None, name: str) -> str:
        where = f"{namespace}/{name}" if namespace else name
        return f"{verb} {self.resource.plural} {where}"

    async def served(self, objs: list[Obj]) -> list[Obj]:
        """Objects as decoded from storage, in this resource's version (a webhook's conversion)."""
        convert = self.resource.convert_for_serving
        return await convert(objs) if convert is not None and objs else objs

    async def _stored(self, obj: Obj) -> Obj:
        """An object in this resource's version, in the storage version (a webhook's conversion)."""
        convert = self.resource.convert_for_storage
        return (await convert([obj]))[0] if convert is not None else obj

    async def _read(self, namespace: str | None, name: str) -> Obj | None:
        with as_status(self._what("get", namespace, name)):
            stored = await self.storage.get(self.resource.key(namespace, name))
        return None if stored is None else (await self.served([self.decode(stored.value, stored.revision)]))[0]

    async def get(self, namespace: str | None, name: str) -> Obj:
        obj = await self._read(namespace, name)
        if obj is None:
            raise errors.not_found(self.resource.plural, name, self.resource.group)
        return obj

    # -- writes -----------------------------------------------------------------------------

    def _validate(self, new: Obj, old: Obj | None, subresource: UpdateStrategy | None) -> None:
        causes = list(self.validate_meta(self.resource, new, old)) if self.validate_meta else []
        if subresource is not None and subresource.validate is not None and old is not None:
            causes.extend(subresource.validate(new, old))
        else:
            causes.extend(self.resource.validate(new, old))
        if causes:
            name = str((new.get("metadata") or {}).get("name", ""))
            raise errors.invalid(self.resource.kind, name, causes, self.resource.group)

    def _tracked(self, old: Obj | None, new: Obj, manager: str, subresource: str) -> Obj:
        """managedFields recorded, or left as they are when the object is too malformed to walk
        (kube's UpdateNoErrors): validation, which runs next, refuses it with field paths."""
        try:
            return self.track_fields(old, new, manager, subresource)
        except PatchError as e:
            log.info("%s: managedFields not recorded: %s", self.resource.plural, e)
            return new

    def _request(
        self, op: Operation, namespace: str | None, name: str, new: Obj | None, old: Obj | None, sub: str, dry: bool
    ) -> AdmissionRequest:
        return AdmissionRequest(op, self.resource, sub, namespace, name, current_user(), new, old, dry)

    async def _admitted(
        self, request: AdmissionRequest, subresource: UpdateStrategy | None = None
    ) -> tuple[Obj, Reservation]:
        """Mutating admission, the resource's (or the subresource's) validation, the kind's
        allocations, validating admission: the object to store, and what was reserved for it
        (the caller commits or reverts it)."""
        chain = self.admission
        if chain.mutating:
            await chain.admit(request)
        assert request.object is not None
        self._validate(request.object, request.old_object, subresource)
        reservation = NOTHING_RESERVED
        if self.write_hooks is not None and subresource is None:
            reservation = await self.write_hooks.reserve(request.object, request.old_object, request.dry_run)
        try:
            if chain.validating:
                await chain.validate(request)
        except BaseException:
            await reservation.revert()
            raise
        return request.object, reservation

    def _typed(self, obj: Obj) -> None:
        obj["apiVersion"] = self.resource.group_version
        obj["kind"] = self.resource.kind

    async def create(self, namespace: str | None, obj: Obj, *, dry_run: bool = False, manager: str = "") -> Obj:
        self._typed(obj)
        meta.prepare_create(self.resource, obj, namespace, self.clock)
        self.resource.default(obj)
        self.resource.with_status(obj)
        name = str(obj["metadata"].get("name", ""))
        if manager:
            # what the manager sent (defaulted), before admission adds its own fields: kube's
            # field manager runs in the handler, before the registry admits the object
            obj = self._tracked(None, obj, manager, "")
        obj, reservation = await self._admitted(self._request("CREATE", namespace, name, obj, None, "", dry_run))
        if dry_run:
            await reservation.revert()
            return obj
        key = self.resource.key(namespace, name)
        try:
            with as_status(self._what("create", namespace, name)):
                try:
                    revision = await self.storage.create(key, self._encode(await self._stored(obj)))
                except KeyExistsError:
                    raise errors.already_exists(self.resource.plural, name, self.resource.group) from None
        except BaseException:
            await reservation.revert()
            raise
        await reservation.commit()
        obj["metadata"]["resourceVersion"] = str(revision)
        return obj

    async def _store_update(self, namespace: str | None, name: str, new: Obj, old: Obj) -> Obj:
        key = self.resource.key(namespace, name)
        expected = int(old["metadata"]["resourceVersion"])
        with as_status(self._what("update", namespace, name)):
            if deletion.finished(self.resource, new):
                stored = await self.storage.delete(key, expected)
                gone = (await self.served([self.decode(stored.value, stored.revision)]))[0]
                await self._deleted(gone)
                return gone
            revision = await self.storage.update(key, self._encode(await self._stored(new)), expected)
        new["metadata"]["resourceVersion"] = str(revision)
        return new

    async def mutate(
        self,
        namespace: str | None,
        name: str,
        mutation: Mutation,
        *,
        subresource: UpdateStrategy | None = None,
        dry_run: bool = False,
        manager: str = "",
        create_if_missing: bool = False,
        honour_resource_version: bool = True,
        track: bool = True,
        start_from: Obj | None = None,
    ) -> tuple[Obj, bool]:
        """Read, apply `mutation`, write at the revision read; on a concurrent write, again.

        A mutation whose result names a resourceVersion other than the one read makes it a
        precondition (PUT, or a patch that carries one): a mismatch is 409 Conflict, found on
        the retry after a lost race.  `start_from`: the object as
        the caller last knew it (never changed here), tried before reading the store; a stale
        one costs one refused write, so it needs `honour_resource_version=False` (the guess's
        resourceVersion is no precondition).  Returns (object, created)."""
        if start_from is not None and honour_resource_version:
            raise ValueError("start_from needs honour_resource_version=False")
        for attempt in range(MAX_UPDATE_ATTEMPTS):
            old = start_from if attempt == 0 and start_from is not None else await self._read(namespace, name)
            if old is None and not create_if_missing:
                raise errors.not_found(self.resource.plural, name, self.resource.group)
            result = mutation(deep_copy(old) if old is not None else None)
            new: Obj = await result if isinstance(result, Awaitable) else result
            if not isinstance(new, dict):
                raise errors.bad_request(f"the result is not an object, got {type(new).__name__}")
            self._typed(new)
            new_meta = meta.metadata(new)
            if new_meta.get("name") is None:
                new_meta["name"] = name
            if new_meta.get("name") != name:
                raise errors.bad_request(
                    f"the name of the object ({new_meta.get('name')}) does not match the name on the URL ({name})"
                )
            if old is None:
                if subresource is not None:
                    raise errors.not_found(self.resource.plural, name, self.resource.group)
                return await self.create(namespace, new, dry_run=dry_run, manager=manager if track else ""), True
            meta.check_namespace(self.resource, new, namespace)
            wanted_rv = new_meta.get("resourceVersion")
            current_rv = old["metadata"]["resourceVersion"]
            if honour_resource_version and wanted_rv and wanted_rv != current_rv:
                raise errors.conflict(self.resource.plural, name, self.resource.group)
            prepared = meta.prepare_update(self.resource, new, old, subresource)
            if subresource is None or subresource.defaults:
                self.resource.default(prepared)
                if subresource is None and self.resource.prepare_update is not None:
                    self.resource.prepare_update(prepared, old)
            self.resource.with_status(prepared)
            named = subresource.name if subresource is not None else ""
            if track:  # before admission, as for a create
                prepared = self._tracked(old, prepared, manager, named)
            request = self._request("UPDATE", namespace, name, prepared, old, named, dry_run)
            prepared, reservation = await self._admitted(request, subresource)
            prepared["metadata"]["resourceVersion"] = current_rv
            if dry_run:
                await reservation.revert()
                return prepared, False
            if _same(prepared, old):
                await reservation.revert()
                return old, False  # a no-op write is not written (no new revision, no watch event)
            try:
                stored = await self._store_update(namespace, name, prepared, old)
            except (RevisionConflictError, KeyNotFoundError):
                await reservation.revert()
                # read again and re-apply: a body that named a resourceVersion (a PUT, a patch
                # carrying one) then meets the precondition above and gets 409; a patch that
                # only kept the version it was applied to lands on the fresh object, as kube's
                continue
            except BaseException:
                await reservation.revert()
                raise
            await reservation.commit()
            return stored, False
        raise errors.conflict(self.resource.plural, name, self.resource.group, "too many concurrent writers, retry")

    async def update(
        self,
        namespace: str | None,
        name: str,
        obj: Obj,
        *,
        subresource: UpdateStrategy | None = None,
        dry_run: bool = False,
        manager: str = "",
        allow_create: bool = False,
    ) -> tuple[Obj, bool]:
        """PUT: replace the object (at the body's resourceVersion when it names one)."""
        return await self.mutate(
            namespace,
            name,
            lambda _old: obj,
            subresource=subresource,
            dry_run=dry_run,
            manager=manager,
            create_if_missing=allow_create,
        )

    async def delete(self, namespace: str | None, name: str, options: DeleteOptions) -> tuple[Obj, bool]:
        """Returns (object, deleted now).  An object kept by finalizers or a grace period is returned
        marked with its deletionTimestamp."""
        for _ in range(MAX_UPDATE_ATTEMPTS):
            old = await self.get(namespace, name)
            if self.admission.validating:
                await self.admission.validate(self._request("DELETE", namespace, name, None, old, "", options.dry_run))
            plan = deletion.plan_delete(self.resource, old, options, self.clock())
            if plan.action == "nothing" or options.dry_run:
                return plan.obj, plan.action == "delete"
            key = self.resource.key(namespace, name)
            expected = int(old["metadata"]["resourceVersion"])
            with as_status(self._what("delete", namespace, name)):
                try:
                    if plan.action == "delete":
                        stored = await self.storage.delete(key, expected)
                        gone = (await self.served([self.decode(stored.value, stored.revision)]))[0]
                        await self._deleted(gone)
                        return gone, True
                    revision = await self.storage.update(key, self._encode(await self._stored(plan.obj)), expected)
                except (RevisionConflictError, KeyNotFoundError):
                    continue
            plan.obj["metadata"]["resourceVersion"] = str(revision)
            return plan.obj, False
        raise errors.conflict(self.resource.plural, name, self.resource.group, "too many concurrent writers, retry")

    async def _deleted(self, obj: Obj) -> None:
        for hook in self.after_delete:
            try:
                await hook(self.resource, obj)
            except Exception:  # a hook never fails the delete that already happened
                log.exception("after-delete hook of %s failed", self.resource.plural)

    async def list_all(self, namespace: str | None) -> list[Obj]:
        """Every object straight from storage (deletecollection walks this, not the cache)."""
        prefix = self.resource.key_prefix(namespace)
        out: list[Obj] = []
        start = prefix
        with as_status(f"list {self.resource.plural}"):
            while True:
                page = await self.storage.list(prefix, start_key=start, limit=500)
                out.extend(await self.served([self.decode(s.value, s.revision) for s in page.items]))
                if not page.more or not page.items:
                    return out
                start = page.items[-1].key + "\x00"


def _same(a: Obj, b: Obj) -> bool:
    """Equal but for managedFields timestamps (a re-apply that changes nothing writes nothing)."""

    def strip(o: Obj) -> Obj:
        m = dict(o.get("metadata") or {})
        m.pop("managedFields", None)
        return {**o, "metadata": m}

    return strip(a) == strip(b)
